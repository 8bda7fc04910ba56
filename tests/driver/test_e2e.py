"""The fake driver as a process against a real API server: slices, prepare/unprepare over its socket,
per-claim errors, and the no-device-lost guarantee under 50 kills during prepare and unprepare.

Claims are allocated by writing ``status.allocation`` directly, as the kubelet's e2e_node tests do.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.harness import cdi
from draguard.harness.devices.truth import DeviceTruth
from draguard.harness.driver.fault_control import CRASH_POINTS, clear_faults
from draguard.harness.driver.process import FakeDriverProcess
from draguard.harness.driver.slices import LABEL_DRIVER, LABEL_NODE
from draguard.harness.driver.state import DeviceState
from draguard.harness.grpcapi.plugin import ClaimRef, PluginCallError, PluginClient
from draguard.harness.kube import Kube
from draguard.harness.core.paths import DEFAULT_DRIVER
from support import wait

pytestmark = pytest.mark.cluster


@pytest.fixture
def kube(draguard_cluster: Any) -> Kube:
    k: Kube = draguard_cluster.kube()
    return k


@pytest.fixture
def node(kube: Kube) -> Iterator[str]:
    name = f"dg-drv-{uuid.uuid4().hex[:8]}"
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    try:
        yield name
    finally:
        kube.delete("Node", name)
        kube.delete_collection("ResourceSlice", f"{LABEL_NODE}={name}")


def _driver(draguard_cluster: Any, root: Path, node: str, **kw: Any) -> FakeDriverProcess:
    return FakeDriverProcess(draguard_cluster.kubeconfig, node, root=root, reset_ms=1, health_interval=0.2, **kw)


@pytest.fixture
def driver(draguard_cluster: Any, root: Path, node: str) -> Iterator[FakeDriverProcess]:
    proc = _driver(draguard_cluster, root, node, devices=4).start()
    try:
        yield proc
    finally:
        proc.stop()


def _slices(kube: Kube, node: str) -> list[dict[str, Any]]:
    return kube.list("ResourceSlice", field_selector=f"spec.nodeName={node}")[0]


def _allocated_claim(
    kube: Kube, ns: str, name: str, node: str, devices: list[str], driver: str = DEFAULT_DRIVER
) -> ClaimRef:
    """Create a ResourceClaim and allocate ``devices`` of ``node``'s pool to it."""
    claim = kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "draguard-gpu",
                                                                           "count": len(devices)}}]}},
        }
    )
    claim["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpus", "driver": driver, "pool": node, "device": d} for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        }
    }
    kube.replace(claim, subresource="status")
    return ClaimRef(namespace=ns, name=name, uid=claim["metadata"]["uid"])


def test_the_driver_publishes_its_node_pool_and_prepares_an_allocated_claim(
    kube: Kube, driver: FakeDriverProcess, node: str, draguard_namespace: str
) -> None:
    (sl,) = wait(lambda: _slices(kube, node), what="ResourceSlice of the node")
    node_uid = kube.get("Node", node)["metadata"]["uid"]  # type: ignore[index]
    assert sl["spec"]["driver"] == DEFAULT_DRIVER and sl["spec"]["pool"]["name"] == node
    assert sl["spec"]["pool"]["resourceSliceCount"] == 1
    assert sl["metadata"]["labels"] == {LABEL_DRIVER: DEFAULT_DRIVER, LABEL_NODE: node}
    assert [(o["kind"], o["uid"]) for o in sl["metadata"]["ownerReferences"]] == [("Node", node_uid)]
    assert [d["name"] for d in sl["spec"]["devices"]] == [f"gpu-{i}" for i in range(4)]

    claim = _allocated_claim(kube, draguard_namespace, "two-gpus", node, ["gpu-1", "gpu-3"])
    with PluginClient(driver.dra_socket, driver.registration_socket, timeout=10) as client:
        assert client.get_info().endpoint == str(driver.dra_socket)
        entry = client.prepare([claim])[claim.uid]
        assert entry.error == ""
        ids = [i for d in entry.devices for i in d.cdi_device_ids]
        assert [d.device_name for d in entry.devices] == ["gpu-1", "gpu-3"]
        assert cdi.check_ids(driver.dirs.cdi, ids) == []
        cp = driver.checkpoint()
        assert cp.claims[claim.uid].state.value == "PrepareCompleted"
        assert cp.device_states() == {"gpu-1": DeviceState.PREPARED, "gpu-3": DeviceState.PREPARED}

        assert client.unprepare([claim])[claim.uid] == ""
    cp = driver.checkpoint()
    assert cp.claims == {} and set(cp.device_states().values()) == {DeviceState.FREE}
    assert list(driver.dirs.cdi.iterdir()) == []

    assert driver.stop() == 0, driver.log_tail()
    assert not driver.dra_socket.exists() and not driver.registration_socket.exists()
    assert (driver.plugin_dir / "checkpoint.json").exists()


