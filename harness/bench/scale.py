"""Benchmarks of the work itself: pods with device claims scheduled, prepared, run and released at scale.

- ``dra-throughput`` (scheduler_perf's ``SchedulingWithResourceClaimTemplate`` shape: N nodes, P pods
  with one template claim each): five measurements in one run, each on a fresh local control plane,
  so their ratios hold on a noisy machine:

  1. ``control-plane, default limits``: Nodes and ResourceSlices written straight to the API (no
     driver, no kubelet, no draguard runner), P pods created 16 at a time, with the components'
     upstream client rate limits (scheduler 50/100, controller manager 20/30);
  2. ``control-plane, raised limits``: the same with draguard's defaults (500/1000) — the
     "scheduler alone" figure draguard is compared with; then once more with every node's Lease
     renewed every 10 s as the fake node agent does (``control_plane_with_leases``): the share of
     the gap to draguard that the fleet's heartbeats alone explain;
  3. ``draguard``: the runner end to end (fake nodes, the driver host, pods created, prepared,
     Running, deleted), raised limits. The pods stay until all are Running (the scenario settles
     after 4 quiet seconds, within a timeout scaled to the pod count), then are deleted; the time
     to delete them all (``delete_all_s``) is reported too;
  4. ``scheduler_perf``: the upstream test itself (``test/integration/scheduler_perf/dra``, built from
     the same ``k8s.io/kubernetes`` module by ``draguard cluster build --scheduler-perf``), on the
     same shape (its own ``5000pods_500nodes`` workload unchanged at 500 nodes/5000 pods/10 devices):
     see :mod:`.schedperf`. Optional: when it is not built the result says so and how to build it.

  Pods scheduled per second (and Running per second for 3) are taken after warm-up: between the
  10th and the 90th percentile of the pods' times, as scheduler_perf averages its steady phase.
  Harness overhead (CPU share of the machine and peak memory of draguard's own processes: this
  one, the fake nodes and the driver host; not etcd or the control plane) is sampled during 3,
  with the fake nodes' health under that load: every node Lease's age (renewTime, sampled every
  2 s; heartbeats every 10 s, so healthy ages stay near 10 s) and the prepare lag (a pod's
  nodeName seen to its Running seen: the fake node's claim read, prepare call and status patch).

  Earlier the upstream test was not run, on the belief that building it costs several times the
  control-plane build and that it needs etcd on a fixed port. Neither holds: ``go test -c`` of the
  package reuses the control plane's build cache (about 1.5 min, then 10 s to relink; its go.mod
  needs nothing added), and it starts its own etcd from ``$PATH`` on a unix socket. What it does
  need: ``TEST_SRCDIR`` for the test API server's cert fixtures (``-trimpath`` hides their path).
- ``invariant-cost`` (detection latency, modelled): the continuous invariants judged on synthetic
  snapshots of growing size; a violation the full round finds (the drivers' books, the device truth,
  gangs) is reported at most one judging interval (``JUDGE_INTERVAL``, 0.5 s) plus one evaluation
  after it is visible in the watch cache, so its p99 detection latency = interval + p99 evaluation
  (one in a claim alone is judged sooner, in a claims round; ``detection`` measures the whole live). Each
  size is judged twice: every pod Running with its claim allocated, and every pod pending with its
  template claim not yet in its status (``backlog``: the shape that once made a round pods x claims).
- ``churn``: ``draguard load`` at a target rate on a local cluster with fake nodes and the driver
  host: achieved rate and p99 time to Running.
- ``library-wall``: the scenario library's wall time, warm, one scenario after the other.
"""

from __future__ import annotations

import copy
import functools
import os
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

from draguard.harness.bench.fake_nodes import _renewed_at
from draguard.harness.bench.schedperf import find_scheduler_perf, run_scheduler_perf, upstream_threshold
from draguard.harness.campaign.parallel import run_in_parallel
from draguard.harness.cluster.local import ClusterConfig, LocalCluster
from draguard.harness.core.errors import HarnessError
from draguard.harness.driver.host import DriverHostProcess, HostedNode
from draguard.harness.driver.slices import SlicePublisher, build_slices
from draguard.harness.driver.topology import generic, resolve
from draguard.harness.invariants import DeviceId, Gang, Snapshot, evaluate, judged
from draguard.harness.judge.incremental import INCREMENTAL, Incremental
from draguard.harness.kube import RUN_LABEL, Kube, Obj
from draguard.harness.load.engine import LoadConfig, run_load
from draguard.harness.nodes.heartbeat import Heartbeats
from draguard.harness.nodes.node import LEASE_NAMESPACE, NodeSpec, patch_status, register_node, renew_lease
from draguard.harness.nodes.process import FakeNodesProcess
from draguard.harness.runner.runner import JUDGE_INTERVAL, Runner, RunOptions
from draguard.harness.scenario.loader import discover, load_scenario, parse_scenario

