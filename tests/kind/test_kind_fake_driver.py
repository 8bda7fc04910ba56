"""draguard's fake driver installed as a DaemonSet (deploy/fake-driver.yaml) on kind nodes (a real kubelet,
containerd and runc), its image built offline from this checkout and loaded with ``kind load``:

- a pod with a claim runs, and its container sees the driver's CDI edits, injected by containerd (the
  environment and the device node); the claim's CDI spec and the driver's checkpoint live on the node's
  hostPaths while it runs and are gone after;
- the library, retargeted at it (``draguard run scenarios --cluster kind --driver gpu.draguard.dev
  --device-class draguard-fake-driver``): the scenarios that apply on kind (:data:`APPLIES_ON_KIND`), among
  them those whose steps switch on the fake driver's faults through its fault file and device truth on the
  node (written inside its pod there with the API's exec), hold every invariant against the correct driver
  and meet their expectations but for the progress rules listed in :data:`NOT_REACHED_ON_KIND`, and those
  that run a mutant show the violation they expect (judged with the device truth read in the driver's
  pods, and the run's containers inspected through the API: their environment read); every fault fired,
  and afterwards each node's fault file holds no fault and every device is healthy and reset;
- each mutant whose catching scenario applies on kind (:data:`CAUGHT_ON_KIND`), switched on through the
  DaemonSet's args by the installed fleet, is caught by the invariant named there, and the DaemonSet is
  the correct driver again afterwards.

tests/conftest.py runs this file before test_kind_cluster.py, whose last tests bring the session's cluster
down. Skips with the reason where docker cannot run (tests/kind/conftest.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from draguard.harness.cluster.kind import engine as engine_mod
from draguard.harness.cluster.kind.cluster import KindCluster
from draguard.harness.cluster.kind.driverimage import fake_driver_image
from draguard.harness.cluster.kind.image import busybox_image
from draguard.harness.cluster.podfiles import PodFiles
from draguard.harness.core.paths import DEFAULT_DRIVER
from draguard.harness.kube import RUN_LABEL
from test_kind_cluster import DAEMONSET, DEPLOY, _kubectl, _wait

pytestmark = pytest.mark.timeout(3600)

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = "draguard-system"
NAME = "draguard-fake-driver"  # the DaemonSet and the DeviceClass of deploy/fake-driver.yaml
APPLIES_ON_KIND = {
    "cdi-devices-correct-driver", "driver-down-until-cleanup", "driver-restart-mid-gang", "force-delete-driver-down",
    "gang-deadlock-per-pod", "node-agent-restart", "node-loss-returns", "preempt-gang-member",
    # through the fake driver's fault file on the node (prepare, unprepare and reset failures, slow resets)
    "drain-node-unprepare-failure", "evict-before-prepare-succeeded", "reset-failure-correct-driver",
    "slow-reset-does-not-block-prepare",
    # through its device truth on the node (a device fails)
    "device-failure-correct-driver", "gpu-faults-correct-driver",
    # a mutant's violation judged with the device truth read in the driver's pods and the containers inspected
    "gpu-faults-silent-health", "incomplete-cdi-spec", "reset-leak-forget-before-reset",
}
"""Library scenarios that apply on a 1+2 kind cluster with 4 fake devices per worker: the others need the fake
driver's crash points, checkpoint damage or fake node agents, the gRPC interposer, a control plane draguard
started, 8 devices on a node, the PodGroup API, opaque configuration the driver does not take, or expect a
violation in what is not judged on an installed driver (each says which)."""
NOT_REACHED_ON_KIND: dict[str, str] = {}
"""Scenario -> a progress expectation that a real kubelet does not reach within the scenario's settle against
the correct driver: none since the installed fleet's ``retry_grace`` awaits a real kubelet's retry (before
it, force-delete-driver-down's newcomer, whose prepare failed while the driver was down, was not Running
when its 20 s settle ended, nor 60 s after the driver was back; with it the scenario was met in 92 s)."""
CAUGHT_ON_KIND = {
    "incomplete-cdi": ("cdi-devices-correct-driver", "container-devices"),
    "unprepare-needs-claim": ("force-delete-driver-down", "no-leak"),
    "unknown-unprepare-error": ("evict-before-prepare-succeeded", "no-leak"),
    "lock-across-reset": ("slow-reset-does-not-block-prepare", "expect:progress"),
}
"""Mutant -> the library scenario applicable on kind that catches it, and the invariant violated (which holds
against the correct driver), or ``expect:progress`` for a progress rule the correct driver meets."""


def _draguard(*args: str, cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "draguard.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _workers(cluster: KindCluster) -> list[str]:
    return sorted(n["metadata"]["name"] for n in cluster.kube().items("Node")
                  if "node-role.kubernetes.io/control-plane" not in n["metadata"].get("labels", {}))


def _args(cluster: KindCluster) -> list[str]:
    ds = cluster.kube().get(DAEMONSET, NAME, SYSTEM) or {}
    return list(ds["spec"]["template"]["spec"]["containers"][0]["args"])


@pytest.fixture(scope="module")
def fake_driver(kind_cluster: KindCluster) -> Iterator[KindCluster]:
    """The fake driver's image loaded into the nodes, deploy/fake-driver.yaml applied, its pods Ready and a
    ResourceSlice per worker; deleted (its namespace too) at the end."""
    kube = kind_cluster.kube()
    _wait("namespace draguard-system of an earlier test gone", lambda: not (kube.get("Namespace", SYSTEM) or {}).get(
        "metadata", {}).get("deletionTimestamp"), timeout=120)
    t0 = time.monotonic()
    image, stages = fake_driver_image(progress=lambda s: print(s, flush=True))
    print(f"fake driver image {image.keyed_tag}: {time.monotonic() - t0:.1f}s {stages}")
    kind_cluster.load_image_archive(image.tarball)
    applied = _kubectl(kind_cluster, "apply", "-f", str(DEPLOY / "fake-driver.yaml"))
    assert applied.returncode == 0, applied.stderr
    workers = _workers(kind_cluster)
    try:
        def ready() -> bool:
            st = (kube.get(DAEMONSET, NAME, SYSTEM) or {}).get("status", {})
            return st.get("desiredNumberScheduled", 0) >= len(workers) and st.get("numberReady") == st.get("desiredNumberScheduled")

        _wait("the fake driver's DaemonSet Ready on every worker", ready)
        _wait("a ResourceSlice of the fake driver per worker", lambda: set(workers) <= {
            s["spec"]["nodeName"] for s in kube.items("ResourceSlice") if s["spec"]["driver"] == DEFAULT_DRIVER})
        yield kind_cluster
    finally:
        _kubectl(kind_cluster, "delete", "--ignore-not-found", "--wait=true", "--timeout=110s", "-f",
                 str(DEPLOY / "fake-driver.yaml"))


def test_a_pod_with_a_claim_sees_the_fake_drivers_cdi_edits(fake_driver: KindCluster, tmp_path: Path) -> None:
    cluster = fake_driver
    busybox = "draguard.dev/busybox:test"
    cluster.load_image_archive(busybox_image(busybox, tmp_path / "busybox.tar"))
    kube = cluster.kube()
    run = f"kind-fake-{int(time.time())}"
    ns = f"draguard-{run}"
    engine = engine_mod.find([], start=False)
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {RUN_LABEL: run}}})
    try:
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": "gpu", "namespace": ns, "labels": {RUN_LABEL: run}},
                     "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": NAME}}]}}},
                    namespace=ns)  # fmt: skip
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "uses-gpu", "namespace": ns, "labels": {RUN_LABEL: run}},
                     "spec": {"restartPolicy": "Never", "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
                              "containers": [{"name": "c", "image": busybox, "imagePullPolicy": "Never",
                                              "command": ["sh", "-c", "env | grep -E '^(DRAGUARD|DRA_)' | sort; ls /dev/draguard; sleep 10"],
                                              "resources": {"claims": [{"name": "gpu"}]}}]}}, namespace=ns)  # fmt: skip
        running = _wait("the pod with a claim to run", lambda: (lambda p: p if p.get("status", {}).get("phase") == "Running" else None)(
            kube.get("Pod", "uses-gpu", ns) or {}))
        node = running["spec"]["nodeName"]
        claim = kube.get("ResourceClaim", "gpu", ns) or {}
        uid = claim["metadata"]["uid"]
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [(r["driver"], r["pool"], r["request"]) for r in results] == [(DEFAULT_DRIVER, node, "req-0")]
        device = results[0]["device"]
        # The driver's files on the node's hostPaths: the claim's CDI spec (read by containerd) and its books.
        specs = engine.run(["exec", node, "ls", "/var/run/cdi"]).stdout.split()
        assert f"{DEFAULT_DRIVER}-{uid}.json" in specs, specs
        books = json.loads(engine.run(["exec", node, "cat", f"/var/lib/kubelet/plugins/{DEFAULT_DRIVER}/checkpoint.json"]).stdout)
        assert [d["device"] for d in books["claims"][uid]["devices"]] == [device], books
        pod = _wait("the pod with a claim to finish", lambda: (lambda p: p if p.get("status", {}).get("phase") in ("Succeeded", "Failed") else None)(
            kube.get("Pod", "uses-gpu", ns) or {}))
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        logs = _kubectl(cluster, "logs", "-n", ns, "uses-gpu").stdout.split()
        # The CDI edits, injected by containerd: the spec's and the device's environment, and the device node.
        assert f"DRA_RESOURCE_DRIVER_NAME={DEFAULT_DRIVER}" in logs and f"DRAGUARD_CLAIM_UID={uid}" in logs, logs
        assert f"DRAGUARD_DEVICE_0={device}" in logs and logs[-1] == device, logs
        kube.delete("Pod", "uses-gpu", ns)
        _wait("the CDI spec removed on unprepare", lambda: f"{DEFAULT_DRIVER}-{uid}.json" not in
              engine.run(["exec", node, "ls", "/var/run/cdi"]).stdout.split(), timeout=90)
        _wait("the claim gone from the driver's books", lambda: uid not in json.loads(engine.run(
            ["exec", node, "cat", f"/var/lib/kubelet/plugins/{DEFAULT_DRIVER}/checkpoint.json"]).stdout)["claims"], timeout=30)
    finally:
        kube.delete("Namespace", ns)


def _common(cluster: KindCluster) -> list[str]:
    return ["--cluster", "kind", "--kubeconfig", str(cluster.kubeconfig), "--driver", DEFAULT_DRIVER, "--device-class", NAME]


def test_the_library_on_kind_passes_against_the_correct_fake_driver(fake_driver: KindCluster, tmp_path: Path) -> None:
    cluster = fake_driver
    dry = _draguard("run", str(ROOT / "scenarios"), *_common(cluster), "--dry-run", cwd=tmp_path, timeout=300)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    decided = dict(line.split(": ", 1) for line in dry.stdout.splitlines()
                   if ": " in line and not line.startswith(" ") and line.split(": ", 1)[1].startswith(("applicable", "not applicable")))
    applicable = {name for name, why in decided.items() if why.startswith("applicable")}
    print(f"{len(applicable)} of {len(decided)} library scenarios apply on kind against the fake driver: {', '.join(sorted(applicable))}")
    for name, why in sorted(decided.items()):
        if name not in applicable:
            print(f"  {name}: {why}")
    assert applicable == APPLIES_ON_KIND, (applicable ^ APPLIES_ON_KIND, decided)
    report = tmp_path / "report"
    t0 = time.monotonic()
    done = _draguard("run", *(str(ROOT / "scenarios" / f"{n}.yaml") for n in sorted(applicable)), *_common(cluster),
                     "--report", "json", "--report-dir", str(report), cwd=tmp_path)
    verdict = json.loads((report / "verdict.json").read_text())
    print(f"{len(verdict['scenarios'])} scenarios on kind in {time.monotonic() - t0:.0f}s")
    for sc in verdict["scenarios"]:
        violated = [k for k, v in sc["invariants"].items() if v["status"] == "violated"]
        print(sc["name"], sc["outcome"], f"{sc['durationSeconds']:.0f}s", [(s["name"], s["status"], s["fired"]) for s in sc["steps"]],
              "violated:", violated)
    assert {sc["name"] for sc in verdict["scenarios"]} == applicable
    problems = []  # every scenario is checked before the test fails
    for sc in verdict["scenarios"]:
        unmet = [r["rule"] for r in sc.get("expectationResults") or [] if not r["met"]]
        wrong = [k for k, v in sc["invariants"].items()  # violated where the scenario does not expect or ignore it
                 if v["status"] == "violated" and v.get("expected") not in ("violate", "ignore")]
        expected = ("not-met", [NOT_REACHED_ON_KIND[sc["name"]]]) if sc["name"] in NOT_REACHED_ON_KIND else ("met", [])
        if sc.get("error") is not None or wrong or (sc["outcome"], unmet) != expected:
            problems.append((sc["name"], sc.get("error"), sc["outcome"], unmet, wrong,
                             {k: [x["message"] for x in v.get("violations") or []][:2] for k, v in sc["invariants"].items()
                              if v["status"] == "violated"}))
        # every chaos step really struck the driver or the node
        problems += [(sc["name"], step) for step in sc["steps"] if not (step["status"] == "ok" and step["fired"])]
        if sc["invariants"]["no-leak"].get("expected") != "violate" and sc["invariants"]["no-leak"]["status"] != "held":
            problems.append((sc["name"], sc["invariants"]["no-leak"]))
    assert problems == [], problems
    assert done.returncode == (1 if NOT_REACHED_ON_KIND else 0), done.stdout[-3000:] + done.stderr[-3000:]
    # the run's containers were seen, and each one's environment read through an ephemeral container
    inspected = [line for line in done.stderr.splitlines() if "containers of the run inspected through the API" in line]
    print("\n".join(inspected))
    read = sum(int(re.search(r"(\d+) environment\(s\) read", line).group(1)) for line in inspected)  # type: ignore[union-attr]
    assert read > 0, inspected
    _faults_undone(cluster)


def _faults_undone(cluster: KindCluster) -> None:
    """Each worker's fault file (read inside the driver's pod there) holds no fault, and every device of its
    device truth is healthy and reset: the steps' faults were undone, and a mutant's damage to the fake
    hardware put back after its run."""
    kube = cluster.kube()
    for node in _workers(cluster):
        files = PodFiles(kube, SYSTEM, NAME, node, "kubelet-plugin")
        text = files.read(f"/var/lib/kubelet/plugins/{DEFAULT_DRIVER}/faults.json")
        left = {k: v for k, v in json.loads(text or "{}").items() if k not in ("generation", "generations") and v}
        assert left == {}, (node, left)
        truth = json.loads(files.read(f"/var/lib/draguard-fake/{node}/devices/truth.json") or "{}")
        assert truth.get("devices"), (node, truth)  # the driver installed its fake hardware there
        broken = {n: (d["reset"], d["healthMessage"]) for n, d in truth["devices"].items()
                  if d["health"] != "healthy" or d.get("lost") or d["reset"] != "clean"}
        assert broken == {}, (node, broken)


@pytest.mark.parametrize("mutant", sorted(CAUGHT_ON_KIND))
def test_a_mutant_whose_scenario_applies_on_kind_is_caught(fake_driver: KindCluster, tmp_path: Path, mutant: str) -> None:
    cluster = fake_driver
    scenario, invariant = CAUGHT_ON_KIND[mutant]
    yaml = YAML()
    doc = yaml.load((ROOT / "scenarios" / f"{scenario}.yaml").read_text())
    doc["spec"].setdefault("driver", {})["mutant"] = mutant
    path = tmp_path / f"{scenario}.yaml"
    with path.open("w") as f:
        yaml.dump(doc, f)
    correct = _args(cluster)
    assert not any(a.startswith("--mutant") for a in correct), correct
    report = tmp_path / "report"
    done = _draguard("run", str(path), *_common(cluster), "--report", "json", "--report-dir", str(report), cwd=tmp_path)
    assert f"mutant {mutant}: DaemonSet {SYSTEM}/{NAME} runs the fake driver with --mutant={mutant}" in done.stderr, done.stderr[-3000:]
    (sc,) = json.loads((report / "verdict.json").read_text())["scenarios"]
    violated = [k for k, v in sc["invariants"].items() if v["status"] == "violated"]
    print(f"{mutant} on {scenario}: {sc['outcome']} in {sc['durationSeconds']:.0f}s, violated {violated}:",
          [v["message"] for v in (sc["invariants"].get(invariant) or {}).get("violations") or []][:2],
          sc.get("expectationResults"))
    assert sc.get("error") is None, sc.get("error")
    if invariant == "expect:progress":  # a progress rule the correct driver meets is not reached
        unmet = [r["rule"] for r in sc.get("expectationResults") or [] if not r["met"]]
        assert sc["outcome"] == "not-met" and unmet, (sc["outcome"], sc.get("expectationResults"), sc["invariants"])
    else:
        assert sc["outcome"] == "not-met" and invariant in violated, (sc["outcome"], sc["invariants"])
        assert sc["invariants"][invariant].get("expected") not in ("violate", "ignore")  # one the scenario expects to hold
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert _args(cluster) == correct  # the correct driver again, on every node
    st = (cluster.kube().get(DAEMONSET, NAME, SYSTEM) or {}).get("status", {})
    assert st.get("updatedNumberScheduled") == st.get("numberReady") == st.get("desiredNumberScheduled"), st