def test_a_claim_of_another_driver_or_with_a_stale_uid_fails_alone(
    kube: Kube, driver: FakeDriverProcess, node: str, draguard_namespace: str
) -> None:
    ns = draguard_namespace
    good = _allocated_claim(kube, ns, "good", node, ["gpu-0"])
    foreign = _allocated_claim(kube, ns, "foreign", node, ["gpu-1"], driver="net.example.com")
    mine = _allocated_claim(kube, ns, "replaced", node, ["gpu-2"])
    stale = ClaimRef(namespace=ns, name="replaced", uid=str(uuid.uuid4()))  # same name, the UID of an older incarnation
    with PluginClient(driver.dra_socket, timeout=10) as client:
        resp = client.prepare([good, foreign, stale])
    assert resp[good.uid].error == ""
    assert f"{ns}/foreign has no device of driver {DEFAULT_DRIVER}" in resp[foreign.uid].error
    assert "UID mismatch" in resp[stale.uid].error and mine.uid in resp[stale.uid].error
    assert set(driver.checkpoint().claims) == {good.uid}


def test_unhealthy_devices_are_tainted_and_partitionable_topologies_are_accepted(
    kube: Kube, draguard_cluster: Any, root: Path, node: str, driver: FakeDriverProcess
) -> None:
    wait(lambda: _slices(kube, node), what="slice")
    driver.set_faults(unhealthy={"devices": ["gpu-2"], "message": "XID 79"})

    def tainted() -> bool:
        (sl,) = _slices(kube, node)
        return bool(sl["spec"]["pool"]["generation"] > 1 and sl["spec"]["devices"][2].get("taints"))

    wait(tainted, what="taint on gpu-2")
    kube.delete_collection("ResourceSlice", f"{LABEL_NODE}={node}")  # as a restarting kubelet does
    wait(lambda: _slices(kube, node), timeout=10, what="slices published again")
    mig_node = f"{node}-mig"
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": mig_node}})
    mig = _driver(draguard_cluster, root, mig_node, topology=None, devices=None)
    mig.args += ["--topology", str(_mig_topology(root))]
    try:
        mig.start()
        slices = wait(lambda: len(s := _slices(kube, mig_node)) == 9 and s, what="9 slices of a100-mig")
        assert sum(1 for s in slices if s["spec"].get("sharedCounters")) == 1
        assert {s["spec"]["pool"]["generation"] for s in slices} == {1}
    finally:
        mig.stop()
        kube.delete("Node", mig_node)
        kube.delete_collection("ResourceSlice", f"{LABEL_NODE}={mig_node}")


def _mig_topology(root: Path) -> Path:
    path = root / "mig.yaml"
    path.write_text("apiVersion: draguard.dev/v1alpha1\nkind: NodeTopology\npreset: a100-mig\n")
    return path