__all__ = ["bench_dra_throughput", "bench_invariant_cost", "bench_churn", "bench_library_wall", "UPSTREAM_THRESHOLD"]

Progress = Callable[[str], None]
UPSTREAM_THRESHOLD = 56.0
"""scheduler_perf's threshold for SchedulingWithResourceClaimTemplate/5000pods_500nodes at v1.37.2, pods/s
(``test/integration/scheduler_perf/dra/performance-config.yaml``: ``dra: 56 # typically above 70``); the
figure is read from the built scheduler_perf's config when there is one."""
DRIVER = "gpu.draguard.dev"


def _rate(times: list[float], warm: float = 0.1) -> float | None:
    """Events per second between the ``warm`` and ``1 - warm`` quantiles of ``times``."""
    ts = sorted(times)
    if len(ts) < 4:
        return None
    lo, hi = int(len(ts) * warm), max(int(len(ts) * (1 - warm)) - 1, int(len(ts) * warm) + 1)
    span = ts[hi] - ts[lo]
    return round((hi - lo) / span, 2) if span > 0 else None


class _Usage:
    """CPU seconds and peak RSS of this process and its non-control-plane descendants, sampled."""

    def __init__(self, interval: float = 1.0) -> None:
        self.psutil = psutil
        self.me = psutil.Process(os.getpid())
        self.interval = interval
        self.cpu: dict[int, float] = {}
        self.roles: dict[int, str] = {}
        self.series: list[tuple[float, dict[str, float]]] = []
        self.peak_rss = 0
        self.stop = threading.Event()
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _ours(self) -> list[Any]:
        procs = [self.me]
        for p in self.me.children(recursive=True):
            try:
                name = p.name()
            except self.psutil.Error:
                continue
            if not (name.startswith("kube-") or name.startswith("etcd")):
                procs.append(p)
        return procs

    def _loop(self) -> None:
        while True:
            rss = 0
            for p in self._ours():
                try:
                    t = p.cpu_times()
                    self.cpu[p.pid] = t.user + t.system
                    if p.pid not in self.roles:
                        self.roles[p.pid] = _role(p, self.me)
                    rss += p.memory_info().rss
                except self.psutil.Error:
                    continue
            self.peak_rss = max(self.peak_rss, rss)
            self.series.append((time.monotonic(), self._by_role()))
            if self.stop.wait(self.interval):
                return

    def _by_role(self) -> dict[str, float]:
        by_role: dict[str, float] = {}
        for pid, v in list(self.cpu.items()):
            role = self.roles.get(pid, "other")
            by_role[role] = by_role.get(role, 0.0) + v - self.base.get(pid, 0.0)
        return by_role

    def window(self, start: float, end: float) -> dict[str, Any] | None:
        """The harness's share of the machine between two ``time.monotonic()`` instants (the samples
        nearest inside them), split by process; None when fewer than two samples fall inside."""
        inside = [(t, cpu) for t, cpu in self.series if start <= t <= end]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        (t0, a), (t1, b) = inside[0], inside[-1]
        used = {role: b[role] - a.get(role, 0.0) for role in b}
        return {"wall_s": round(t1 - t0, 1), "cpu_s": round(sum(used.values()), 2),
                "machine_share": _share(sum(used.values()), t1 - t0),
                "machine_share_by_process": {k: _share(v, t1 - t0) for k, v in sorted(used.items())}}  # fmt: skip

    def __enter__(self) -> _Usage:
        self.base = {p.pid: sum(p.cpu_times()[:2]) for p in self._ours()}
        self.started = time.monotonic()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.wall = time.monotonic() - self.started

    def result(self) -> dict[str, Any]:
        by_role = self._by_role()
        cpu = sum(by_role.values())
        return {"cpu_s": round(cpu, 2), "wall_s": round(self.wall, 2),
                "machine_share": _share(cpu, self.wall) if self.wall else None,
                "cpu_s_by_process": {k: round(v, 2) for k, v in sorted(by_role.items())},
                "peak_rss_mib": round(self.peak_rss / 2**20, 1)}  # fmt: skip


def _share(cpu_s: float, wall_s: float) -> float:
    """CPU seconds as a share of the whole machine's over ``wall_s`` (every core counts)."""
    return round(cpu_s / (wall_s * (os.cpu_count() or 1)), 3)


_ROLES = (("draguard.harness.nodes.main", "fake nodes"), ("draguard.harness.driver.main", "fake driver"))


