"""Fake nodes end to end on the local backend: real scheduler and controllers, a real plugin socket,
the interposer in between, and ``draguard nodes`` as its own process (so it can be killed)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from draguard.harness.kube import Kube, Obj
from draguard.harness.nodes import Checkpoint, FakeNodesProcess
from draguard.harness.nodes.node import LEASE_NAMESPACE
from draguard.harness.nodes.stubplugin import StubPlugin
from draguard.harness.devices.truth import DeviceTruth
from draguard.harness.core.paths import NodeDirs
from draguard.harness.proxy import FaultSet, Interposer, read_calls
from support import wait

pytestmark = pytest.mark.cluster

DRIVER = "gpu.draguard.dev"


@dataclass
class Setup:
    kube: Kube
    ns: str
    node: str
    cls: str
    root: Path
    proxy: Interposer
    plugin: StubPlugin = None  # type: ignore[assignment]  # absent where a real driver runs
    faults: Path = None  # type: ignore[assignment]
    nodes: FakeNodesProcess = None  # type: ignore[assignment]

    @property
    def checkpoint(self) -> dict[str, Any]:
        return Checkpoint.read(NodeDirs(self.root / "nodes", self.node).base / "dra_manager_state.json")

    def calls(self, method: str) -> list[dict[str, Any]]:
        return [c for c in read_calls(self.proxy.calls_file(self.node)) if c["method"] == method]

    def pod(self, name: str, claims: list[Obj], extra: Obj | None = None) -> Obj:
        spec: Obj = {
            "nodeSelector": {"kubernetes.io/hostname": self.node},
            "containers": [{
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"claims": [{"name": c["name"]} for c in claims]},
            }],
            "resourceClaims": claims,
        }
        return self.kube.create({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": self.ns}, "spec": spec | (extra or {}),
        })

    def template(self, name: str, cls: str | None = None) -> None:
        self.kube.create({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": cls or self.cls}}]}}},
        })

    def phase(self, name: str) -> str | None:
        pod = self.kube.get("Pod", name, self.ns)
        return pod.get("status", {}).get("phase") if pod else None

    def claim_uids(self, pod_name: str) -> set[str]:
        pod = self.kube.get("Pod", pod_name, self.ns) or {}
        names = [s.get("resourceClaimName") for s in pod.get("status", {}).get("resourceClaimStatuses") or []]
        names += [c["resourceClaimName"] for c in pod.get("spec", {}).get("resourceClaims", []) if c.get("resourceClaimName")]
        return {self.kube.get("ResourceClaim", n, self.ns)["metadata"]["uid"] for n in names if n}

    def events(self, pod_name: str, reason: str) -> list[Obj]:
        return [
            e for e in self.kube.items("Event", self.ns)
            if e["involvedObject"].get("name") == pod_name and e.get("reason") == reason
        ]


def slice_for(node: str, driver: str, devices: int = 8) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"dev-{i}"} for i in range(devices)],
        },
    }


def device_class(name: str, driver: str) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
    }


@pytest.fixture
def setup(draguard_cluster: Any, draguard_namespace: str, root: Path) -> Iterator[Setup]:
    kube = draguard_cluster.kube()
    node = f"fn-{uuid.uuid4().hex[:8]}"
    cls = f"{node}-gpu"
    plugin = StubPlugin(root / "plugins", node, cdi_dir=NodeDirs(root / "nodes", node).cdi).start()
    faults = root / "faults.yaml"
    faults.write_text("faults: []\n")
    proxy = Interposer(root / "plugins", root / "nodes", FaultSet(faults), interval=0.1).start()
    nodes = FakeNodesProcess(
        draguard_cluster.kubeconfig, [node], root=root / "nodes", run_label=draguard_cluster.run_id,
        log=root / "nodes.log", extra_args=["--heartbeat-interval", "1", "--backoff-max", "1", "--call-timeout", "20"],
    )
    try:
        nodes.start()
        kube.create(device_class(cls, DRIVER))
        kube.create(slice_for(node, DRIVER))
        yield Setup(kube, draguard_namespace, node, cls, root, proxy, plugin, faults, nodes)
    finally:
        for pod in kube.items("Pod", draguard_namespace):
            kube.delete("Pod", pod["metadata"]["name"], draguard_namespace, grace_seconds=0)
        nodes.stop()
        proxy.stop()
        plugin.stop()
        for kind, name in (("ResourceSlice", f"{node}-{DRIVER}"), ("ResourceSlice", f"{node}-other.draguard.dev"),
                           ("DeviceClass", cls), ("DeviceClass", f"{node}-other"), ("Node", node)):
            kube.delete(kind, name)
        kube.delete("Lease", node, LEASE_NAMESPACE)


def test_a_gang_with_claims_runs_only_after_prepare_and_deleting_it_unprepares_everything(setup: Setup) -> None:
    s = setup
    node = s.kube.get("Node", s.node)
    assert node["metadata"]["labels"]["draguard.dev/fake-node"] == "true"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.37.2"
    renewed = s.kube.get("Lease", s.node, LEASE_NAMESPACE)["spec"]["renewTime"]
    wait(lambda: s.kube.get("Lease", s.node, LEASE_NAMESPACE)["spec"]["renewTime"] != renewed, "a lease renewal", 5)

    s.template("gpu")
    s.kube.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared", "namespace": s.ns},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": s.cls}}]}},
    })
    gang = [f"gang-{i}" for i in range(4)]
    for name in gang:
        s.pod(name, [{"name": "gpu", "resourceClaimTemplateName": "gpu"}, {"name": "shared", "resourceClaimName": "shared"}])
    running: set[str] = set()

    def all_running() -> bool:
        for name in gang:
            if name not in running and s.phase(name) == "Running":
                assert s.claim_uids(name) <= s.plugin.prepared, f"{name} is Running before its claims were prepared"
                running.add(name)
        return len(running) == len(gang)

    wait(all_running, "the gang to run")
    shared_uid = s.kube.get("ResourceClaim", "shared", s.ns)["metadata"]["uid"]
    prepares = s.plugin.calls_of("NodePrepareResources")
    assert len(prepares) == len(gang), "one NodePrepareResources per driver per pod"
    assert sum(1 for c in prepares for ref in c.claims if ref.uid == shared_uid) == 1, "shared claim prepared once"
    assert len(s.plugin.prepared) == len(gang) + 1
    assert all(c["prepared"] for c in s.checkpoint.values()) and len(s.checkpoint[shared_uid]["pods"]) == 4

    for name in gang[:3]:
        s.kube.delete("Pod", name, s.ns)
    wait(lambda: all(s.kube.get("Pod", n, s.ns) is None for n in gang[:3]), "three pods to go")
    assert shared_uid in s.plugin.prepared, "the shared claim is still used by the last pod"
    s.kube.delete("Pod", gang[3], s.ns)
    wait(lambda: s.kube.get("Pod", gang[3], s.ns) is None, "the last pod to go")
    assert s.plugin.prepared == set()
    unprepared = [ref.uid for c in s.plugin.calls_of("NodeUnprepareResources") for ref in c.claims]
    assert sorted(unprepared) == sorted(set(unprepared)) and len(unprepared) == len(gang) + 1
    assert s.checkpoint == {}


def test_an_agent_killed_mid_gang_neither_leaks_nor_prepares_twice_in_one_life(setup: Setup) -> None:
    # "Twice" is within one life of the agent. A restarted agent prepares the claims of its running pods
    # once more, as a restarted kubelet does: its claim cache comes back from the checkpoint unprepared
    # (pkg/kubelet/cm/dra/claiminfo.go newClaimInfoFromState) and prepareResources (manager.go) skips
    # only claims with isPrepared(). What must not happen: a claim prepared again while the agent lives,
    # a pod deleted while the agent was down prepared again, a claim given other devices, or a leak.
    s = setup
    s.faults.write_text("- {method: NodePrepareResources, claim: 'gang-2-*', action: hang}\n")
    s.template("gpu")
    gang = [f"gang-{i}" for i in range(4)]
    for name in gang:
        s.pod(name, [{"name": "gpu", "resourceClaimTemplateName": "gpu"}])
    others = [n for n in gang if n != "gang-2"]
    wait(lambda: all(s.phase(n) == "Running" for n in others), "the pods whose prepare is not held")
    # gang-2 may be scheduled well after the others: a pod that failed to schedule (its claim's status
    # written by the controller in between) is retried after the scheduler's back-off, which doubles up to
    # 10 s; on a loaded CI machine 30 s was not always enough.
    wait(lambda: s.proxy.faults.applied() == [1], "gang-2's prepare to be held", timeout=90)
    assert s.phase("gang-2") == "Pending"
    devices = {uid: c["drivers"] for uid, c in s.checkpoint.items() if c["prepared"]}
    assert len(devices) == 3

    def prepared(calls: list[Any]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for call in calls:
            for name in (ref.name.rsplit("-", 1)[0] for ref in call.claims):
                counts[name] = counts.get(name, 0) + 1
        return counts

    s.nodes.kill()
    first_life = len(s.plugin.calls_of("NodePrepareResources"))
    assert prepared(s.plugin.calls_of("NodePrepareResources")) == {"gang-0-gpu": 1, "gang-1-gpu": 1, "gang-3-gpu": 1}
    s.kube.delete("Pod", "gang-0", s.ns)  # deleted while the node agent is down
    s.faults.write_text("faults: []\n")
    s.nodes.start()

    wait(lambda: s.phase("gang-2") == "Running", "gang-2 to run after the restart")
    wait(lambda: s.kube.get("Pod", "gang-0", s.ns) is None, "gang-0 to be let go after the restart")
    wait(lambda: len(s.plugin.calls_of("NodePrepareResources")) >= first_life + 3, "the running pods' claims again")
    again = s.plugin.calls_of("NodePrepareResources")[first_life:]
    assert all(len(c.claims) == 1 for c in again), "one call per pod and driver, as for a new pod"
    assert prepared(again) == {"gang-1-gpu": 1, "gang-2-gpu": 1, "gang-3-gpu": 1}, "each claim once in the new life"
    for uid, drivers in devices.items():
        if uid in s.checkpoint:
            assert s.checkpoint[uid]["drivers"] == drivers, "prepared again for the same devices"
    assert len(s.plugin.prepared) == 3
    for name in ("gang-1", "gang-3"):
        assert s.phase(name) == "Running"

    for name in gang[1:]:
        s.kube.delete("Pod", name, s.ns)
    wait(lambda: all(s.kube.get("Pod", n, s.ns) is None for n in gang), "the gang to go")
    assert s.plugin.prepared == set(), "nothing leaked"
    unprepares = s.plugin.calls_of("NodeUnprepareResources")
    assert all(len(c.claims) == 1 for c in unprepares), "one call per pod and driver"
    assert prepared(unprepares) == {f"{n}-gpu": 1 for n in gang}, "each claim unprepared once"
    assert s.checkpoint == {}


def test_an_injected_prepare_error_keeps_the_pod_pending_with_an_event_until_lifted(setup: Setup) -> None:
    s = setup
    s.faults.write_text("- {method: NodePrepareResources, action: error, message: injected by the test}\n")
    s.template("gpu")
    s.pod("p", [{"name": "gpu", "resourceClaimTemplateName": "gpu"}])
    (event,) = wait(lambda: s.events("p", "FailedPrepareDynamicResources"), "the FailedPrepareDynamicResources event")
    assert event["type"] == "Warning" and "injected by the test" in event["message"]
    assert event["involvedObject"]["kind"] == "Pod"
    time.sleep(1.5)  # a few retries with backoff
    assert s.phase("p") == "Pending" and s.plugin.calls == []
    assert len(s.calls("NodePrepareResources")) >= 2, "the node retries"

    s.faults.write_text("faults: []\n")
    wait(lambda: s.phase("p") == "Running", "the pod to run once the fault is lifted")
    assert len(s.plugin.calls_of("NodePrepareResources")) == 1


def test_a_claim_of_another_driver_is_reported_by_name_and_other_pods_still_run(setup: Setup) -> None:
    s = setup
    other = "other.draguard.dev"
    s.kube.create(device_class(f"{s.node}-other", other))
    s.kube.create(slice_for(s.node, other))
    s.template("other", f"{s.node}-other")
    s.template("gpu")
    s.pod("bad", [{"name": "x", "resourceClaimTemplateName": "other"}])
    s.pod("good", [{"name": "gpu", "resourceClaimTemplateName": "gpu"}])
    (event,) = wait(lambda: s.events("bad", "FailedPrepareDynamicResources"), "the event of the bad pod")
    assert f"DRA driver {other} is not registered on node {s.node}" in event["message"]
    assert f"(claim {s.ns}/bad-x-" in event["message"]
    wait(lambda: s.phase("good") == "Running", "the good pod to run")
    assert s.phase("bad") == "Pending"
    s.kube.delete("Pod", "bad", s.ns)
    wait(lambda: s.kube.get("Pod", "bad", s.ns) is None, "the bad pod to be let go")
    assert [uid for uid in s.checkpoint] == list(s.claim_uids("good")), "only the good pod's claim is kept"


def test_a_lost_node_stops_renewing_its_lease_and_resumes_when_found(setup: Setup) -> None:
    s = setup

    def renew_time() -> str:
        return str(s.kube.get("Lease", s.node, LEASE_NAMESPACE)["spec"]["renewTime"])

    s.nodes.set_lost(s.node)
    time.sleep(1.2)  # a beat in flight may still land
    frozen = renew_time()
    time.sleep(2.5)
    assert renew_time() == frozen
    s.nodes.set_lost(s.node, False)
    wait(lambda: renew_time() != frozen, "the lease to be renewed again", 5)


def test_the_fake_driver_behind_the_interposer_prepares_a_gang_and_is_left_clean(
    draguard_cluster: Any, draguard_namespace: str, root: Path
) -> None:
    from draguard.harness.driver.process import FakeDriverProcess

    kube, ns = draguard_cluster.kube(), draguard_namespace
    node = f"fn-{uuid.uuid4().hex[:8]}"
    with FakeNodesProcess(draguard_cluster.kubeconfig, [node], root=root / "nodes", log=root / "nodes.log",
                          extra_args=["--backoff-max", "1"]), \
            Interposer(root / "plugins", root / "nodes", interval=0.1) as proxy, \
            FakeDriverProcess(draguard_cluster.kubeconfig, node, root=root / "plugins",
                              node_root=root / "nodes") as driver:
        try:
            kube.create(device_class(f"{node}-gpu", DRIVER))
            s = Setup(kube, ns, node, f"{node}-gpu", root, proxy)
            s.template("gpu")
            for i in range(3):
                s.pod(f"gang-{i}", [{"name": "gpu", "resourceClaimTemplateName": "gpu"}])
            wait(lambda: all(s.phase(f"gang-{i}") == "Running" for i in range(3)), "the gang to run on the fake driver")
            assert len(driver.checkpoint().claims) == 3
            truth = DeviceTruth(root / "nodes", node)
            assert sum(len(d.containers) for d in truth.read().devices.values()) == 3, "each container got its GPU"
            assert len([c for c in s.calls("NodePrepareResources") if c["status"] == "OK"]) == 3
            for i in range(3):
                kube.delete("Pod", f"gang-{i}", ns)
            wait(lambda: not any(kube.get("Pod", f"gang-{i}", ns) for i in range(3)), "the gang to go")
            assert driver.checkpoint().claims == {} and driver.checkpoint().leaks() == []
            assert s.checkpoint == {}
            assert {d.reset for d in truth.read().devices.values()} == {"clean"} and truth.read().incidents == ()
        finally:
            kube.delete("DeviceClass", f"{node}-gpu")
            kube.delete("Node", node)
            kube.delete("Lease", node, LEASE_NAMESPACE)
