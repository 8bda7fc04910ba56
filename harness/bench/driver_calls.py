"""``driver-calls``: the fake driver's NodePrepareResources / NodeUnprepareResources against the upstream test driver.

Both drivers run in one local cluster, each for one node with the same number of devices, and are
called over their DRA sockets the way the kubelet calls them (:class:`~.grpcapi.plugin.PluginClient`,
one claim per call, DRA v1):

- ``fake (driver host)``: the fake driver as draguard runs it at scale (one process for many nodes);
- ``fake (process per node)``: the real-shaped per-node process (``driver.hosting: per-node``);
- ``upstream test driver``: ``k8s.io/kubernetes/test/e2e/dra/test-driver`` (Go, ``kubeletplugin`` helper),
  built beside the control plane (:mod:`.driver.external`);
- ``Python floor``: a Python gRPC server that only reads the claim on prepare and answers
  (:mod:`.bench_floor`): the least any Python driver served by grpcio pays per call on this machine,
  and the most calls a second it serves. Where the floor is already slower than the upstream driver, no Python
  driver can meet the target here (``reachable_in_python``), and the fake's latency above the floor
  (``fake_over_floor_ms``) is what its own work costs.

Each claim is a real ResourceClaim in the API server, allocated by this benchmark to one device of the
driver's own ResourceSlice (status written directly, as scheduler_perf's ``allocResourceClaims`` does):
both drivers read the claim from the API server when preparing, so an API GET is part of every prepare
for both. What else each does per call is in the result (``per_call``, :data:`PER_CALL`): the fake
driver keeps a durable checkpoint (the upstream test driver keeps its prepared claims in memory) and
resets the device through its NVML-like interface on unprepare. The modelled wait of that reset
(5 ms in every run) is a parameter here, ``reset_ms``, 0 by default: the upstream test driver resets
nothing, so a reset wait would only measure the model. ``fsync_ms`` is this disk's cost of one
synced write, measured in the same run beside the drivers: the floor the fake's checkpoint puts
under its calls.

Two phases per driver, the drivers alternating within each repeat so machine noise hits all alike:

1. latency: claims one after the other, each prepared then unprepared (milliseconds per call);
2. throughput: one thread per device, each preparing and unprepping its own
   claims in a loop (calls per second over all threads, and the CPU the driver's process spent per
   call: user and system time of all its threads).

Talks to: the local backend, the drivers' sockets, the API server.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from draguard.harness.bench.floor import FloorServer
from draguard.harness.cluster.local import LocalCluster
from draguard.harness.core.errors import HarnessError
from draguard.harness.core.fsio import atomic_write
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs
from draguard.harness.driver.external import TEST_DRIVER_NAME, ExternalPluginProcess
from draguard.harness.driver.host import DriverHostProcess, HostedNode
from draguard.harness.driver.process import FakeDriverProcess
from draguard.harness.grpcapi.plugin import ClaimRef, PluginClient
from draguard.harness.kube import RUN_LABEL, Kube, Obj
from draguard.harness.nodes.node import NodeSpec, register_node

__all__ = ["PER_CALL", "FLOOR", "bench_driver_calls"]

Progress = Callable[[str], None]


def _claim(name: str, namespace: str, run: str) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "labels": {RUN_LABEL: run}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "bench", "allocationMode": "ExactCount", "count": 1}}]}}}  # fmt: skip


def _allocated(kube: Kube, obj: Obj, driver: str, node: str, device: str) -> Obj:
    obj["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": driver, "pool": node, "device": device}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}  # fmt: skip
    return kube.replace(obj, "status")


def _devices(kube: Kube, driver: str, node: str, timeout: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = sorted(d["name"] for s in kube.items("ResourceSlice")
                       if s["spec"].get("driver") == driver and s["spec"].get("nodeName") == node
                       for d in s["spec"].get("devices") or [])  # fmt: skip
        if names:
            return names
        time.sleep(0.3)

    raise HarnessError(f"driver {driver} published no ResourceSlice for node {node} within {timeout:.0f}s")


_FAKE = ("prepare: GET the ResourceClaim; checkpoint PrepareStarted (file fsync, rename); CDI spec (rename); "
         "checkpoint PrepareCompleted (file fsync, rename); fsync of the checkpoint's directory. unprepare: checkpoint "
         "UnprepareStarted (file fsync, rename); device reset through NVML (device truth read and written under its "
         "flock, modelled reset wait {reset_ms} ms); CDI spec removed; checkpoint without the claim (file fsync, rename); "
         "fsync of the directory. Both: the calls-in-flight counter rewritten in place twice (one pwrite under flock, no fsync); {how}.")
PER_CALL = {
    "fake (driver host)": _FAKE.replace("{how}", "one Python process serving many nodes"),
    "fake (process per node)": _FAKE.replace("{how}", "one Python process for this node"),
    "upstream test driver": "prepare: the kubeletplugin helper GETs the ResourceClaim (dynamic-resource-allocation "
                            "kubeletplugin/draplugin.go); CDI spec written with os.WriteFile, no fsync; prepared claims "
                            "kept in memory, no checkpoint. unprepare: CDI spec removed (os.Remove), claim dropped from "
                            "memory; no reset (test/e2e/dra/test-driver/app/kubeletplugin.go).",
}  # fmt: skip
"""What each driver does per call, so that the ratios can be read for what they compare."""

UPSTREAM_QPS = 100_000
"""The upstream driver's API client rate limit here (its defaults: 50 requests a second, bursts of 100).
At the defaults every prepare past the burst waited for the limiter (one GET each): its calls per
second depended on how many reads the phase before had spent (330-400 right after the latency phase,
1300-1650 after a pause; 133 with 400 claims), which measured the limiter, not the driver. The fake
driver and the floor read without a limit."""

FLOOR = "Python floor"
PER_CALL[FLOOR] = ("prepare: GET the ResourceClaim (the fake's API client), UID checked, the allocation's devices "
                   "returned; unprepare: answers success. Nothing kept, no CDI spec, no device touched; a synchronous "
                   "grpc.server with 16 threads (draguard.harness.bench.floor).")


def _fsync_ms(directory: Path, n: int = 30) -> float:
    """Median milliseconds of one synced write here: 1 KiB to a temporary file, fsync, rename (a fake
    prepare makes two of these and one directory fsync)."""
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        atomic_write(directory / "fsync-probe", b"x" * 1024, sync="file")
        samples.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(samples), 2)


def _ms(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"p50": round(statistics.median(s), 2), "p90": round(s[int(len(s) * 0.9)], 2),
            "p99": round(s[min(len(s) - 1, int(len(s) * 0.99))], 2), "max": round(s[-1], 2), "n": len(s)}  # fmt: skip


class _Target:
    """One driver on one node: its claims (one list per device) and a client on its DRA socket."""

    def __init__(self, label: str, kube: Kube, driver: str, node: str, socket: Path, namespace: str, run: str,
                 claims: int, devices: list[str] | None = None) -> None:  # fmt: skip
        """``devices``: allocate from these names (the floor publishes no ResourceSlice) instead of the
        driver's published devices on ``node``."""
        self.label, self.driver, self.node = label, driver, node
        self.client = PluginClient(dra_socket=socket, driver=driver)
        devices = devices or _devices(kube, driver, node)
        objs = kube.bulk(kube.create, [_claim(f"{node}-{i}", namespace, run) for i in range(claims)])
        for o in objs:
            if isinstance(o, Exception):
                raise o
        done = kube.bulk(lambda io: _allocated(kube, io[1], driver, node, devices[io[0] % len(devices)]),
                         list(enumerate(objs)))  # fmt: skip
        for o in done:
            if isinstance(o, Exception):
                raise o
        self.per_device: list[list[Any]] = [[] for _ in devices]
        for i, o in enumerate(done):
            self.per_device[i % len(devices)].append(ClaimRef(namespace, o["metadata"]["name"], o["metadata"]["uid"]))

    def call(self, what: str, ref: Any) -> float:
        t0 = time.perf_counter()
        if what == "prepare":
            result = self.client.prepare([ref])[ref.uid]
            error = result.error
        else:
            error = self.client.unprepare([ref]).get(ref.uid, "")
        elapsed = (time.perf_counter() - t0) * 1000
        if error:
            raise HarnessError(f"{self.label}: {what} of {ref} failed: {error}")
        return elapsed

    def latency(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"prepare": [], "unprepare": []}
        for ref in [r for refs in zip(*self.per_device) for r in refs]:
            out["prepare"].append(self.call("prepare", ref))
            out["unprepare"].append(self.call("unprepare", ref))
        return out

    def throughput(self, pid: int | None) -> dict[str, float]:
        """Calls per second, and the CPU the driver's process (``pid``) spent per call meanwhile."""
        errors: list[BaseException] = []

        def worker(refs: list[Any]) -> None:
            try:
                for ref in refs:
                    self.call("prepare", ref)
                    self.call("unprepare", ref)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(refs,)) for refs in self.per_device]
        server = psutil.Process(pid)
        cpu0 = sum(server.cpu_times()[:2])
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        cpu = sum(server.cpu_times()[:2]) - cpu0
        if errors:
            raise errors[0]
        calls = 2 * sum(len(r) for r in self.per_device)
        return {"calls_per_s": round(calls / wall, 1), "cpu_ms_per_call": round(cpu * 1000 / calls, 3)}