def _role(proc: Any, me: Any) -> str:
    """Which part of the harness a process is (the CPU split in the result): the runner is this process."""
    if proc.pid == me.pid:
        return "runner"
    try:
        cmdline = " ".join(proc.cmdline())
    except Exception:  # noqa: BLE001 - gone or hidden: counted, not named
        return "other"
    return next((role for module, role in _ROLES if module in cmdline), "other")


def _pod(name: str, namespace: str, run: str, template: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {RUN_LABEL: run}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": "gpu"}]}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                     "tolerations": [{"operator": "Exists"}]}}  # fmt: skip


def _watch_pod_times(kube: Kube, namespace: str, stop: threading.Event) -> tuple[dict[str, float], dict[str, float]]:
    scheduled: dict[str, float] = {}
    running: dict[str, float] = {}

    def loop() -> None:
        rv = ""
        while not stop.is_set():
            try:
                if not rv:
                    _, rv = kube.list("Pod", namespace)
                for etype, obj in kube.watch("Pod", namespace, rv, timeout_seconds=30, stop=stop):
                    rv = obj["metadata"].get("resourceVersion", rv)
                    name = obj["metadata"].get("name", "")
                    now = time.monotonic()
                    if obj.get("spec", {}).get("nodeName"):
                        scheduled.setdefault(name, now)
                    if (obj.get("status") or {}).get("phase") == "Running":
                        running.setdefault(name, now)
            except Exception:  # noqa: BLE001 - re-list
                rv = ""
                time.sleep(0.2)

    threading.Thread(target=loop, daemon=True).start()
    return scheduled, running


def _control_plane_only(nodes: int, pods: int, devices: int, qps: int | None, progress: Progress,
                        leases: bool = False) -> dict[str, Any]:  # fmt: skip
    """Nodes and slices straight to the API, pods created 16 at a time: what the scheduler alone does.

    ``leases``: every node's Lease is also renewed every 10 s, spread over the interval as the fake node
    agent does (:class:`~.nodes.heartbeat.Heartbeats`), so the control plane carries the fleet's
    heartbeats and nothing else of the harness.
    """
    # None: no flag at all, so each component keeps its upstream default (scheduler 50/100, KCM 20/30).
    config = ClusterConfig(client_qps=qps, client_burst=qps * 2 if qps else None)
    label = (f"{qps}/{qps * 2}" if qps else "upstream defaults") + (", node leases renewed" if leases else "")
    with LocalCluster(f"bench-cp-{os.getpid()}-{uuid.uuid4().hex[:4]}", config, progress=lambda m: None,
                      remove_on_exit=True) as cluster:
        kube = cluster.kube()
        run = uuid.uuid4().hex[:6]
        specs = [NodeSpec(f"n{run}-{i}", run_id=run) for i in range(nodes)]
        inventory_specs = generic(devices)

        def node(spec: NodeSpec) -> None:
            register_node(kube, spec)
            patch_status(kube, spec)
            SlicePublisher(kube, DRIVER, spec.name).publish(resolve(inventory_specs, spec.name))

        for result in kube.bulk(node, specs, 8):
            if isinstance(result, Exception):
                raise result
        pool = ThreadPoolExecutor(8, thread_name_prefix="bench-lease")
        beats = Heartbeats(pool, 10.0)
        if leases:
            beats.add_all({spec.name: functools.partial(renew_lease, kube, spec) for spec in specs})
            beats.start()
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                     "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})  # fmt: skip
        ns = f"bench-{run}"
        kube.create_namespace(ns, {RUN_LABEL: run})
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                     "metadata": {"name": "gpu", "namespace": ns},
                     "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                         "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}}]}}}})  # fmt: skip
        stop = threading.Event()
        scheduled, _ = _watch_pod_times(kube, ns, stop)
        t0 = time.monotonic()
        kube.bulk(kube.create, [_pod(f"p-{i}", ns, run, "gpu") for i in range(pods)])
        created = time.monotonic() - t0
        deadline = time.monotonic() + max(120.0, pods / 2)
        while len(scheduled) < pods and time.monotonic() < deadline:
            time.sleep(0.5)
        stop.set()
        beats.stop()
        pool.shutdown(wait=True)
        out = {"limits": label, "pods": pods, "nodes": nodes, "scheduled": len(scheduled),
               "created_per_s": round(pods / created, 1), "scheduled_per_s": _rate(list(scheduled.values())),
               "wall_s": round(time.monotonic() - t0, 1)}  # fmt: skip
        progress(f"dra-throughput control plane only ({label}): {out['scheduled_per_s']} pods/s scheduled")
        return out


def _quantiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    v = sorted(values)

    def q(f: float) -> float:
        return round(v[min(len(v) - 1, int(len(v) * f))], 3)

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": round(v[-1], 3), "n": len(v)}


