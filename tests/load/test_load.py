"""``draguard load``: claim churn through locust against the real local control plane with fake nodes
and the driver host (local workers, and a worker started by hand as on another machine); the rail
against non-local clusters; falling behind is reported."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.harness.driver.host import DriverHostProcess, HostedNode
from draguard.harness.kube import Kube
from draguard.harness.load.engine import WORKER_COMMAND
from draguard.harness.nodes.process import FakeNodesProcess
from draguard.harness.core.process import free_port
from support import wait

DRIVER = "gpu.draguard.dev"


def _load(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "draguard.cli.main", "load", *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def test_a_cluster_that_is_not_local_is_refused_without_allow_context(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
        "clusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: x}}]\n"
        "contexts: [{name: prod, context: {cluster: c, user: u}}]\n"
    )
    result = _load("--kubeconfig", str(kubeconfig), "--duration", "1s")
    assert result.returncode == 2, result.stderr
    assert "not a local draguard cluster" in result.stderr and "--allow-context prod" in result.stderr
    assert "Traceback" not in result.stderr
    wrong = _load("--kubeconfig", str(kubeconfig), "--allow-context", "staging", "--duration", "1s")
    assert wrong.returncode == 2 and "--allow-context prod" in wrong.stderr


def test_bad_kinds_and_durations_are_bad_input() -> None:
    assert _load("--kinds", "gang,bogus").returncode == 2
    assert _load("--duration", "99999999999h").returncode == 2


@pytest.fixture
def fleet(draguard_cluster: Any) -> Iterator[Kube]:
    kube: Kube = draguard_cluster.kube()
    root = Path(tempfile.mkdtemp(prefix="dgl", dir="/tmp"))
    run = uuid.uuid4().hex[:6]
    names = [f"load-{run}-{i}" for i in range(3)]
    nodes = FakeNodesProcess(draguard_cluster.kubeconfig, names, root=root, run_label=run).start()
    host = DriverHostProcess(draguard_cluster.kubeconfig, root, [HostedNode(n, devices=4) for n in names]).start()
    if kube.get("DeviceClass", DRIVER) is None:
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                     "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})  # fmt: skip
    wait(lambda: len([s for s in kube.items("ResourceSlice") if s["spec"].get("nodeName") in names]) == 3,
         what="slices of the load's nodes")  # fmt: skip
    try:
        yield kube
    finally:
        host.stop()
        nodes.stop()
        for n in names:
            kube.delete("Node", n)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.cluster
def test_load_with_two_workers_reports_percentiles_and_judges_invariants(
    draguard_cluster: Any, fleet: Kube, tmp_path: Path
) -> None:
    report = tmp_path / "out"
    result = _load("--kubeconfig", str(draguard_cluster.kubeconfig), "--rate", "2", "--duration", "8s",
                   "--workers", "2", "--report-dir", str(report))  # fmt: skip
    summary = json.loads((report / "summary.json").read_text())
    assert result.returncode == 0, (result.stderr[-3000:], summary)
    assert summary["error"] is None and summary["invariants"] == {} and not summary["fell_behind"]
    phases = {(e["kind"], e["name"]) for e in summary["locust"]["entries"]}
    for kind in ("gang", "template", "shared"):
        for phase in ("allocated", "prepared", "running", "released"):
            assert (kind, phase) in phases, f"no {kind}/{phase} timings: {sorted(phases)}"
    for e in summary["locust"]["entries"]:
        # locust keeps times in buckets of two significant digits: a percentile may round above the max
        assert e["failures"] == 0 and 0 < e["p50_ms"] <= e["p99_ms"] <= e["max_ms"] * 1.05 + 10, e
    assert (report / "locust_stats.csv").read_text().count("\n") > 10
    # Everything the load made is gone: nothing left allocated or running.
    assert not [p for p in fleet.items("Pod") if p["metadata"]["namespace"].startswith("dg-load-")]


@pytest.mark.cluster
def test_a_rate_the_users_cannot_reach_is_reported_as_falling_behind(
    draguard_cluster: Any, fleet: Kube, tmp_path: Path
) -> None:
    report = tmp_path / "out"
    result = _load("--kubeconfig", str(draguard_cluster.kubeconfig), "--rate", "50", "--users", "1", "--duration",
                   "5s", "--kinds", "template", "--report-dir", str(report))  # fmt: skip
    summary = json.loads((report / "summary.json").read_text())
    assert result.returncode == 1
    assert summary["fell_behind"] and summary["achieved_rate"] < 0.9 * 50
    assert "FELL BEHIND" in result.stderr


@pytest.mark.cluster
def test_a_worker_started_by_hand_as_on_another_machine_runs_the_load(
    draguard_cluster: Any, fleet: Kube, tmp_path: Path
) -> None:
    guide = (Path(__file__).parents[2] / "docs" / "load.md").read_text()
    assert f"{WORKER_COMMAND} MASTER:PORT" in guide, "docs/load.md shows another command for a worker"
    report, port = tmp_path / "out", free_port()
    master = subprocess.Popen([sys.executable, "-m", "draguard.cli.main", "load", "--kubeconfig",
                               str(draguard_cluster.kubeconfig), "--rate", "2", "--duration", "8s", "--expect-workers",
                               "1", "--master-port", str(port), "--report-dir", str(report)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        # What docs/load.md tells a user on another machine, with this machine's address for MASTER.
        python, *command = WORKER_COMMAND.split()
        assert python == "python"
        worker = subprocess.run([sys.executable, *command, f"127.0.0.1:{port}"], capture_output=True, text=True,
                                timeout=240)  # fmt: skip
        out, err = master.communicate(timeout=240)
    finally:
        master.kill()
    summary = json.loads((report / "summary.json").read_text())
    assert master.returncode == 0, (err[-3000:], summary)
    assert worker.returncode == 0, worker.stderr[-3000:]
    assert f"start each with: {WORKER_COMMAND} HOST:{port}" in err
    locust = summary["locust"]
    assert locust["workers"] == 1 and not summary["fell_behind"] and summary["invariants"] == {}
    assert locust["operations_started"] >= 8 and locust["operations_finished"] == locust["operations_started"], locust
    assert all(e["failures"] == 0 for e in locust["entries"]), locust["entries"]
    assert "reported as ready" in (report / "locust.log").read_text()
