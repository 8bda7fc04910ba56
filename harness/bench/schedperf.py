"""Upstream scheduler_perf's ``SchedulingWithResourceClaimTemplate``, run beside draguard's own measurement.

The test binary is ``k8s.io/kubernetes/test/integration/scheduler_perf/dra`` built with ``go test -c`` from
the same module (and the same Go build cache) as the control plane: ``draguard cluster build
--scheduler-perf``. It is optional: nothing in CI or the tests needs it.

How one run goes (read from ``test/integration/scheduler_perf`` at v1.37.2):

- ``BenchmarkPerfScheduling`` reads ``performance-config.yaml`` from its working directory and runs the
  workloads whose labels pass ``-perf-scheduling-label-filter``; ``-test.bench`` narrows it to one
  (``BenchmarkPerfScheduling/SchedulingWithResourceClaimTemplate/<workload>``);
- the API server, scheduler and resourceclaim controller run inside the test process (no kubelet, no
  driver: nodes and ResourceSlices are written straight to the API); etcd is started by the test from
  ``$PATH`` on a unix socket in ``$TMPDIR`` unless ``KUBE_INTEGRATION_ETCD_URL`` answers
  (``test/integration/framework/etcd.go``), so the run points that variable at a port that refuses and
  puts the cached etcd first on ``$PATH``: it never shares an etcd with anyone;
- ``-data-items-dir`` receives a JSON file of data items; ``SchedulingThroughput`` (pods/s: the average
  of one-second samples while the measured pods are scheduled, ``util.go``) is the figure, with the
  workload's threshold as ``AverageThreshold`` when it has one (5000pods_500nodes: 56 pods/s at v1.37.2).
  A run under the threshold exits 1; its figures are still read.

The upstream workload is used unchanged for its own shape (500 nodes, 5000 pods, 10 devices: 2500 claims
allocated first, 2500 pods measured); any other shape runs as an added workload ``draguard`` of the same
test case with the given nodes and devices and all pods measured, so it matches draguard's own run.
Talks to: the test binary (a subprocess), the filesystem.
"""

from __future__ import annotations

import glob
import json
import os
import resource
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from draguard.harness.cluster import binaries
from draguard.harness.core.errors import HarnessError

__all__ = ["TEST_CASE", "UPSTREAM_WORKLOAD", "find_scheduler_perf", "upstream_threshold", "run_scheduler_perf"]

TEST_CASE = "SchedulingWithResourceClaimTemplate"
UPSTREAM_WORKLOAD = ("5000pods_500nodes", 500, 5000, 10)
"""The upstream workload with a threshold: name, nodes, pods (claims allocated first plus pods measured), devices per node."""

Progress = Callable[[str], None]


def find_scheduler_perf(bin_dir: str | Path | None = None) -> tuple[Path, Path]:
    """The test binary and its data directory from the binary cache; HarnessError saying how to get them."""
    try:
        directory = Path(bin_dir) if bin_dir else binaries.resolve(allow_download=False, allow_build=False,
                                                                   progress=lambda _: None).directory  # fmt: skip
    except HarnessError as exc:
        raise HarnessError(f"no control-plane binaries ({exc}); run `draguard cluster build --scheduler-perf`") from exc
    binary, data = directory / binaries.SCHEDULER_PERF, directory / binaries.SCHEDULER_PERF_DATA
    if not (binary.is_file() and os.access(binary, os.X_OK) and (data / "config" / "performance-config.yaml").is_file()):
        raise HarnessError(f"upstream scheduler_perf is not built ({binary} missing): run `draguard cluster build "
                           "--scheduler-perf` (go test -c of k8s.io/kubernetes/test/integration/scheduler_perf/dra)")
    return binary, data


def _test_case(data: Path) -> dict[str, Any]:
    cases = YAML(typ="safe").load((data / "config" / "performance-config.yaml").read_text())
    for case in cases:
        if case.get("name") == TEST_CASE:
            return dict(case)
    raise HarnessError(f"{TEST_CASE} is not in {data / 'config' / 'performance-config.yaml'}")


def upstream_threshold(data: Path) -> float | None:
    """The ``dra`` threshold of the upstream 500-node workload, read from the config the binary was built with."""
    for w in _test_case(data).get("workloads") or []:
        if w.get("name") == UPSTREAM_WORKLOAD[0]:
            value = (w.get("threshold") or {}).get("dra")
            return float(value) if value is not None else None
    return None