class _LeaseAges:
    """Samples the age of every fake node's Lease (renewTime) while a run is live, every ``interval`` s."""

    def __init__(self, runner: Any, prefix: str, interval: float = 2.0) -> None:
        self.runner, self.prefix, self.interval = runner, prefix, interval
        self.max_per_sample: list[float] = []
        self.ages: list[float] = []
        self.stop = threading.Event()
        self.renewed: dict[str, float] = {}
        self.live = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.watcher = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        """Keep every fleet Lease's renewTime from one list-and-watch: sampling costs no API call (a LIST
        of 500 Leases every 2 s was a tenth of the runner's CPU and load on the API server under test)."""
        def event(etype: str, lease: dict[str, Any]) -> None:
            name, renew = lease["metadata"]["name"], (lease.get("spec") or {}).get("renewTime")
            if etype == "DELETED":
                self.renewed.pop(name, None)
            elif name.startswith(self.prefix) and renew:
                self.renewed[name] = _renewed_at(renew)

        def listed(items: list[dict[str, Any]]) -> None:
            self.renewed.clear()
            for lease in items:
                event("ADDED", lease)
            self.live = True

        def lost(exc: Exception) -> None:
            self.live = False  # what the watch missed meanwhile would read as ages that never were

        while not self.stop.is_set():
            kube = self.runner.live_kube()
            if kube is None:
                self.stop.wait(0.5)
                continue
            kube.list_watch("Lease", listed, event, self.stop, namespace=LEASE_NAMESPACE, on_error=lost)

    def _loop(self) -> None:
        while not self.stop.wait(self.interval):
            if not self.live or self.runner.live_kube() is None:
                continue
            now = time.time()
            ages = [now - t for t in list(self.renewed.values())]
            if ages:
                self.ages.extend(ages)
                self.max_per_sample.append(max(ages))

    def __enter__(self) -> _LeaseAges:
        self.thread.start()
        self.watcher.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.watcher.join(10)

    def result(self) -> dict[str, Any]:
        return {"samples": len(self.max_per_sample), "all_ages_s": _quantiles(self.ages),
                "max_s": round(max(self.max_per_sample), 2) if self.max_per_sample else None,
                "stale_over_40s": sum(1 for a in self.ages if a > 40)}  # fmt: skip


