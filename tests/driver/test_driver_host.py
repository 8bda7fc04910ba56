"""The driver host: many nodes' fake drivers in one process, each node's state kept apart, against a
real API server (claims allocated by writing ``status.allocation``, as test_e2e does)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.harness.devices.truth import DeviceTruth
from draguard.harness.driver.fault_control import set_faults
from draguard.harness.driver.host import DriverHostProcess, HostedDriver, HostedNode
from draguard.harness.driver.slices import LABEL_NODE
from draguard.harness.driver.state import DeviceState
from draguard.harness.grpcapi.plugin import PluginCallError, PluginClient
from draguard.harness.kube import Kube
from support import wait
from .test_e2e import _allocated_claim

pytestmark = pytest.mark.cluster

NODES = 3


@pytest.fixture
def kube(draguard_cluster: Any) -> Kube:
    k: Kube = draguard_cluster.kube()
    return k


@pytest.fixture
def nodes(kube: Kube) -> Iterator[list[str]]:
    run = uuid.uuid4().hex[:6]
    names = [f"dg-host-{run}-{i}" for i in range(NODES)]
    for name in names:
        kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    try:
        yield names
    finally:
        for name in names:
            kube.delete("Node", name)
            kube.delete_collection("ResourceSlice", f"{LABEL_NODE}={name}")


@pytest.fixture
def host(draguard_cluster: Any, root: Path, nodes: list[str]) -> Iterator[DriverHostProcess]:
    specs = [HostedNode(nodes[0], devices=4, mutant="forget-before-reset"), HostedNode(nodes[1], devices=4),
             HostedNode(nodes[2], devices=2)]  # fmt: skip
    proc = DriverHostProcess(draguard_cluster.kubeconfig, root, specs).start()
    try:
        yield proc
    finally:
        proc.stop()


def test_each_node_has_its_own_sockets_slices_checkpoint_faults_and_mutant(
    kube: Kube, host: DriverHostProcess, nodes: list[str], draguard_namespace: str
) -> None:
    handles = host.handles()
    for name, count in zip(nodes, (4, 4, 2)):
        (sl,) = wait(lambda n=name: kube.list("ResourceSlice", field_selector=f"spec.nodeName={n}")[0],
                     what=f"slice of {name}")  # fmt: skip
        assert len(sl["spec"]["devices"]) == count
    a, b, _ = nodes
    claim_a = _allocated_claim(kube, draguard_namespace, "ca", a, ["gpu-0"])
    claim_b = _allocated_claim(kube, draguard_namespace, "cb", b, ["gpu-0"])
    # A reset failure on node a only: with forget-before-reset (node a's mutant) it leaks the device;
    # node b, the correct driver with no fault, frees it.
    set_faults(host.root, a, handles[a].driver, reset_fail={"devices": ["gpu-0"], "forever": True})
    with PluginClient(handles[a].dra_socket, timeout=10) as ca, PluginClient(handles[b].dra_socket, timeout=10) as cb:
        assert ca.prepare([claim_a])[claim_a.uid].error == ""
        assert cb.prepare([claim_b])[claim_b.uid].error == ""
        # A claim of node a sent to node b's socket is refused there: the pool is not b's.
        assert f"not {b}" in cb.prepare([claim_a])[claim_a.uid].error
        ca.unprepare([claim_a])
        assert cb.unprepare([claim_b])[claim_b.uid] == ""
    cp_a, cp_b = handles[a].checkpoint(), handles[b].checkpoint()
    # The leak: node a's driver forgot the claim and keeps no record of the device, while the hardware
    # (the device truth) says its reset failed; node b's device was reset clean.
    assert claim_a.uid not in cp_a.claims and cp_a.device_states().get("gpu-0", DeviceState.FREE) is DeviceState.FREE
    assert DeviceTruth(handles[a].node_root, a).read().devices["gpu-0"].reset == "failed"
    assert DeviceTruth(handles[b].node_root, b).read().devices["gpu-0"].reset == "clean"
    assert cp_b.claims == {} and set(cp_b.device_states().values()) == {DeviceState.FREE}


def test_killing_one_nodes_driver_leaves_the_others_serving_and_a_restart_recovers_its_claims(
    kube: Kube, host: DriverHostProcess, nodes: list[str], draguard_namespace: str
) -> None:
    handles: dict[str, HostedDriver] = host.handles()
    a, b, _ = nodes
    wait(lambda: len(kube.list("ResourceSlice")[0]) >= NODES, what="slices")
    claim = _allocated_claim(kube, draguard_namespace, "kept", a, ["gpu-1"])
    with PluginClient(handles[a].dra_socket, timeout=10) as client:
        assert client.prepare([claim])[claim.uid].error == ""
    pid = host.pid
    handles[a].kill()
    assert not handles[a].alive and handles[b].alive and host.alive and host.pid == pid
    with pytest.raises(PluginCallError), PluginClient(handles[a].dra_socket, timeout=2) as client:
        client.prepare([claim])
    with PluginClient(handles[b].dra_socket, handles[b].registration_socket, timeout=10) as client:
        assert client.get_info().name == handles[b].driver
    handles[a].restart(kill=True)
    assert handles[a].alive
    with PluginClient(handles[a].dra_socket, timeout=10) as client:
        entry = client.prepare([claim])[claim.uid]  # idempotent: from the checkpoint
        assert entry.error == "" and [d.device_name for d in entry.devices] == ["gpu-1"]
        assert client.unprepare([claim])[claim.uid] == ""


def test_an_injected_crash_ends_only_that_nodes_driver(
    kube: Kube, host: DriverHostProcess, nodes: list[str], draguard_namespace: str
) -> None:
    handles = host.handles()
    a, b, _ = nodes
    claim = _allocated_claim(kube, draguard_namespace, "crash", a, ["gpu-2"])
    set_faults(host.root, a, handles[a].driver, crash_at={"point": "prepare.after_started"})
    with pytest.raises(PluginCallError), PluginClient(handles[a].dra_socket, timeout=10) as client:
        client.prepare([claim])
    wait(lambda: not handles[a].alive, what="node a's driver to stop after its crash")
    assert handles[b].alive and host.alive
    assert handles[a].checkpoint().claims[claim.uid].state.value == "PrepareStarted"


def test_deleted_slices_are_restored_from_the_watch_not_a_periodic_list(
    kube: Kube, root: Path, nodes: list[str]
) -> None:
    """A deleted slice comes back within seconds although the full verification round is an hour away:
    the host's one watch marks the node (before, every node's slices were listed every 5 s, a third of
    a core at 500 nodes). Fails if the watch is not kept or a changed node is not verified."""
    import threading

    from draguard.harness.driver.host import DriverHost

    host = DriverHost(kube, root, [HostedNode(n, devices=2) for n in nodes], verify_every=3600.0, resync_interval=0.2)
    host.start()
    serving = threading.Thread(target=host.serve, daemon=True)
    serving.start()
    try:
        a, b, _ = nodes

        def slice_of(node: str) -> dict[str, Any] | None:
            items = kube.list("ResourceSlice", field_selector=f"spec.nodeName={node}")[0]
            return items[0] if len(items) == 1 else None

        before = wait(lambda: slice_of(a), what="node a's slice")
        kube.delete("ResourceSlice", before["metadata"]["name"])
        again = wait(lambda: slice_of(a), what="node a's slice published again", timeout=10)
        assert again["metadata"]["uid"] != before["metadata"]["uid"]
        assert [d["name"] for d in again["spec"]["devices"]] == ["gpu-0", "gpu-1"]
        # Another node's slice deleted later: the watch still marks it (no relist in between).
        other = wait(lambda: slice_of(b), what="node b's slice")
        kube.delete("ResourceSlice", other["metadata"]["name"])
        back = wait(lambda: slice_of(b), what="node b's slice published again", timeout=10)
        assert back["metadata"]["uid"] != other["metadata"]["uid"]
    finally:
        host.stop_event.set()
        serving.join(10)
