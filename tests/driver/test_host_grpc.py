"""The driver host's gRPC side in this process: every node's server on the host's one event loop, the
handlers in its thread pool. No API server: claims come from an in-memory store."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from draguard.harness.driver.fault_control import set_faults
from draguard.harness.driver.host import DriverHost, HostedNode
from draguard.harness.driver.mutants import get_mutant
from draguard.harness.grpcapi.plugin import HEALTH_SERVICES, PluginCallError, PluginClient

from .conftest import ClaimStore, allocated_claim


@pytest.fixture
def host(root: Path, store: ClaimStore) -> Iterator[DriverHost]:
    h = DriverHost(None, root, [HostedNode("n-a", devices=3), HostedNode("n-b", devices=2),
                                 HostedNode("n-c", devices=1, mutant="batch-abort-on-error")])
    h.claims = store  # type: ignore[assignment]  # the store answers get_claim as KubeClaims does
    for node in h.nodes.values():
        node.start()
    try:
        yield h
    finally:
        h.shutdown()


def _client(host: DriverHost, node: str) -> PluginClient:
    n = host.node(node)
    return PluginClient(n.dra_socket, n.registration_socket, timeout=10)


def test_prepare_and_unprepare_go_to_the_node_whose_socket_was_called(host: DriverHost, store: ClaimStore) -> None:
    ref = store.add(allocated_claim("c1", ["gpu-1"], pool="n-a"))
    with _client(host, "n-a") as a, _client(host, "n-b") as b:
        assert a.prepare([ref])[ref.uid].error == ""
        assert "not this node's pool" in b.prepare([ref])[ref.uid].error  # n-b is asked about n-a's device
        held = host.node("n-a").plugin.snapshot().devices  # type: ignore[union-attr]
        assert held["gpu-1"].claim == ref.uid
        assert a.unprepare([ref]) == {ref.uid: ""}


def test_a_handler_that_aborts_fails_the_rpc_with_its_code(host: DriverHost, store: ClaimStore) -> None:
    assert get_mutant("batch-abort-on-error").abort_batch_on_error
    bad = store.add(allocated_claim("bad", ["gpu-0"], pool="n-c", driver="other.example.com"))
    with _client(host, "n-c") as c, pytest.raises(PluginCallError) as failed:
        c.prepare([bad])
    assert failed.value.code == grpc.StatusCode.UNKNOWN.name


@pytest.mark.parametrize("service", HEALTH_SERVICES)
def test_each_nodes_health_stream_follows_that_nodes_faults_only(root: Path, host: DriverHost, service: str) -> None:
    with _client(host, "n-a") as a, _client(host, "n-b") as b:
        sa, sb = a.watch_health(service, timeout=20), b.watch_health(service, timeout=20)
        assert {(d.pool_name, d.device_name, d.health) for d in next(sa)} == {("n-a", f"gpu-{i}", "HEALTHY") for i in range(3)}
        assert {d.device_name for d in next(sb)} == {"gpu-0", "gpu-1"}
        set_faults(root, "n-a", unhealthy={"devices": ["gpu-2"], "message": "fell off the bus"})
        sick = [(d.device_name, d.message) for d in next(sa) if d.health == "UNHEALTHY"]
        assert sick == [("gpu-2", "fell off the bus")]
        sa.cancel()
        sb.cancel()


def test_a_killed_node_refuses_calls_and_starts_again_from_its_checkpoint(host: DriverHost, store: ClaimStore) -> None:
    node = host.node("n-a")
    ref = store.add(allocated_claim("c1", ["gpu-0"], pool="n-a"))
    with _client(host, "n-a") as a:
        assert a.prepare([ref])[ref.uid].error == ""
    node.stop(kill=True)
    assert not node.alive
    with PluginClient(node.dra_socket, timeout=2) as a, pytest.raises(PluginCallError) as down:
        a.prepare([ref])
    assert down.value.code == grpc.StatusCode.UNAVAILABLE.name
    node.start()
    with _client(host, "n-a") as a:  # recovered from the checkpoint: prepared already, same device
        entry = a.prepare([ref])[ref.uid]
        assert entry.error == "" and [d.device_name for d in entry.devices] == ["gpu-0"]


def test_shutdown_with_a_health_stream_open_ends_every_thread_it_started(root: Path, store: ClaimStore) -> None:
    before = set(threading.enumerate())
    h = DriverHost(None, root, [HostedNode("n-a", devices=2)])
    h.node("n-a").start()
    client = _client(h, "n-a")
    stream = client.watch_health(HEALTH_SERVICES[0], timeout=20)
    next(stream)
    t0 = time.monotonic()
    h.shutdown()
    assert time.monotonic() - t0 < 5
    client.close()
    deadline = time.monotonic() + 5
    while (left := [t for t in threading.enumerate() if t not in before and t.name.startswith(("grpc-aio", "dra"))]) \
            and time.monotonic() < deadline:  # fmt: skip
        time.sleep(0.1)
    assert left == []


def test_a_rolling_update_serves_a_new_instance_beside_the_old_then_stops_the_old(host: DriverHost, store: ClaimStore) -> None:
    old = host.node("n-a")
    ref = store.add(allocated_claim("c1", ["gpu-0"], pool="n-a"))
    with _client(host, "n-a") as a:
        assert a.prepare([ref])[ref.uid].error == ""
    instance = host.roll(old, overlap=0.05)
    new = host.node("n-a")
    assert new is not old and new.instance == instance and not old.alive
    assert not old.registration_socket.exists() and not old.dra_socket.exists()
    assert new.registration_socket.name == f"gpu.draguard.dev-{instance}-reg.sock"
    with _client(host, "n-a") as a:  # the new instance knows the claim its predecessor prepared
        assert [d.device_name for d in a.prepare([ref])[ref.uid].devices] == ["gpu-0"]
        assert a.unprepare([ref]) == {ref.uid: ""}
    assert new.plugin is not None and new.plugin.snapshot().claims == {}