@pytest.mark.parametrize(("mutant", "after"), [(None, "clean"), ("forget-before-reset", "dirty")])
def test_a_crash_during_reset_loses_no_device_unless_the_claim_was_forgotten_first(
    kube: Kube, draguard_cluster: Any, root: Path, node: str, draguard_namespace: str, mutant: str | None,
    after: str,
) -> None:
    proc = _driver(draguard_cluster, root, node, devices=2, mutant=mutant).start()
    try:
        claim = _allocated_claim(kube, draguard_namespace, "c", node, ["gpu-0"])
        truth = DeviceTruth(proc.node_root, node)
        with PluginClient(proc.dra_socket, timeout=10) as client:
            assert client.prepare([claim])[claim.uid].error == ""
            truth.start_container("pod-1/main", "ns/p", [claim.uid], ["gpu-0"])  # as the node's runtime does
            truth.stop_containers("pod-1")
            proc.set_faults(crash_at={"point": "unprepare.during_reset"})
            with pytest.raises(PluginCallError):
                client.unprepare([claim])
        assert proc.wait_exit(5) == 137
        proc.start()
        with PluginClient(proc.dra_socket, timeout=10) as client:  # the kubelet retries
            assert client.unprepare([claim])[claim.uid] == ""
        cp = proc.checkpoint()
        assert cp.leaks() == [] and cp.claims == {}, "either way the driver's books end clean"
        assert truth.read().devices["gpu-0"].reset == after, "the hardware shows whether the device was reset"
    finally:
        proc.stop()


# -- kill -9 at random points ---------------------------------------------------------------------

_KILL_POINTS = [p for p in CRASH_POINTS if not p.startswith("prepare.begin")]


def test_fifty_kills_during_prepare_and_unprepare_lose_no_device(
    kube: Kube, driver: FakeDriverProcess, node: str, draguard_namespace: str
) -> None:
    rng = random.Random(20261207)
    ns = draguard_namespace
    claims = [
        _allocated_claim(kube, ns, "a", node, ["gpu-0"]),
        _allocated_claim(kube, ns, "b", node, ["gpu-1", "gpu-2"]),
        _allocated_claim(kube, ns, "c", node, ["gpu-3"]),
    ]

    def call(op: str, claim: ClaimRef) -> None:
        with PluginClient(driver.dra_socket, timeout=5) as client:
            try:
                (client.prepare if op == "prepare" else client.unprepare)([claim])
            except PluginCallError:
                pass  # the driver died under the call: what the kubelet sees, and retries

    crashes = 0
    for i in range(50):
        if i % 2 == 0:
            driver.set_faults(crash_at={"point": rng.choice(_KILL_POINTS), "after": rng.randrange(3)})
        else:
            clear_faults(driver.root, driver.node, driver.driver)
        # Unprepare more often than prepare so that resets and forgets get hit, not just idempotent prepares.
        ops = [(rng.choice(["prepare", "unprepare", "unprepare"]), rng.choice(claims)) for _ in range(6)]
        if i % 2 == 1:  # a SIGKILL at a random moment while the calls run
            worker = threading.Thread(target=lambda: [call(op, c) for op, c in ops])
            worker.start()
            time.sleep(rng.uniform(0, 0.03))
            driver.kill()
            worker.join(10)
        else:
            for op, c in ops:
                call(op, c)
                if not driver.alive:
                    crashes += 1
                    break
            driver.kill()
        assert driver.checkpoint().leaks() == [], f"after kill {i + 1}"
        driver.start()
    assert crashes >= 8, f"the crash points were reached only {crashes} times"

    clear_faults(driver.root, driver.node, driver.driver)
    with PluginClient(driver.dra_socket, timeout=10) as client:
        resp = client.unprepare(claims)
    assert resp == {c.uid: "" for c in claims}
    cp = driver.checkpoint()
    assert cp.claims == {} and all(s is DeviceState.FREE for s in cp.device_states().values())
    assert list(driver.dirs.cdi.iterdir()) == []
