"""A small gRPC client for a DRA kubelet plugin's sockets, as the kubelet would call them.

Used by the tests of the fake driver and by anything that drives a plugin directly (conformance
checks, fake nodes). It speaks the v1 or v1beta1 DRAPlugin service, plugin registration and the
health stream, and returns the protobuf responses unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import grpc

from ..grpcapi import (
    dra_health_v1alpha1_pb2,
    dra_health_v1alpha1_pb2_grpc,
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)

__all__ = ["PluginClient", "ClaimTuple"]

ClaimTuple = tuple[str, str, str]
"""(uid, namespace, name) of a claim, as the kubelet sends it."""


class PluginClient:
    """Calls one plugin over its unix sockets; close() or use as a context manager."""

    def __init__(
        self,
        dra_socket: Path,
        registration_socket: Path | None = None,
        version: Literal["v1", "v1beta1"] = "v1",
        timeout: float = 45.0,
    ) -> None:
        self.timeout = timeout
        self.version = version
        self._pb: Any = dra_v1_pb2 if version == "v1" else dra_v1beta1_pb2
        grpc_mod: Any = dra_v1_pb2_grpc if version == "v1" else dra_v1beta1_pb2_grpc
        self._channel = grpc.insecure_channel(f"unix://{dra_socket}")
        self._dra = grpc_mod.DRAPluginStub(self._channel)
        self._health = dra_health_v1alpha1_pb2_grpc.DRAResourceHealthStub(self._channel)
        self._reg_channel = grpc.insecure_channel(f"unix://{registration_socket}") if registration_socket else None
        self._reg = pluginregistration_pb2_grpc.RegistrationStub(self._reg_channel) if self._reg_channel else None

    def _claims(self, claims: Sequence[ClaimTuple]) -> list[Any]:
        return [self._pb.Claim(uid=uid, namespace=ns, name=name) for uid, ns, name in claims]

    def prepare(self, claims: Sequence[ClaimTuple], timeout: float | None = None) -> Any:
        req = self._pb.NodePrepareResourcesRequest(claims=self._claims(claims))
        return self._dra.NodePrepareResources(req, timeout=timeout or self.timeout)

    def unprepare(self, claims: Sequence[ClaimTuple], timeout: float | None = None) -> Any:
        req = self._pb.NodeUnprepareResourcesRequest(claims=self._claims(claims))
        return self._dra.NodeUnprepareResources(req, timeout=timeout or self.timeout)

    def get_info(self) -> Any:
        if self._reg is None:
            raise ValueError("no registration socket given")
        return self._reg.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=self.timeout)

    def notify(self, registered: bool, error: str = "") -> Any:
        if self._reg is None:
            raise ValueError("no registration socket given")
        status = pluginregistration_pb2.RegistrationStatus(plugin_registered=registered, error=error)
        return self._reg.NotifyRegistrationStatus(status, timeout=self.timeout)

    def watch_health(self, timeout: float | None = None) -> Iterator[Any]:
        """The NodeWatchResources stream; cancel it by closing the client or leaving the iteration."""
        stream: Iterator[Any] = self._health.NodeWatchResources(
            dra_health_v1alpha1_pb2.NodeWatchResourcesRequest(), timeout=timeout
        )
        return stream

    def close(self) -> None:
        self._channel.close()
        if self._reg_channel is not None:
            self._reg_channel.close()

    def __enter__(self) -> PluginClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
