"""Chaos through the Kubernetes API on kind nodes (a real kubelet, containerd and runc), against the
upstream DRA test driver installed as a DaemonSet (deploy/dra-test-driver.yaml):

- the library, retargeted at it (``draguard run scenarios --cluster kind --driver ... --device-class ...``):
  which scenarios apply, and the verdicts of those whose steps restart or stop the driver or the nodes;
- ``draguard cleanup`` after a SIGKILL in the middle of a ``driver-down`` step (a node-affinity patch of
  the DaemonSet) and a ``node-loss`` step (a paused node container): the DaemonSet exactly as it was, the
  node thawed and Ready, the driver's pod back, nothing of the run left in the cluster.

tests/conftest.py runs this file after test_kind_certify.py and before test_kind_cluster.py, whose last
tests bring the session's cluster down."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import draguard.chaos  # noqa: F401  (registers the fault kinds the library names)

from draguard.harness.cluster.kind.cluster import KindCluster
from draguard.harness.core.paths import state_dir
from draguard.harness.kube import RUN_LABEL
from draguard.harness.scenario.loader import load_scenario
from test_kind_certify import DEVICE_CLASS, install_test_driver, uninstall_test_driver
from test_kind_cluster import DAEMONSET, TEST_DRIVER, _wait

pytestmark = pytest.mark.timeout(3600)

ROOT = Path(__file__).resolve().parents[2]
CHAOS = {"driver-restart", "driver-down", "node-restart", "node-loss"}
"""The faults that reach an installed driver and kind nodes through the API and the node containers."""


def _draguard(*args: str, cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "draguard.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _workers(cluster: KindCluster) -> list[str]:
    return sorted(n["metadata"]["name"] for n in cluster.kube().items("Node")
                  if "node-role.kubernetes.io/control-plane" not in n["metadata"].get("labels", {}))


@pytest.fixture(scope="module")
def driver_installed(kind_cluster: KindCluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    install_test_driver(kind_cluster, tmp_path_factory.mktemp("driver"))
    try:
        yield kind_cluster
    finally:
        uninstall_test_driver(kind_cluster)


def test_the_library_runs_on_kind_with_driver_and_node_chaos_through_the_api(driver_installed: KindCluster,
                                                                             tmp_path: Path) -> None:
    cluster = driver_installed
    common = ["--cluster", "kind", "--kubeconfig", str(cluster.kubeconfig), "--driver", TEST_DRIVER,
              "--device-class", DEVICE_CLASS]
    dry = _draguard("run", str(ROOT / "scenarios"), *common, "--dry-run", cwd=tmp_path, timeout=300)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    said = " ".join(dry.stderr.split())
    assert ("driver restarted through DaemonSet draguard-system/dra-test-driver; nodes are kind containers"
            in said), dry.stderr
    # The blast radius of each step: the driver step names the driver's pod on the node it takes down.
    assert re.search(r"touches the driver's pod\(s\) draguard-system/dra-test-driver-\w+", dry.stdout), dry.stdout
    decided = dict(line.split(": ", 1) for line in dry.stdout.splitlines()
                   if ": " in line and not line.startswith(" ") and line.split(": ", 1)[1].startswith(("applicable", "not applicable")))
    applicable = sorted(name for name, why in decided.items() if why.startswith("applicable"))
    print(f"{len(applicable)} of {len(decided)} library scenarios apply on kind: {', '.join(applicable)}")
    with_chaos = [name for name in applicable
                  if {s.fault for s in load_scenario(ROOT / "scenarios" / f"{name}.yaml").timeline} & CHAOS]
    # What the local backend could not do to this driver, kind does: restart it, stop it, restart and lose nodes.
    assert len(with_chaos) >= 3, (with_chaos, decided)
    for name, why in decided.items():  # what is left out says why, and never because draguard cannot restart it here
        assert "no DaemonSet mounts its plugin directory" not in why and "only to its own nodes" not in why, (name, why)

    report = tmp_path / "report"
    done = _draguard("run", *(str(ROOT / "scenarios" / f"{n}.yaml") for n in with_chaos), *common,
                     "--report", "json", "--report-dir", str(report), cwd=tmp_path)
    verdict = json.loads((report / "verdict.json").read_text())
    violated: dict[str, list[str]] = {}
    for sc in verdict["scenarios"]:
        violated[sc["name"]] = [k for k, v in sc["invariants"].items()
                                if v["status"] == "violated" and v.get("expected") != "ignore"]
        print(sc["name"], [(s["name"], s["status"], s["fired"]) for s in sc["steps"]], "violated:", violated[sc["name"]])
    for sc in verdict["scenarios"]:
        assert sc.get("error") is None, (sc["name"], sc.get("error"), done.stderr[-3000:])
        for step in sc["steps"]:  # every chaos step really struck the driver or the node
            assert step["status"] == "ok" and step["fired"], (sc["name"], step, done.stderr[-3000:])
        # The upstream test driver keeps what it prepared in memory only; a restarted one answers an
        # unprepare of a claim prepared before with "Idempotent call, nothing to do" and leaves that
        # claim's CDI spec on the node for good (test/e2e/dra/test-driver/app/kubeletplugin.go,
        # nodeUnprepareResource). Wherever a step restarted or stopped the driver while claims were
        # prepared, no-leak finds exactly that, read from the node; where only nodes were disturbed, all holds.
        restarted = any(s["fault"] in ("driver-restart", "driver-down") for s in sc["steps"])
        if restarted:
            assert violated[sc["name"]] == ["no-leak"], (sc["name"], violated[sc["name"]])
            evidence = [e["message"] for e in sc["invariants"]["no-leak"]["violations"]]
            assert evidence and all(f"driver {TEST_DRIVER} on node " in m and "still has claim" in m for m in evidence), evidence
        else:
            assert violated[sc["name"]] == [], (sc["name"], sc["invariants"])
    assert done.returncode == (1 if any(violated.values()) else 0), done.stdout + done.stderr
    labelled = cluster.kube().items("Namespace", label_selector=RUN_LABEL)
    assert not [n for n in labelled if not n["metadata"].get("deletionTimestamp")], labelled


def _scenario(workers: list[str]) -> str:
    return f"""apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {{name: kind-killed-mid-step}}