def _draguard(nodes: int, pods: int, devices: int, progress: Progress) -> dict[str, Any]:
    """The runner end to end; the pods stay until every one is Running (or the settle timeout), then are deleted."""
    # settle waits for 4 s without a change: with P pods arriving, that is once all are Running or stuck.
    wait = max(60, pods // 2)
    text = f"""
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {{name: bench-dra-throughput}}
spec:
  driver: {{hosting: shared}}
  nodes: [{{namePrefix: n, count: {nodes}, topology: {{gpus: {devices}}}}}]
  deviceClasses: [{{name: {DRIVER}, selectors: ["device.driver == '{DRIVER}'"]}}]
  workloads: [{{name: p, replicas: {pods}, claims: [{{name: gpu, requests: [{{name: gpu, deviceClassName: {DRIVER}}}]}}]}}]
  settle: {{timeout: {wait}s, cleanup: {wait}s}}
  expect: {{hold: [claim-atomic, no-double-allocation, no-leak]}}
"""
    scenario = parse_scenario(text, "bench.yaml")
    with _Usage() as usage:
        runner = Runner(scenario, RunOptions(backend="local", progress=progress))
        with _LeaseAges(runner, "n-") as leases:
            result = runner.run()
        if result.record is not None:
            result.record.discard()  # no report is rendered: what the run recorded goes
        timeline = list(result.timeline.events()) if result.timeline is not None else []
        started = runner.timeline.start
    scheduled: dict[str, float] = {}
    running: dict[str, float] = {}
    phases = {}
    for e in timeline:
        if e["source"] == "phase":
            phases[e["summary"]] = e["t"]
        if e["kind"] != "Pod" or e["source"] != "watch":
            continue
        if "node=" in e["summary"]:
            scheduled.setdefault(e["name"], e["t"])
        if e["summary"].startswith("Running"):
            running.setdefault(e["name"], e["t"])
    lag = [running[n] - scheduled[n] for n in running if n in scheduled]
    cleanup = next((t for k, t in phases.items() if k.startswith("cleanup")), None)
    gone = next((t for k, t in phases.items() if "consumers" in k), None)
    out = {"pods": pods, "nodes": nodes, "devices_per_node": devices, "scheduled": len(scheduled),
           "running": len(running), "scheduled_per_s": _rate(list(scheduled.values())),
           "running_per_s": _rate(list(running.values())),
           "prepare_lag_s": _quantiles(lag), "lease_age": leases.result(),
           "delete_all_s": round(gone - cleanup, 1) if cleanup is not None and gone is not None else None,
           "ok": result.ok, "error": result.error, "wall_s": round(result.duration, 1),
           "phases": {k: v for k, v in phases.items()
                      if any(w in k for w in ("deployed", "published", "gone", "settle", "cleanup"))},
           "harness_overhead": usage.result(),
           # From the first pod scheduled to the last Running: the work itself, without the fleet's start and the clean-up.
           "harness_overhead_while_scheduling": usage.window(started + min(scheduled.values()), started + max(running.values()))
           if scheduled and running else None}  # fmt: skip
    progress(f"dra-throughput draguard: {out['scheduled_per_s']} scheduled/s, {out['running_per_s']} Running/s "
             f"({out['running']}/{pods} Running), prepare lag {out['prepare_lag_s']}, lease age {out['lease_age']}, "
             f"overhead {out['harness_overhead']}, while scheduling {out['harness_overhead_while_scheduling']}")
    return out


def _scheduler_perf(nodes: int, pods: int, devices: int, progress: Progress, wanted: bool | None) -> dict[str, Any]:
    """Upstream scheduler_perf on the same shape, or why it did not run (never an error: it is optional)."""
    if wanted is False:
        return {"skipped": "not asked for (--no-scheduler-perf)"}
    try:
        find_scheduler_perf()
    except HarnessError as exc:
        if wanted:
            raise
        return {"skipped": str(exc)}
    return run_scheduler_perf(nodes, pods, devices, progress)


def _threshold() -> tuple[float, str]:
    """The upstream threshold for 5000pods_500nodes, from the built scheduler_perf's config when there is one."""
    try:
        value = upstream_threshold(find_scheduler_perf()[1])
        if value is not None:
            return value, "read from the built scheduler_perf's performance-config.yaml"
    except HarnessError:
        pass
    return UPSTREAM_THRESHOLD, "test/integration/scheduler_perf/dra/performance-config.yaml at v1.37.2"


def bench_dra_throughput(repeat: int, progress: Progress, nodes: int = 500, pods: int = 5000,
                         devices: int = 10, scheduler_perf: bool | None = None) -> dict[str, Any]:  # fmt: skip
    """``scheduler_perf``: None runs upstream scheduler_perf when it is built (else says why not), True requires it."""
    runs: list[dict[str, Any]] = []
    if scheduler_perf:  # required: say it is missing before minutes of the other measurements

        find_scheduler_perf()
    for i in range(repeat):
        # The upstream client limits cap the scheduler near 10 pods/s whatever else runs: one measurement
        # says which ceiling that is, and each later repeat saves its 8 minutes (at 5000 pods).
        default = _control_plane_only(nodes, pods, devices, None, progress) if i == 0 else {
            "limits": "upstream defaults", "skipped": "measured in the first repeat only"}
        raised = _control_plane_only(nodes, pods, devices, 500, progress)
        with_leases = _control_plane_only(nodes, pods, devices, 500, progress, leases=True)
        dg = _draguard(nodes, pods, devices, progress)
        perf = _scheduler_perf(nodes, pods, devices, progress, scheduler_perf)
        ratio = (dg["scheduled_per_s"] / raised["scheduled_per_s"]) if dg["scheduled_per_s"] and raised["scheduled_per_s"] else None
        perf_ratio = (dg["scheduled_per_s"] / perf["scheduled_per_s"]) if dg["scheduled_per_s"] and perf.get("scheduled_per_s") else None
        runs.append({"control_plane_default_limits": default, "control_plane_raised_limits": raised,
                     "control_plane_with_leases": with_leases, "draguard": dg,
                     "scheduler_perf": perf,
                     "draguard_over_control_plane": round(ratio, 3) if ratio else None,
                     "draguard_over_scheduler_perf": round(perf_ratio, 3) if perf_ratio else None})  # fmt: skip
        progress(f"dra-throughput #{i + 1}: draguard / control plane alone = {runs[-1]['draguard_over_control_plane']}"
                 f", / scheduler_perf = {runs[-1]['draguard_over_scheduler_perf']}")

    def med(path: Callable[[dict[str, Any]], Any]) -> float | None:
        values = [v for r in runs if (v := path(r)) is not None]
        return round(statistics.median(values), 3) if values else None

    threshold, source = _threshold()
    perf_runs = [r["scheduler_perf"] for r in runs]
    return {
        "unit": "pods/s", "nodes": nodes, "pods": pods, "devices_per_node": devices,
        "upstream_threshold_pods_per_s": threshold, "upstream_threshold_source": source,
        "median": med(lambda r: r["draguard"]["scheduled_per_s"]),
        "control_plane_default_limits_median": med(lambda r: r["control_plane_default_limits"].get("scheduled_per_s")),
        "control_plane_raised_limits_median": med(lambda r: r["control_plane_raised_limits"]["scheduled_per_s"]),
        "control_plane_with_leases_median": med(lambda r: r["control_plane_with_leases"]["scheduled_per_s"]),
        "scheduler_perf_median": med(lambda r: r["scheduler_perf"].get("scheduled_per_s")),
        "draguard_running_per_s_median": med(lambda r: r["draguard"]["running_per_s"]),
        "draguard_over_control_plane_median": med(lambda r: r["draguard_over_control_plane"]),
        "draguard_over_scheduler_perf_median": med(lambda r: r["draguard_over_scheduler_perf"]),
        "harness_machine_share_median": med(lambda r: r["draguard"]["harness_overhead"]["machine_share"]),
        "harness_machine_share_while_scheduling_median": med(
            lambda r: (r["draguard"].get("harness_overhead_while_scheduling") or {}).get("machine_share")),
        "harness_peak_rss_mib_median": med(lambda r: r["draguard"]["harness_overhead"]["peak_rss_mib"]),
        "prepare_lag_p99_s_median": med(lambda r: (r["draguard"]["prepare_lag_s"] or {}).get("p99")),
        "lease_age_max_s_median": med(lambda r: r["draguard"]["lease_age"]["max_s"]),
        "target": "draguard within 10% of the control plane alone; harness under 25% of the machine",
        "met": (med(lambda r: r["draguard_over_control_plane"]) or 0) >= 0.9
        and (med(lambda r: r["draguard"]["harness_overhead"]["machine_share"]) or 1) < 0.25,
        "upstream_scheduler_perf": next((p["skipped"] for p in perf_runs if "skipped" in p), "run: see samples[].scheduler_perf"),
        "samples": runs,
    }  # fmt: skip


def _synthetic(nodes: int, pods: int, devices: int, backlog: bool = False) -> Any:
    """A correct cluster of ``pods`` Running pods, one allocated claim each. ``backlog``: every pod still
    pending, one gang, its template claim made but not yet named in its status and not allocated (what
    the checker sees while the scheduler and the resourceclaim controller are behind): a pod's claim is
    then found by its owner and entry name, which a scan of every claim made pods x claims a round."""
    specs = generic(devices)
    slices = []
    for n in range(nodes):
        for i, spec in enumerate(build_slices(resolve(specs, f"n-{n}"), DRIVER)):
            spec["pool"] = {"name": f"n-{n}", "generation": 1, "resourceSliceCount": 1}
            slices.append({"metadata": {"name": f"n-{n}-{i}"}, "spec": spec})
    claims, pod_objs = [], []
    for p in range(pods):
        node = f"n-{p % nodes}"
        device = f"gpu-{(p // nodes) % devices}"
        uid = f"uid-{p}"
        if backlog:
            pod_objs.append({"kind": "Pod", "metadata": {"name": f"p-{p}", "namespace": "ns", "uid": f"pod-{p}"},
                             "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]},
                             "status": {"phase": "Pending"}})  # fmt: skip
            claims.append({"kind": "ResourceClaim", "metadata": {
                "name": f"p-{p}-gpu-x", "namespace": "ns", "uid": uid,
                "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": f"p-{p}", "uid": f"pod-{p}",
                                     "controller": True}]},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}}]}}})  # fmt: skip
            continue
        pod_objs.append({"kind": "Pod", "metadata": {"name": f"p-{p}", "namespace": "ns", "uid": f"pod-{p}"},
                         "spec": {"nodeName": node, "resourceClaims": [{"name": "gpu"}]},
                         "status": {"phase": "Running", "resourceClaimStatuses": [
                             {"name": "gpu", "resourceClaimName": f"c-{p}"}]}})  # fmt: skip
        claims.append({"kind": "ResourceClaim", "metadata": {"name": f"c-{p}", "namespace": "ns", "uid": uid},
                       "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                           "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}}]}},
                       "status": {"allocation": {"devices": {"results": [
                           {"request": "gpu", "driver": DRIVER, "pool": node, "device": device}]}},
                           "reservedFor": [{"resource": "pods", "name": f"p-{p}", "uid": f"pod-{p}"}]}})  # fmt: skip
    inventory = frozenset(DeviceId(DRIVER, f"n-{n}", f"gpu-{d}") for n in range(nodes) for d in range(devices))
    # The backlog's pods are one gang, as a scenario's workload is (gang-atomic looks up each pod's claims).
    gangs = (Gang("p", "ns", tuple(f"p-{p}" for p in range(pods)), 1, settled=False),) if backlog else ()
    return Snapshot(time=0.0, pods=tuple(pod_objs), claims=tuple(claims), slices=tuple(slices),
                    initial_inventory=inventory, gangs=gangs)  # fmt: skip


