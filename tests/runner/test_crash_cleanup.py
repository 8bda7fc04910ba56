"""A run killed with SIGKILL mid-fault is fully undone by `draguard cleanup`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from draguard.harness.cluster.target import KubeTarget

pytestmark = pytest.mark.cluster

SCENARIO = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {name: crash-me}
spec:
  nodes: [{name: crash-node-%(tag)s, topology: {gpus: 2}}]
  deviceClasses: [{name: crash-%(tag)s.draguard.dev, selectors: ["device.driver == 'gpu.draguard.dev'"]}]
  workloads:
    - name: w
      replicas: 1
      claims: [{name: g, requests: [{name: gpu, deviceClassName: crash-%(tag)s.draguard.dev, count: 1}]}]
  timeline:
    - when: {workload: w, phase: Running}
      fault: device-taint
      target: {workload: w, member: 0}
      params: {effect: NoSchedule}
  settle: {timeout: 5m}
"""


def _journal_entries(state: Path) -> list[dict]:  # type: ignore[type-arg]
    files = list((state / "draguard" / "journal").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def test_cleanup_undoes_faults_stops_processes_and_deletes_labelled_objects(draguard_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tag = os.urandom(3).hex()
    scenario = tmp_path / "crash.yaml"
    scenario.write_text(SCENARIO % {"tag": tag})
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    # Under another state folder the cluster is not one of this state's own: its device taint needs consent.
    context = KubeTarget(draguard_cluster.kubeconfig).active_context()
    cmd = [sys.executable, "-m", "draguard.cli", "run", str(scenario), "--cluster", "kubeconfig",
           "--kubeconfig", str(draguard_cluster.kubeconfig), "--allow-context", context, "--report-dir", str(tmp_path / "report")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not any(e.get("entry") == "fault" for e in _journal_entries(tmp_path / "state")):
            assert proc.poll() is None, "the run ended before its fault"
            time.sleep(0.2)
        time.sleep(1.0)  # the DeviceTaintRule is created right after its journal entry
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and everything in its session die at once
        proc.wait()
    entries = _journal_entries(tmp_path / "state")
    run = next(e for e in entries if e["entry"] == "run")
    kube = draguard_cluster.kube()
    label = f"draguard.dev/run={run['label']}"
    assert kube.items("DeviceTaintRule", label_selector=label), "the fault should be in place after the crash"

    out = subprocess.run([sys.executable, "-m", "draguard.cli", "cleanup"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr

    assert "undid device-taint" in out.stderr
    for kind in ("DeviceTaintRule", "DeviceClass", "Node", "ResourceSlice"):
        assert kube.items(kind, label_selector=label) == [], kind
    # A namespace goes asynchronously: deleted means Terminating or gone.
    assert all(ns["metadata"].get("deletionTimestamp") for ns in kube.items("Namespace", label_selector=label))
    pids = [int(e["pid"]) for e in entries if e["entry"] == "process"]
    assert pids
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]
    assert _journal_entries(tmp_path / "state") == []


def test_a_run_ended_by_sigterm_undoes_its_fault_and_leaves_no_process_or_cluster(tmp_path: Path) -> None:
    """SIGTERM (a CI job's time limit, ``kill``) ends ``draguard run`` as Ctrl-C does: exit 130, the
    fault undone, the local control plane and every process the run started stopped, its journal and
    cluster folder gone. (A SIGKILL leaves them to ``draguard cleanup``: the test above.)"""
    tag = os.urandom(3).hex()
    scenario = tmp_path / "term.yaml"
    scenario.write_text(SCENARIO % {"tag": tag})
    state = tmp_path / "state"
    env = dict(os.environ, XDG_STATE_HOME=str(state))
    cmd = [sys.executable, "-m", "draguard.cli", "run", str(scenario), "--report-dir", str(tmp_path / "report")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not any(e.get("entry") == "fault" for e in _journal_entries(state)):
            assert proc.poll() is None, "the run ended before its fault"
            time.sleep(0.2)
        entries = _journal_entries(state)
        assert any(e.get("entry") == "fault" for e in entries), "the fault was not journaled within 180 s"
        assert list((state / "draguard" / "clusters").iterdir()), "the run's cluster folder"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert b"interrupted" in err and b"Traceback" not in err, err
    pids = [int(e["pid"]) for e in entries if e["entry"] == "process"]
    assert pids, "the run journals the processes it starts"
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3], pid
    assert _journal_entries(state) == []
    assert list((state / "draguard" / "clusters").iterdir()) == []