spec:
  cluster: {{backend: kind, kindCluster: {{name}}}}
  driver: {{kind: external, name: {TEST_DRIVER}, deviceClass: {DEVICE_CLASS}}}
  nodes:
    - name: {workers[0]}
    - name: {workers[1]}
  workloads:
    - name: llm
      replicas: 1
      claims:
        - name: gpus
          requests: [{{name: gpu, deviceClassName: {DEVICE_CLASS}, count: 1}}]
  timeline:
    - name: driver-off
      at: 0s
      fault: driver-down
      target: {{node: {workers[0]}}}
      params: {{duration: 10m}}
    - name: node-off
      at: 0s
      fault: node-loss
      target: {{node: {workers[1]}}}
      params: {{duration: 10m}}
"""


def test_cleanup_restores_the_daemonset_and_the_node_after_a_sigkill_mid_step(driver_installed: KindCluster,
                                                                             tmp_path: Path) -> None:
    cluster = driver_installed
    kube = cluster.kube()
    workers = _workers(cluster)
    nodes = cluster.node_containers()
    before = kube.get(DAEMONSET, "dra-test-driver", "draguard-system") or {}
    path = tmp_path / "killed.yaml"
    path.write_text(_scenario(workers).replace("{name}", cluster.name))
    proc = subprocess.Popen([sys.executable, "-m", "draguard.cli", "run", str(path), "--report", "json",
                             "--report-dir", str(tmp_path / "report")], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        def paused() -> bool:
            state = nodes.engine.run(["inspect", "--format", "{{.State.Paused}}", workers[1]], check=False)
            return state.stdout.strip() == "true"

        def excluded() -> bool:
            ds = kube.get(DAEMONSET, "dra-test-driver", "draguard-system") or {}
            return ds["spec"]["updateStrategy"]["type"] == "OnDelete"

        _wait("the driver taken off the first worker and the second worker paused", lambda: excluded() and paused(), timeout=300)
        _wait("the driver's pod gone from the first worker", lambda: not kube.items("Pod", "draguard-system") or not [
            p for p in kube.items("Pod", "draguard-system") if p["spec"].get("nodeName") == workers[0]], timeout=120)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        out = proc.communicate(timeout=60)[0]
    print(out[-3000:])
    journals = list((state_dir() / "journal").glob("*.jsonl"))
    assert journals, "the killed run left no journal"
    cleaned = _draguard("cleanup", cwd=tmp_path, timeout=300)
    print(cleaned.stderr)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert "undid driver-down (driver-off)" in cleaned.stderr and "undid node-loss (node-off)" in cleaned.stderr, cleaned.stderr

    after = kube.get(DAEMONSET, "dra-test-driver", "draguard-system") or {}
    assert after["spec"]["updateStrategy"] == before["spec"]["updateStrategy"]
    assert after["spec"]["template"] == before["spec"]["template"]  # the same revision: nothing rolls
    assert nodes.engine.run(["inspect", "--format", "{{.State.Paused}}", workers[1]]).stdout.strip() == "false"

    def ready(node: str) -> bool:
        obj = kube.get("Node", node) or {}
        return any(c["type"] == "Ready" and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))

    _wait("both workers Ready again", lambda: all(ready(w) for w in workers), timeout=180)
    _wait("the driver Ready on every worker again", lambda: (lambda st: st.get("numberReady") == st.get("desiredNumberScheduled")
          == len(workers))((kube.get(DAEMONSET, "dra-test-driver", "draguard-system") or {}).get("status", {})), timeout=180)
    _wait("the run's namespace gone", lambda: not kube.items("Namespace", label_selector=RUN_LABEL), timeout=180)


def test_a_cdi_spec_lost_under_a_prepared_claim_is_caught_from_the_runtimes_report(driver_installed: KindCluster,
                                                                                   tmp_path: Path) -> None:
    """container-devices on real nodes reads what containerd reports. A node that loses the CDI spec of a
    claim still prepared (a reboot wipes /var/run/cdi, and a driver that does not write it again) cannot
    start that claim's container again: the kubelet reports containerd's "CDI device injection failed",
    which the invariant names with the pod and the node."""
    from draguard.harness.cluster.kind.image import busybox_image
    from draguard.harness.invariants import container_devices
    from draguard.harness.invariants.snapshot import Snapshot

    cluster = driver_installed
    busybox = "draguard.dev/busybox:test"
    cluster.load_image_archive(busybox_image(busybox, tmp_path / "busybox.tar"))
    kube = cluster.kube()
    run = f"kind-cdi-{os.getpid()}"
    ns = f"draguard-{run}"
    labels = {RUN_LABEL: run}
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
    try:
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": ns, "labels": labels},
                     "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": DEVICE_CLASS}}]}}}, namespace=ns)
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "restarts", "namespace": ns, "labels": labels},
                     "spec": {"restartPolicy": "Always", "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
                              "containers": [{"name": "c", "image": busybox, "imagePullPolicy": "Never",
                                              "command": ["sh", "-c", "sleep 3; exit 1"],
                                              "resources": {"claims": [{"name": "gpu"}]}}]}}, namespace=ns)  # fmt: skip
        pod = _wait("the pod running once", lambda: (lambda p: p if p.get("status", {}).get("phase") == "Running" else None)(
            kube.get("Pod", "restarts", ns) or {}))
        node, uid = pod["spec"]["nodeName"], (kube.get("ResourceClaim", "gpu", ns) or {})["metadata"]["uid"]
        nodes = cluster.node_containers()
        nodes.exec(node, ["rm", "-f", f"/var/run/cdi/{TEST_DRIVER}-{uid}-req-0.json"])  # lost; the claim stays prepared

        def refused() -> list[Any]:
            return container_devices.check(Snapshot(time=0.0, pods=(kube.get("Pod", "restarts", ns) or {},)))

        [violation] = _wait("the runtime refusing the container without its CDI spec", refused, timeout=120)
        print(violation.message)
        assert f"node {node}: the container runtime could not create container c of pod {ns}/restarts" in violation.message
        assert "CDI device injection failed" in violation.message and uid in violation.message
    finally:
        kube.delete("Namespace", ns)
        _wait("the test's namespace gone", lambda: kube.get("Namespace", ns) is None, timeout=180)