def bench_driver_calls(repeat: int, progress: Progress, pods: int = 96, devices: int = 8, reset_ms: int = 0) -> dict[str, Any]:
    """``pods``: claims per driver (one per pod, as the kubelet sends them); ``devices`` per node;
    ``reset_ms``: the fake driver's modelled device reset wait (scenarios run with 5)."""
    runs: list[dict[str, Any]] = []
    fsyncs: list[float] = []
    for i in range(repeat):
        with LocalCluster(f"bench-drv-{os.getpid()}-{i}", progress=lambda m: None, remove_on_exit=True) as cluster, \
                tempfile.TemporaryDirectory(prefix="dgd", dir="/tmp") as tmp:  # fmt: skip
            kube = cluster.kube()
            run = uuid.uuid4().hex[:6]
            root = Path(tmp)
            names = {"host": f"dh{run}", "proc": f"dp{run}", "up": f"du{run}", "floor": f"df{run}"}
            for n in names.values():
                register_node(kube, NodeSpec(n, run_id=run))
            ns = f"drv-{run}"
            kube.create_namespace(ns, {RUN_LABEL: run})
            host = DriverHostProcess(cluster.kubeconfig, root / "host", [HostedNode(names["host"], None, devices)],
                                     reset_ms=reset_ms)  # fmt: skip
            proc = FakeDriverProcess(cluster.kubeconfig, names["proc"], root=root / "proc", devices=devices,
                                     reset_ms=reset_ms)  # fmt: skip
            upstream = ExternalPluginProcess(cluster.kubeconfig, names["up"], root=root / "up", devices=devices,
                                             kube_api_qps=UPSTREAM_QPS, kube_api_burst=UPSTREAM_QPS)  # fmt: skip
            floor = FloorServer(cluster.kubeconfig, root / "floor", DEFAULT_DRIVER)
            try:
                host.start()
                proc.start()
                upstream.start()
                floor.start()
                targets = [
                    _Target("fake (driver host)", kube, DEFAULT_DRIVER, names["host"],
                            NodeDirs(root / "host", names["host"]).dra_socket(DEFAULT_DRIVER), ns, run, pods),
                    _Target("fake (process per node)", kube, DEFAULT_DRIVER, names["proc"],
                            NodeDirs(root / "proc", names["proc"]).dra_socket(DEFAULT_DRIVER), ns, run, pods),
                    _Target("upstream test driver", kube, TEST_DRIVER_NAME, names["up"], upstream.dra_socket, ns, run, pods),
                ]  # fmt: skip
                floor_target = _Target(FLOOR, kube, DEFAULT_DRIVER, names["floor"], floor.socket, ns, run, pods,
                                       devices=[f"gpu-{d}" for d in range(devices)])  # fmt: skip
                sample: dict[str, Any] = {}
                for t in [*targets, floor_target]:  # warm-up: channels connected, first API reads done
                    t.call("prepare", t.per_device[0][0])
                    t.call("unprepare", t.per_device[0][0])
                for t in [*targets, floor_target]:
                    lat = t.latency()
                    sample[t.label] = {"prepare_ms": _ms(lat["prepare"]), "unprepare_ms": _ms(lat["unprepare"])}
                for t, pid in zip([*targets, floor_target], [host.pid, proc.pid, upstream.pid, floor.pid]):
                    sample[t.label].update(t.throughput(pid))
                sample["fsync_ms"] = _fsync_ms(root)
                for t in [*targets, floor_target]:
                    t.client.close()
            finally:
                floor.stop()
                upstream.stop()
                proc.stop()
                host.stop()
        fsync = sample.pop("fsync_ms")
        up = sample["upstream test driver"]
        for label in ("fake (driver host)", "fake (process per node)"):
            s = sample[label]
            s["prepare_p50_over_upstream"] = round(s["prepare_ms"]["p50"] / up["prepare_ms"]["p50"], 2)
            s["unprepare_p50_over_upstream"] = round(s["unprepare_ms"]["p50"] / up["unprepare_ms"]["p50"], 2)
            s["upstream_calls_per_s_over_this"] = round(up["calls_per_s"] / s["calls_per_s"], 2)
        f = sample[FLOOR]
        f["prepare_p50_over_upstream"] = round(f["prepare_ms"]["p50"] / up["prepare_ms"]["p50"], 2)
        f["unprepare_p50_over_upstream"] = round(f["unprepare_ms"]["p50"] / up["unprepare_ms"]["p50"], 2)
        f["upstream_calls_per_s_over_this"] = round(up["calls_per_s"] / f["calls_per_s"], 2)
        runs.append(sample)
        fsyncs.append(fsync)
        progress(f"driver-calls #{i + 1}: " + "; ".join(
            f"{k}: prepare p50 {v['prepare_ms']['p50']} ms, unprepare p50 {v['unprepare_ms']['p50']} ms, "
            f"{v['calls_per_s']} calls/s, {v['cpu_ms_per_call']} ms CPU/call" for k, v in sample.items())
            + f"; synced write {fsync} ms")  # fmt: skip

    def med(label: str, key: str) -> float:
        return round(float(statistics.median(r[label][key] for r in runs)), 2)

    def p50(label: str, call: str) -> float:
        return round(float(statistics.median(r[label][f"{call}_ms"]["p50"] for r in runs)), 2)

    host_label = "fake (driver host)"
    floor_ratios = {"prepare": med(FLOOR, "prepare_p50_over_upstream"), "unprepare": med(FLOOR, "unprepare_p50_over_upstream"),
                    "throughput": med(FLOOR, "upstream_calls_per_s_over_this")}  # fmt: skip
    ratios = {"prepare_latency_ratio_median": med(host_label, "prepare_p50_over_upstream"),
              "unprepare_latency_ratio_median": med(host_label, "unprepare_p50_over_upstream"),
              "throughput_ratio_median": med(host_label, "upstream_calls_per_s_over_this")}  # fmt: skip
    return {
        "unit": "ms (fake driver host, prepare p50)",
        "median": round(statistics.median(r[host_label]["prepare_ms"]["p50"] for r in runs), 2),
        "claims": pods, "devices_per_node": devices, "parallel": devices,
        "upstream_prepare_p50_ms_median": round(statistics.median(r["upstream test driver"]["prepare_ms"]["p50"] for r in runs), 2),
        **ratios,
        "process_per_node_prepare_latency_ratio_median": med("fake (process per node)", "prepare_p50_over_upstream"),
        "fake_unprepare_p50_ms_median": round(statistics.median(r[host_label]["unprepare_ms"]["p50"] for r in runs), 2),
        "upstream_unprepare_p50_ms_median": round(statistics.median(r["upstream test driver"]["unprepare_ms"]["p50"] for r in runs), 2),
        "fake_calls_per_s_median": round(statistics.median(r[host_label]["calls_per_s"] for r in runs), 1),
        "upstream_calls_per_s_median": round(statistics.median(r["upstream test driver"]["calls_per_s"] for r in runs), 1),
        "floor_prepare_p50_ms_median": p50(FLOOR, "prepare"),
        "floor_unprepare_p50_ms_median": p50(FLOOR, "unprepare"),
        "floor_prepare_latency_ratio_median": floor_ratios["prepare"],
        "floor_unprepare_latency_ratio_median": floor_ratios["unprepare"],
        "floor_throughput_ratio_median": floor_ratios["throughput"],
        "floor_calls_per_s_median": round(statistics.median(r[FLOOR]["calls_per_s"] for r in runs), 1),
        "cpu_ms_per_call_median": {k: round(statistics.median(r[k]["cpu_ms_per_call"] for r in runs), 3)
                                   for k in runs[0]},
        "fake_over_floor_ms": {c: round(p50(host_label, c) - p50(FLOOR, c), 2) for c in ("prepare", "unprepare")},
        "reachable_in_python": all(v <= 1.0 for v in floor_ratios.values()),
        "floor": "the ratios of a Python gRPC server that reads the claim and keeps nothing (see per_call) to the "
                 "upstream driver, as for the fake; one over 1: no Python driver served by grpcio is as fast as the "
                 "upstream driver there on this machine",
        "fake_reset_ms": reset_ms,
        "fsync_ms_median": round(statistics.median(fsyncs), 2),
        "fsync_ms_samples": fsyncs,
        "per_call": {k: v.replace("{reset_ms}", str(reset_ms)) for k, v in PER_CALL.items()},
        "ratios": "fake/upstream for latency (under 1: the fake is faster); upstream/fake for calls per second "
                  "(under 1: the fake is faster)",
        "target": "the Python fake driver at least as fast as the upstream Go test driver (ratios <= 1)",
        "met": all(v <= 1.0 for v in ratios.values()),
        "samples": runs,
    }  # fmt: skip
