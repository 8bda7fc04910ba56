"""driver-calls' Python floor: what it answers (the benchmark raises on a wrong answer) and that its
process starts on its socket and stops on SIGTERM without leaving it behind."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from draguard.harness.bench.floor import FloorServer, _Floor
from draguard.harness.grpcapi import dra_v1_pb2 as pb
from draguard.harness.grpcapi.plugin import PluginClient


class _Claims:
    def __init__(self, *claims: dict[str, Any]) -> None:
        self.claims = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
        self.reads: list[tuple[str, str, str]] = []

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        self.reads.append((kind, namespace, name))
        return self.claims.get((namespace, name))


def _claim(name: str, uid: str, *results: tuple[str, str]) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "uid": uid},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": d, "pool": "n1", "device": dev} for d, dev in results]}}}}  # fmt: skip


def test_prepare_reads_each_claim_and_returns_its_devices_of_this_driver_only() -> None:
    kube = _Claims(_claim("a", "u-a", ("gpu.example.com", "gpu-1"), ("other.example.com", "nic-0")))
    floor = _Floor(kube, "gpu.example.com")
    request = pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace="ns", name="a", uid="u-a"),
                                                     pb.Claim(namespace="ns", name="a", uid="stale"),
                                                     pb.Claim(namespace="ns", name="gone", uid="u-g")])  # fmt: skip
    resp = floor.NodePrepareResources(request, None)
    assert kube.reads == [("ResourceClaim", "ns", "a"), ("ResourceClaim", "ns", "a"), ("ResourceClaim", "ns", "gone")]
    ok = resp.claims["u-a"]
    assert ok.error == "" and [(d.pool_name, d.device_name, list(d.request_names)) for d in ok.devices] == [
        ("n1", "gpu-1", ["gpu"])]
    assert "not found" in resp.claims["stale"].error and "not found" in resp.claims["u-g"].error


def test_unprepare_answers_success_for_every_claim_without_reading() -> None:
    kube = _Claims()
    request = pb.NodeUnprepareResourcesRequest(claims=[pb.Claim(namespace="ns", name=n, uid=f"u-{n}") for n in "ab"])
    resp = _Floor(kube, "gpu.example.com").NodeUnprepareResources(request, None)
    assert {u: c.error for u, c in resp.claims.items()} == {"u-a": "", "u-b": ""} and kube.reads == []


def test_the_floor_process_serves_its_socket_and_stops_on_sigterm() -> None:
    with tempfile.TemporaryDirectory(prefix="dgf", dir="/tmp") as tmp:
        root = Path(tmp)
        kubeconfig = root / "kubeconfig"  # never called: unprepare reads nothing
        kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
                              "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                              "current-context: x\n")  # fmt: skip
        floor = FloorServer(kubeconfig, root, "gpu.example.com").start(timeout=30)
        try:
            with PluginClient(dra_socket=floor.socket, timeout=10) as client:
                from draguard.harness.grpcapi.plugin import ClaimRef

                assert client.unprepare([ClaimRef("ns", "a", "u-a")]) == {"u-a": ""}
        finally:
            code = floor.stop()
        assert code == 0, (root / "floor.log").read_text()
        assert not floor.socket.exists()  # grpc removes its unix socket when the server stops