def _config(data: Path, nodes: int, pods: int, devices: int) -> tuple[dict[str, Any], str, str]:
    """The test case to run, the workload's name and the label that selects it."""
    case = _test_case(data)
    name, n, p, d = UPSTREAM_WORKLOAD
    if (nodes, pods, devices) == (n, p, d):
        return case, name, "performance"
    for op in case["workloadTemplate"]:
        if (op.get("templateParams") or {}).get("numDevices") is not None:
            op["templateParams"]["numDevices"] = devices
    case["workloads"] = [{"name": "draguard", "labels": ["draguard"],
                          "params": {"nodesWithDRA": nodes, "nodesWithoutDRA": 0, "initClaims": 0,
                                     "measurePods": pods, "steadyState": False, "duration": "0s"}}]  # fmt: skip
    return case, "draguard", "draguard"


def run_scheduler_perf(nodes: int, pods: int, devices: int, progress: Progress, timeout: float = 900.0,
                       bin_dir: str | Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Run one workload; returns pods/s (``scheduled_per_s``), the threshold, wall time and CPU seconds."""
    binary, data = find_scheduler_perf(bin_dir)
    case, workload, label = _config(data, nodes, pods, devices)
    with tempfile.TemporaryDirectory(prefix="dgperf") as tmp:
        work = Path(tmp)
        yaml = YAML()
        with (work / "performance-config.yaml").open("w") as f:
            yaml.dump([case], f)
        (work / "templates").symlink_to(data / "config" / "templates")
        (work / "out").mkdir()
        (work / "tmp").mkdir()
        env = dict(os.environ, PATH=f"{binary.parent}{os.pathsep}{os.environ.get('PATH', '')}",
                   KUBE_INTEGRATION_ETCD_URL="http://127.0.0.1:0", TEST_SRCDIR=str(data / "src"), TEST_WORKSPACE=".",
                   TMPDIR=str(work / "tmp"))  # fmt: skip
        argv = [str(binary), "-test.run=^$", f"-test.bench=^BenchmarkPerfScheduling$/^{TEST_CASE}$/^{workload}$",
                "-test.benchtime=1x", f"-perf-scheduling-label-filter={label}", f"-data-items-dir={work / 'out'}",
                f"-test.timeout={int(timeout)}s"]  # fmt: skip
        progress(f"scheduler_perf {TEST_CASE}/{workload} ({nodes} nodes, {pods} pods)")
        started = time.monotonic()
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu0 = cpu.ru_utime + cpu.ru_stime
        with (work / "run.log").open("w") as log:
            try:
                proc = subprocess.run(argv, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout + 30)
            except subprocess.TimeoutExpired as exc:
                raise HarnessError(f"scheduler_perf did not finish within {timeout + 30:.0f}s") from exc
        wall = time.monotonic() - started
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_s = cpu.ru_utime + cpu.ru_stime - cpu0
        throughput, duration = None, None
        for path in glob.glob(str(work / "out" / "*.json")):
            for item in json.loads(Path(path).read_text()).get("dataItems") or []:
                labels = item.get("labels") or {}
                if f"/{workload}/" not in labels.get("Name", ""):
                    continue
                if labels.get("Metric") == "SchedulingThroughput":
                    throughput = item.get("data") or {}
                elif labels.get("Metric") == "SchedulingDuration":
                    duration = (item.get("data") or {}).get("Duration")
        metric = "SchedulingThroughput Average (one-second samples)"
        measured = pods - (pods // 2 if workload == UPSTREAM_WORKLOAD[0] else 0)
        if throughput is None and duration:
            # A run shorter than its one-second sampling yields no SchedulingThroughput (util.go: "Increase
            # pods and/or nodes"); the measured pods over SchedulingDuration is the figure then.
            throughput, metric = {"Average": measured / float(duration)}, "measured pods / SchedulingDuration"
        if throughput is None:
            tail = "\n".join((work / "run.log").read_text(errors="replace").splitlines()[-15:])
            raise HarnessError(f"scheduler_perf wrote no SchedulingThroughput (exit {proc.returncode}):\n{tail}")
    out = {"workload": f"{TEST_CASE}/{workload}", "nodes": nodes, "pods": pods, "devices_per_node": devices,
           "scheduled_per_s": round(float(throughput["Average"]), 2), "metric": metric,
           "p50_per_s": round(float(throughput.get("Perc50", 0)), 2),
           "threshold": throughput.get("AverageThreshold"), "exit_code": proc.returncode, "wall_s": round(wall, 1),
           "cpu_s": round(cpu_s, 1),
           "binary": str(binary)}  # fmt: skip
    progress(f"scheduler_perf: {out['scheduled_per_s']} pods/s (threshold {out['threshold']})")
    return out