def _incremental_round_ms(snap: Any, repeat: int) -> float:
    """One incremental round after 1% of the claims changed (what the runner does each second). The
    slices did not change: the earlier round's published devices are handed on, as in the runner."""
    samples = []
    for _ in range(repeat):
        inc = Incremental()
        inc.reduce(snap)
        claims = list(snap.claims)
        for i in range(0, len(claims), 100):
            c = copy.deepcopy(claims[i])
            c["metadata"]["resourceVersion"] = "2"
            claims[i] = c
        snap.devices  # noqa: B018  (built by an earlier round)
        changed = snap.replace(claims=tuple(claims))
        t0 = time.perf_counter()
        evaluate(inc.reduce(changed), sorted(INCREMENTAL))
        samples.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(samples), 1)


def bench_invariant_cost(repeat: int, progress: Progress, nodes: int = 500, pods: int = 5000,
                         devices: int = 8) -> dict[str, Any]:  # fmt: skip
    sizes = sorted({(max(1, nodes // 10), max(1, pods // 10)), (nodes, pods)})
    out: dict[str, Any] = {"unit": "ms per evaluation", "interval_s": JUDGE_INTERVAL, "sizes": []}
    for n, p in sizes:
        samples = []
        for _ in range(repeat):
            snap = _synthetic(n, min(p, n * devices), devices)
            t0 = time.perf_counter()
            found = evaluate(snap, judged("continuously"))
            samples.append((time.perf_counter() - t0) * 1000)
            assert not any(found.values()), found  # a correct synthetic cluster: nothing to report
        ms = sorted(samples)
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        inc_ms = _incremental_round_ms(snap, repeat)
        backlog = []
        for _ in range(repeat):
            pending = _synthetic(n, min(p, n * devices), devices, backlog=True)
            t0 = time.perf_counter()
            found = evaluate(pending, judged("continuously"))
            backlog.append((time.perf_counter() - t0) * 1000)
            assert not any(found.values()), found
        out["sizes"].append({"nodes": n, "pods": min(p, n * devices), "devices": n * devices,
                             "median_ms": round(statistics.median(ms), 1), "p99_ms": round(p99, 1),
                             "detection_latency_p99_s": round(JUDGE_INTERVAL + p99 / 1000, 3),
                             "samples": [round(s, 1) for s in ms],
                             "incremental_1pct_changed_median_ms": inc_ms,
                             "incremental_detection_latency_s": round(JUDGE_INTERVAL + inc_ms / 1000, 3),
                             "backlog_median_ms": round(statistics.median(backlog), 1),
                             "backlog_max_ms": round(max(backlog), 1)})
        progress(f"invariant-cost {n} nodes/{p} pods: {out['sizes'][-1]['median_ms']} ms per evaluation")
    biggest = out["sizes"][-1]
    out.update({"median": biggest["median_ms"], "detection_latency_p99_s": biggest["detection_latency_p99_s"],
                "incremental_median_ms": biggest["incremental_1pct_changed_median_ms"],
                "backlog_median_ms": biggest["backlog_median_ms"],
                # The goal is the whole time from the violation to its report: the judging interval
                # counts (judged once a second, no round however fast could meet it).
                "target": "detection p99 (judging interval + evaluation) under 1 s, also while every pod waits "
                          "with its claim not yet in its status (backlog)",
                "met": biggest["detection_latency_p99_s"] < 1.0
                       and out["interval_s"] + biggest["backlog_max_ms"] / 1000 < 1.0})  # fmt: skip
    return out


def bench_churn(repeat: int, progress: Progress, nodes: int = 20, rate: float = 5.0, duration: float = 30.0,
                devices: int = 8) -> dict[str, Any]:  # fmt: skip
    runs = []
    for i in range(repeat):
        with LocalCluster(f"bench-churn-{os.getpid()}-{i}", progress=lambda m: None, remove_on_exit=True) as cluster, \
                tempfile.TemporaryDirectory(prefix="dgc", dir="/tmp") as tmp:  # fmt: skip
            kube = cluster.kube()
            run = uuid.uuid4().hex[:6]
            names = [f"c{run}-{n}" for n in range(nodes)]
            fleet = FakeNodesProcess(cluster.kubeconfig, names, root=Path(tmp), run_label=run).start()
            host = DriverHostProcess(cluster.kubeconfig, Path(tmp), [HostedNode(n, None, devices) for n in names]).start()
            try:
                kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                             "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})  # fmt: skip
                ns = f"churn-{run}"
                kube.create_namespace(ns, {RUN_LABEL: run})
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and len(kube.items("ResourceSlice")) < nodes:
                    time.sleep(0.5)
                result = run_load(LoadConfig(kubeconfig=str(cluster.kubeconfig), namespace=ns, device_class=DRIVER,
                                             out_dir=Path(tmp) / "report", rate=rate, duration=duration,
                                             op_timeout=60))  # fmt: skip
            finally:
                host.stop()
                fleet.stop()
        s = result.summary
        entries = s["locust"].get("entries", [])
        running = [e for e in entries if e["name"] == "running"]
        # Claims an operation makes: a gang one template claim per member, a template operation one,
        # a shared operation one claim its members share (harness/load/users.py).
        per_op = {"gang": int((s.get("config") or {}).get("gang_size", 1)), "template": 1, "shared": 1}
        claims = sum(int(e["count"]) * per_op.get(e["kind"], 1) for e in entries if e["name"] == "create")
        runs.append({"target_rate": rate, "achieved_rate": s["achieved_rate"], "fell_behind": s["fell_behind"],
                     "claims_per_s": round(claims / duration, 2),
                     "p99_running_ms": max((e["p99_ms"] for e in running), default=None),
                     "p50_running_ms": max((e["p50_ms"] for e in running), default=None),
                     "failures": sum(e["failures"] for e in entries), "violations": s["invariants"]})  # fmt: skip
        progress(f"churn #{i + 1}: {runs[-1]}")
    achieved = [r["achieved_rate"] for r in runs]
    return {"unit": "operations/s", "nodes": nodes, "target_rate": rate, "median": round(statistics.median(achieved), 2),
            "claims_per_s_median": statistics.median([r["claims_per_s"] for r in runs]),
            "p99_running_ms_median": statistics.median([r["p99_running_ms"] or 0 for r in runs]),
            "target": "the target rate sustained, p99 to Running under 10 s, no violation",
            "met": all(not r["fell_behind"] and (r["p99_running_ms"] or 1e9) < 10_000 and not r["violations"]
                       and not r["failures"] for r in runs),
            "samples": runs}  # fmt: skip


def bench_library_wall(repeat: int, progress: Progress, limit: int = 0, parallel: int = 1) -> dict[str, Any]:
    """The library's wall time, warm: one scenario after the other, and (``parallel`` > 1) the same
    files ``parallel`` at a time (``draguard run --parallel``), alternating, so both see the same machine."""
    root = Path(__file__).resolve().parents[2] / "scenarios"
    files = discover([root])
    if limit:
        files = files[:limit]
    per: dict[str, list[float]] = {}
    totals: list[float] = []
    parallel_totals: list[float] = []
    not_ok: list[str] = []
    for i in range(repeat):
        t0 = time.monotonic()
        for f in files:
            t = time.monotonic()
            result = Runner(load_scenario(f), RunOptions(backend="local")).run()
            per.setdefault(f.stem, []).append(round(time.monotonic() - t, 1))
            if result.record is not None:
                result.record.discard()  # no report is rendered: what the run recorded goes
            progress(f"library-wall {f.stem}: {per[f.stem][-1]}s ({'ok' if result.ok else 'NOT ok'})")
            if not result.ok:
                not_ok.append(f"{f.stem} (sequential, round {i + 1}): {'; '.join(result.shortfalls)}")
        totals.append(time.monotonic() - t0)
        progress(f"library-wall sequential round {i + 1}: {totals[-1]:.1f}s")
        if parallel > 1:
            t0 = time.monotonic()
            ran = run_in_parallel([load_scenario(f) for f in files], parallel)
            parallel_totals.append(time.monotonic() - t0)
            for _, r in ran:
                if r.record is not None:
                    r.record.discard()
            not_ok.extend(f"{r.name} (parallel {parallel}, round {i + 1}): {'; '.join(r.shortfalls)}"
                          for _, r in ran if not r.ok)
            progress(f"library-wall {parallel} at a time, round {i + 1}: {parallel_totals[-1]:.1f}s")
    out: dict[str, Any] = {
        "unit": "s", "scenarios": len(files), "median": round(statistics.median(totals), 1),
        "samples": [round(t, 1) for t in totals], "per_scenario": per, "mode": "sequential, warm binary cache",
        "not_ok": not_ok,
    }
    if parallel > 1:
        out.update({
            "parallel": parallel, "parallel_median": round(statistics.median(parallel_totals), 1),
            "parallel_samples": [round(t, 1) for t in parallel_totals],
            "parallel_speedup_median": round(statistics.median(a / b for a, b in zip(totals, parallel_totals)), 2),
            "parallel_mode": f"draguard run --parallel {parallel}: each scenario in its own process and control plane",
        })
    return out
