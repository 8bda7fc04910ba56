"""``draguard bench``: measured speed and cost of the pieces that have targets, side by side in one run.

Benchmarks (each repeated; medians reported, never a single timing):

- ``cluster-up``: a local control plane from a warm binary cache until the API serves DRA v1
  (target: under 20 s on 2 cores);
- ``fake-nodes``: 200 fake nodes in one process heartbeating for a while (target: fits on 2 cores;
  reports CPU cores used and lease freshness);
- ``watch-decode``: turning ResourceSlice watch events into objects, plain JSON (what draguard does)
  against the official client's typed models, measured alternately in the same run (the ratio is
  why :mod:`draguard.harness.kube` works on dicts);
- ``scenario-load``: validating every scenario file of the library;
- ``detection``: violations made to happen in a live run and timed until the runner reports them
  (:mod:`.detect`);
- ``driver-calls``: the fake driver's prepare/unprepare latency and calls per second against the
  upstream test driver on the same node layout, as ratios (:mod:`.driver_calls`);
- ``kubelet``: the hollow DRA kubelet's start-up time and memory, and one pod's bind-to-Running on a
  hollow kubelet and on the fake agent side by side;
- ``kind``: the offline kind node image cold and warm, and ``kind create`` with 1 control plane + 2
  workers until every node is Ready (:mod:`.kind`).

Results go to ``benchmarks/results/<name>.json`` with the machine, the date, the command and the raw samples;
``draguard bench --doc`` renders them as docs/benchmarks.md (:mod:`draguard.reports.benchmarks`).
Talks to: the local backend, the fake nodes, the scenario loader.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes.client import ApiClient

import draguard.scenarios as pkg
from draguard.harness.bench import detect as bench_detect
from draguard.harness.bench import driver_calls as bench_driver
from draguard.harness.bench import kind as bench_kind
from draguard.harness.bench import scale as bench_scale
from draguard.harness.bench.fake_nodes import heartbeat_load
from draguard.harness.bench.kubelet import kubelet_vs_fake
from draguard.harness.cluster.local import LocalCluster
from draguard.harness.scenario.loader import discover, load_scenario

__all__ = ["BENCHMARKS", "command_line", "run_benchmarks"]

Progress = Callable[[str], None]


def _median(samples: list[float]) -> float:
    return round(statistics.median(samples), 4)


def bench_cluster_up(repeat: int, progress: Progress) -> dict[str, Any]:
    samples = []
    for i in range(repeat):
        cluster = LocalCluster(f"bench-{os.getpid()}-{i}")
        t0 = time.monotonic()
        cluster.up()
        samples.append(time.monotonic() - t0)
        cluster.down(remove=True)
        progress(f"cluster-up #{i + 1}: {samples[-1]:.2f}s")
    return {"unit": "s", "median": _median(samples), "samples": [round(s, 3) for s in samples], "target": "< 20 s",
            "met": _median(samples) < 20}


def bench_fake_nodes(repeat: int, progress: Progress, count: int = 200, duration: float = 30.0) -> dict[str, Any]:
    runs = []
    with LocalCluster(f"bench-nodes-{os.getpid()}", remove_on_exit=True) as cluster:
        for i in range(repeat):
            runs.append(heartbeat_load(cluster.kube(), count=count, duration=duration))
            progress(f"fake-nodes #{i + 1}: {runs[-1]['cores']} cores, max lease age {runs[-1]['lease_max_age_s']}s")
    cores = [r["cores"] for r in runs]
    return {"unit": "cores", "nodes": count, "median": _median(cores), "samples": runs,
            "target": "200 nodes on 2 cores with fresh leases",
            "met": _median(cores) < 2.0 and all(r["stale_leases"] == 0 for r in runs)}


def _slice_event(i: int) -> bytes:
    devices = [{"name": f"gpu-{d}", "attributes": {"index": {"int": d}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
                                                   "uuid": {"string": f"GPU-{i:04x}{d:04x}"},
                                                   "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{d:02x}"}},
                "capacity": {"memory": {"value": "80Gi"}}} for d in range(8)]
    obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
           "metadata": {"name": f"node-{i}-gpu", "resourceVersion": str(1000 + i), "uid": f"{i:08d}-0000-0000-0000-000000000000"},
           "spec": {"driver": "gpu.draguard.dev", "nodeName": f"node-{i}",
                    "pool": {"name": f"node-{i}", "generation": 1, "resourceSliceCount": 1}, "devices": devices}}
    return json.dumps({"type": "ADDED", "object": obj}).encode()


def bench_watch_decode(repeat: int, progress: Progress, events: int = 500) -> dict[str, Any]:
    lines = [_slice_event(i) for i in range(events)]
    objects = [json.dumps(json.loads(line)["object"]) for line in lines]
    api = ApiClient()

    def plain() -> None:
        for line in lines:
            json.loads(line)["object"]

    def typed() -> None:
        for text in objects:
            api.deserialize(text, "V1ResourceSlice", "application/json")

    plain_s, typed_s = [], []
    for i in range(repeat):  # alternate so that machine noise hits both alike
        t0 = time.perf_counter()
        plain()
        plain_s.append((time.perf_counter() - t0) / events * 1e6)
        t0 = time.perf_counter()
        typed()
        typed_s.append((time.perf_counter() - t0) / events * 1e6)
        progress(f"watch-decode #{i + 1}: plain {plain_s[-1]:.1f} µs, typed {typed_s[-1]:.1f} µs per 8-device slice")
    return {"unit": "µs per event", "plain_median": _median(plain_s), "typed_median": _median(typed_s),
            "ratio_typed_over_plain": round(statistics.median(typed_s) / statistics.median(plain_s), 1),
            "plain_samples": [round(s, 2) for s in plain_s], "typed_samples": [round(s, 2) for s in typed_s]}


def bench_scenario_load(repeat: int, progress: Progress) -> dict[str, Any]:
    root = Path(__file__).resolve().parents[2] / "scenarios"
    try:
        root = Path(next(iter(pkg.__path__)))
    except (ImportError, StopIteration):
        pass
    files = discover([root])
    samples = []
    for i in range(repeat):
        t0 = time.perf_counter()
        for f in files:
            load_scenario(f)
        samples.append((time.perf_counter() - t0) / max(1, len(files)) * 1000)
        progress(f"scenario-load #{i + 1}: {samples[-1]:.1f} ms per file")
    return {"unit": "ms per file", "files": len(files), "median": _median(samples), "samples": [round(s, 2) for s in samples]}


def bench_kubelet(repeat: int, progress: Progress) -> dict[str, Any]:
    return kubelet_vs_fake(repeat, progress)


BENCHMARKS: dict[str, Callable[..., dict[str, Any]]] = {
    "cluster-up": bench_cluster_up,
    "fake-nodes": bench_fake_nodes,
    "watch-decode": bench_watch_decode,
    "scenario-load": bench_scenario_load,
    "dra-throughput": bench_scale.bench_dra_throughput,
    "invariant-cost": bench_scale.bench_invariant_cost,
    "detection": bench_detect.bench_detection,
    "churn": bench_scale.bench_churn,
    "driver-calls": bench_driver.bench_driver_calls,
    "library-wall": bench_scale.bench_library_wall,
    "kubelet": bench_kubelet,
    "kind": bench_kind.bench_kind,
}
"""Each takes ``(repeat, progress)`` and, where it has sizes, keyword arguments for them (``nodes``,
``pods``, ``devices``, ``reset_ms``, ``rate``, ``duration``, ``count``, ``limit``, ``injections``): ``draguard bench --nodes 50`` passes
``nodes=50`` to every selected benchmark that takes it."""


def _sizes(fn: Callable[..., Any], sizes: dict[str, Any]) -> dict[str, Any]:
    params = inspect.signature(fn).parameters
    return {k: v for k, v in sizes.items() if k in params and v is not None}


def _machine() -> dict[str, Any]:
    """The machine, as far as Python can tell, and how loaded it was when the benchmark ended."""
    out: dict[str, Any] = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    try:
        out["load_avg_1m"] = round(os.getloadavg()[0], 2)
        with open("/proc/meminfo") as f:
            out["memory_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
        with open("/proc/cpuinfo") as f:
            out["cpu_model"] = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except (OSError, ValueError):
        pass
    out["note"] = "compare ratios measured in one run, not absolute figures: the load average says how busy the machine was"
    return out


FLAGS = {"nodes": "--nodes", "count": "--nodes", "pods": "--pods", "devices": "--devices", "reset_ms": "--reset-ms",
         "rate": "--rate", "duration": "--duration", "limit": "--limit", "parallel": "--parallel",
         "injections": "--injections"}  # fmt: skip
"""The ``draguard bench`` flag of each size keyword (``count``, fake-nodes' node count, is set by ``--nodes``)."""


def command_line(name: str, repeat: int, sizes: dict[str, Any]) -> str:
    """The ``draguard bench`` command that runs ``name`` with exactly these sizes (recorded in its result)."""
    words = ["draguard", "bench", name, "--repeat", str(repeat)]
    for key, value in sizes.items():
        if key == "scheduler_perf":
            words.append("--scheduler-perf" if value else "--no-scheduler-perf")
        elif key in FLAGS and FLAGS[key] not in words:
            words += [FLAGS[key], f"{value:g}" if isinstance(value, float) else str(value)]
    return " ".join(words)


def run_benchmarks(names: list[str], repeat: int, out_dir: Path, progress: Progress,
                   sizes: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:  # fmt: skip
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in names:
        fn = BENCHMARKS[name]
        passed = _sizes(fn, sizes or {})
        result = fn(repeat, progress, **passed)
        result.update({"benchmark": name, "repeat": repeat, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "machine": _machine(), "command": command_line(name, repeat, passed)})
        (out_dir / f"{name}.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        results[name] = result
    return results
