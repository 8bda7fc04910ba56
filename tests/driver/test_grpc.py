"""The fake driver's gRPC services over real unix sockets, called with a client built from the stubs."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from draguard.harness.driver.fault_control import set_faults
from draguard.harness.driver.service import PluginServer
from draguard.harness.core.process import claim_socket_path
from draguard.harness.core.errors import UsageError
from draguard.harness.grpcapi.plugin import HEALTH_SERVICES, PluginClient
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

from .conftest import NODE, ClaimStore, allocated_claim, make_driver


@pytest.fixture
def server(root: Path, store: ClaimStore) -> Iterator[PluginServer]:
    dirs = NodeDirs(root, NODE)
    srv = PluginServer(
        make_driver(root, store), dirs.dra_socket(DEFAULT_DRIVER), dirs.registration_socket(DEFAULT_DRIVER), 0.05
    )
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(grace=0)


@pytest.fixture
def client(server: PluginServer) -> Iterator[PluginClient]:
    with PluginClient(server.dra_socket, server.registration_socket, timeout=10) as c:
        yield c


def test_registration_announces_a_dra_plugin_with_its_socket_both_versions_and_the_health_service(
    server: PluginServer, client: PluginClient
) -> None:
    info = client.get_info()
    assert (info.type, info.name, info.endpoint) == ("DRAPlugin", DEFAULT_DRIVER, str(server.dra_socket))
    # The kubelet opens the health stream only for a plugin that lists a health service
    # (pickHealthService in kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go).
    assert list(info.supported_versions) == [
        "v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"
    ]
    client.notify(False, "kubelet says no")
    assert server.registration.status == (False, "kubelet says no")


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_prepare_and_unprepare_are_served_in_both_api_versions(
    server: PluginServer, store: ClaimStore, version: str
) -> None:
    ref = store.add(allocated_claim("c1", ["gpu-1"]))
    with PluginClient(server.dra_socket, version=version, timeout=10) as c:
        entry = c.prepare([ref])[ref.uid]
        assert entry.error == ""
        assert [(d.pool_name, d.device_name, d.request_names) for d in entry.devices] == [(NODE, "gpu-1", ("req",))]
        assert entry.devices[0].cdi_device_ids == (f"{DEFAULT_DRIVER}/gpu={ref.uid}-gpu-1",)
        assert c.unprepare([ref]) == {ref.uid: ""}


def test_an_empty_prepare_request_succeeds(client: PluginClient) -> None:
    assert client.prepare([]) == {}


def test_per_claim_errors_do_not_fail_the_batch(client: PluginClient, store: ClaimStore) -> None:
    good = store.add(allocated_claim("good", ["gpu-0"]))
    bad = store.add(allocated_claim("bad", ["gpu-1"], driver="other.example.com"))
    resp = client.prepare([good, bad])
    assert resp[good.uid].error == "" and "other.example.com" in resp[bad.uid].error


@pytest.mark.parametrize("service", HEALTH_SERVICES)
def test_health_stream_reports_every_device_and_follows_faults(
    root: Path, client: PluginClient, service: str
) -> None:
    stream = client.watch_health(service, timeout=10)
    first = next(stream)
    assert {(d.pool_name, d.device_name, d.health) for d in first} == {
        (NODE, f"gpu-{i}", "HEALTHY") for i in range(4)
    }
    set_faults(root, NODE, unhealthy={"devices": ["gpu-2"], "message": "fell off the bus"})
    update = next(stream)
    sick = [(d.device_name, d.message) for d in update if d.health == "UNHEALTHY"]
    assert sick == [("gpu-2", "fell off the bus")]
    stream.cancel()


def test_a_socket_another_process_serves_is_reported_as_taken(server: PluginServer) -> None:
    with pytest.raises(UsageError, match="socket is taken"):
        claim_socket_path(server.dra_socket)


def test_a_stale_socket_file_is_replaced_and_a_non_socket_is_refused(root: Path) -> None:
    stale = root / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()  # bound but nobody listens: what a killed driver leaves
    claim_socket_path(stale)
    assert not stale.exists()
    plain = root / "plain.sock"
    plain.write_text("x")
    with pytest.raises(UsageError, match="not a socket"):
        claim_socket_path(plain)
    with pytest.raises(UsageError, match="more than the 107"):
        claim_socket_path(root / ("x" * 120) / "dra.sock")


def test_stop_removes_both_sockets(root: Path, store: ClaimStore) -> None:
    dirs = NodeDirs(root, NODE)
    srv = PluginServer(make_driver(root, store), dirs.dra_socket(DEFAULT_DRIVER), dirs.registration_socket(DEFAULT_DRIVER))
    srv.start()
    assert srv.dra_socket.is_socket() and srv.registration_socket.is_socket()
    srv.stop(grace=0)
    assert not srv.dra_socket.exists() and not srv.registration_socket.exists()
