"""The kubelet-plugin protocol in one place: versions, the claim reference, the call error, one client.

Everything that speaks to a DRA kubelet plugin (the fake nodes, the interposer, the sanity suite,
tests) and everything that serves one (the fake driver, the stub plugin) takes its names from here:

* :data:`DRA_VERSIONS` maps the names a plugin advertises in ``PluginInfo.supported_versions``
  (``v1.DRAPlugin``, ``v1beta1.DRAPlugin``) to the generated stubs, in the kubelet's order of
  preference (``servicesSupportedByKubelet`` in kubernetes ``pkg/kubelet/cm/dra/plugin/dra_plugin.go``);
  :data:`HEALTH_VERSIONS` does the same for the optional ``DRAResourceHealth`` service
  (``healthServicesSupportedByKubelet``: ``v1.DRAResourceHealth`` before ``v1alpha1.DRAResourceHealth``).
  The kubelet opens the health stream only when the plugin advertises one of these
  (``pickHealthService`` in ``dra_plugin_manager.go``).
* :class:`ClaimRef` is a claim as the kubelet names it in a request (namespace, name, UID).
* :class:`PluginCallError` is a call that failed as a whole (transport error or gRPC status).
* :class:`PluginClient` calls a plugin's registration and DRA sockets the way the kubelet does:
  ``GetInfo``/``NotifyRegistrationStatus``, ``NodePrepareResources``, ``NodeUnprepareResources`` and
  the ``NodeWatchResources`` stream, and returns plain frozen values.

Talks to nothing but the sockets it is given.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import grpc

from . import (
    dra_health_v1_pb2,
    dra_health_v1_pb2_grpc,
    dra_health_v1alpha1_pb2,
    dra_health_v1alpha1_pb2_grpc,
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)

__all__ = [
    "PLUGIN_TYPE",
    "REGISTRATION_SERVICE",
    "CALL_TIMEOUT",
    "REGISTRATION_TIMEOUT",
    "ApiVersion",
    "DRA_VERSIONS",
    "HEALTH_VERSIONS",
    "SUPPORTED_VERSIONS",
    "HEALTH_SERVICES",
    "PREPARE",
    "UNPREPARE",
    "WATCH",
    "api_version",
    "choose_version",
    "choose_health",
    "socket_target",
    "ClaimRef",
    "PluginInfo",
    "PluginDevice",
    "ClaimResult",
    "DeviceHealthReport",
    "PluginCallError",
    "HealthStream",
    "PluginClient",
]

PLUGIN_TYPE = "DRAPlugin"
"""``PluginInfo.type`` of a DRA plugin (``pkg/kubelet/pluginmanager``'s ``DRAPlugin`` constant)."""
REGISTRATION_SERVICE = "pluginregistration.Registration"
"""Full gRPC name of the registration service every kubelet plugin serves on its ``-reg.sock``."""
CALL_TIMEOUT = 45.0
"""The kubelet's ``defaultClientCallTimeout`` for DRA calls (``dra_plugin.go``)."""
REGISTRATION_TIMEOUT = 5.0
"""How long a registration call may take before it counts as failed."""
PREPARE, UNPREPARE, WATCH = "NodePrepareResources", "NodeUnprepareResources", "NodeWatchResources"
"""Short method names, as the interposer records them."""


@dataclass(frozen=True)
class ApiVersion:
    """One version of a plugin service: the name advertised at registration, the gRPC name, the stubs."""

    advertised: str
    """As listed in ``supported_versions``: ``<proto package last segment>.<service>``, e.g. ``v1.DRAPlugin``."""
    full_service: str
    """The gRPC service name on the wire, e.g. ``k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin``."""
    pb: ModuleType
    grpc: ModuleType

    @property
    def short(self) -> str:
        """``v1``, ``v1beta1``, ``v1alpha1``."""
        return self.advertised.split(".", 1)[0]


def _version(advertised: str, full: str, pb: ModuleType, grpc_mod: ModuleType) -> tuple[str, ApiVersion]:
    return advertised, ApiVersion(advertised, full, pb, grpc_mod)


DRA_VERSIONS: Mapping[str, ApiVersion] = MappingProxyType(
    dict(
        [
            _version("v1.DRAPlugin", "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", dra_v1_pb2, dra_v1_pb2_grpc),
            _version(
                "v1beta1.DRAPlugin", "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin", dra_v1beta1_pb2, dra_v1beta1_pb2_grpc
            ),
        ]
    )
)
"""The DRAPlugin versions the kubelet speaks, most preferred first."""
HEALTH_VERSIONS: Mapping[str, ApiVersion] = MappingProxyType(
    dict(
        [
            _version("v1.DRAResourceHealth", "v1.DRAResourceHealth", dra_health_v1_pb2, dra_health_v1_pb2_grpc),
            _version(
                "v1alpha1.DRAResourceHealth",
                "v1alpha1.DRAResourceHealth",
                dra_health_v1alpha1_pb2,
                dra_health_v1alpha1_pb2_grpc,
            ),
        ]
    )
)
"""The DRAResourceHealth versions the 1.37 kubelet speaks, most preferred first."""
SUPPORTED_VERSIONS: tuple[str, ...] = tuple(DRA_VERSIONS)
HEALTH_SERVICES: tuple[str, ...] = tuple(HEALTH_VERSIONS)


def api_version(name: str) -> ApiVersion:
    """The DRA or health version called ``name`` (``v1``, ``v1beta1``, ``v1.DRAPlugin``, ``v1alpha1.DRAResourceHealth``)."""
    if name in DRA_VERSIONS:
        return DRA_VERSIONS[name]
    if name in HEALTH_VERSIONS:
        return HEALTH_VERSIONS[name]
    if f"{name}.DRAPlugin" in DRA_VERSIONS:
        return DRA_VERSIONS[f"{name}.DRAPlugin"]
    known = ", ".join([*DRA_VERSIONS, *HEALTH_VERSIONS])
    raise ValueError(f"unknown plugin API version {name!r}; known: {known}")


def choose_version(advertised: Iterable[str]) -> str | None:
    """The DRAPlugin version the kubelet picks: the first of the plugin's list that it speaks."""
    return next((v for v in advertised if v in DRA_VERSIONS), None)


def choose_health(advertised: Iterable[str]) -> str | None:
    """The health service the kubelet picks: its most preferred one that the plugin lists, or None."""
    listed = set(advertised)
    return next((v for v in HEALTH_VERSIONS if v in listed), None)


def socket_target(path: str | Path) -> str:
    """The gRPC target for a unix socket path (made absolute)."""
    return f"unix://{os.path.abspath(path)}"


# -- values ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimRef:
    """A ResourceClaim as the kubelet names it in a DRA request."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.uid})"

    def as_dict(self) -> dict[str, str]:
        return {"namespace": self.namespace, "name": self.name, "uid": self.uid}

    def to_pb(self, pb: ModuleType) -> Any:
        """The ``Claim`` message of the stub module ``pb`` (v1 and v1beta1 share the layout)."""
        return pb.Claim(namespace=self.namespace, name=self.name, uid=self.uid)

    @classmethod
    def from_pb(cls, msg: Any) -> ClaimRef:
        return cls(namespace=msg.namespace, name=msg.name, uid=msg.uid)


@dataclass(frozen=True)
class PluginInfo:
    """What ``Registration.GetInfo`` answered."""

    type: str
    name: str
    endpoint: str
    supported_versions: tuple[str, ...]

    def to_pb(self) -> Any:
        return pluginregistration_pb2.PluginInfo(
            type=self.type, name=self.name, endpoint=self.endpoint, supported_versions=list(self.supported_versions)
        )


@dataclass(frozen=True)
class PluginDevice:
    """One device in a ``NodePrepareResources`` answer."""

    request_names: tuple[str, ...]
    pool_name: str
    device_name: str
    cdi_device_ids: tuple[str, ...]
    share_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "requestNames": list(self.request_names),
            "poolName": self.pool_name,
            "deviceName": self.device_name,
            "cdiDeviceIDs": list(self.cdi_device_ids),
        }
        if self.share_id is not None:
            out["shareID"] = self.share_id
        return out

    def add_to(self, entry: Any) -> None:
        """Append this device to a ``NodePrepareResourceResponse`` message (either version)."""
        device = entry.devices.add(
            request_names=list(self.request_names),
            pool_name=self.pool_name,
            device_name=self.device_name,
            cdi_device_ids=list(self.cdi_device_ids),
        )
        if self.share_id is not None and "share_id" in device.DESCRIPTOR.fields_by_name:  # v1 only
            device.share_id = self.share_id


@dataclass(frozen=True)
class ClaimResult:
    """One claim's entry in a ``NodePrepareResources`` answer: its devices, or its error."""

    devices: tuple[PluginDevice, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class DeviceHealthReport:
    """One device in a ``NodeWatchResources`` message."""

    pool_name: str
    device_name: str
    health: str  # "UNKNOWN" | "HEALTHY" | "UNHEALTHY"
    last_updated_time: int = 0
    health_check_timeout_seconds: int = 0
    message: str = ""


class PluginCallError(Exception):
    """A plugin call failed as a whole: the socket, the transport, or a gRPC status other than OK."""

    def __init__(self, method: str, code: str, details: str, target: str = "") -> None:
        self.method = method
        self.code = code
        self.details = details
        self.target = target
        where = f" to {target}" if target else ""
        super().__init__(f"{method}{where}: {code}: {details}")


def _call_error(method: str, exc: grpc.RpcError, target: str) -> PluginCallError:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return PluginCallError(method, code.name if code is not None else "UNKNOWN", details or "", target)


# -- the client -----------------------------------------------------------------------------------


class HealthStream:
    """An open ``NodeWatchResources`` stream: iterate for the device lists, :meth:`cancel` to end it."""

    def __init__(self, call: Any, api: ApiVersion, target: str) -> None:
        self._call = call
        self.api = api
        self._target = target

    @property
    def service(self) -> str:
        return self.api.advertised

    def __iter__(self) -> Iterator[list[DeviceHealthReport]]:
        return self

    def __next__(self) -> list[DeviceHealthReport]:
        try:
            msg = next(self._call)
        except grpc.RpcError as exc:
            raise _call_error(WATCH, exc, self._target) from exc
        status = self.api.pb.HealthStatus
        return [
            DeviceHealthReport(
                pool_name=d.device.pool_name,
                device_name=d.device.device_name,
                health=status.Name(d.health) if d.health in status.values() else str(d.health),
                last_updated_time=d.last_updated_time,
                health_check_timeout_seconds=d.health_check_timeout_seconds,
                message=d.message,
            )
            for d in msg.devices
        ]

    def cancel(self) -> None:
        self._call.cancel()


@dataclass
class PluginClient:
    """Calls one plugin over its unix sockets, as the kubelet does; ``close()`` or use as a context manager.

    ``dra_socket`` may be left out when only registration is called; ``version`` is the DRAPlugin
    version to speak (``v1``, ``v1beta1`` or the advertised name). Every call raises
    :class:`PluginCallError` when it fails as a whole; per-claim errors are in the results.
    """

    dra_socket: str | Path | None = None
    registration_socket: str | Path | None = None
    version: str = "v1.DRAPlugin"
    timeout: float = CALL_TIMEOUT
    driver: str = ""

    def __post_init__(self) -> None:
        self.api = api_version(self.version)
        if self.api.advertised not in DRA_VERSIONS:
            raise ValueError(f"{self.version!r} is not a DRAPlugin version; use one of {', '.join(DRA_VERSIONS)}")
        self.version = self.api.advertised
        self._lock = threading.Lock()
        self._dra_channel: grpc.Channel | None = None
        self._reg_channel: grpc.Channel | None = None

    # -- channels --------------------------------------------------------------------------------
    def _channel(self, which: str) -> grpc.Channel:
        with self._lock:
            if which == "dra":
                if self.dra_socket is None:
                    raise PluginCallError("DRAPlugin", "FAILED_PRECONDITION", "no DRA socket given")
                if self._dra_channel is None:
                    self._dra_channel = grpc.insecure_channel(socket_target(self.dra_socket))
                return self._dra_channel
            if self.registration_socket is None:
                raise PluginCallError("Registration", "FAILED_PRECONDITION", "no registration socket given")
            if self._reg_channel is None:
                self._reg_channel = grpc.insecure_channel(socket_target(self.registration_socket))
            return self._reg_channel

    @property
    def _dra_target(self) -> str:
        return self.driver or str(self.dra_socket)

    # -- registration ----------------------------------------------------------------------------
    def get_info(self, timeout: float | None = None) -> PluginInfo:
        stub = pluginregistration_pb2_grpc.RegistrationStub(self._channel("reg"))
        try:
            info = stub.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=timeout or REGISTRATION_TIMEOUT)
        except grpc.RpcError as exc:
            raise _call_error("GetInfo", exc, str(self.registration_socket)) from exc
        return PluginInfo(info.type, info.name, info.endpoint, tuple(info.supported_versions))

    def notify(self, registered: bool, error: str = "", timeout: float | None = None) -> None:
        stub = pluginregistration_pb2_grpc.RegistrationStub(self._channel("reg"))
        status = pluginregistration_pb2.RegistrationStatus(plugin_registered=registered, error=error)
        try:
            stub.NotifyRegistrationStatus(status, timeout=timeout or REGISTRATION_TIMEOUT)
        except grpc.RpcError as exc:
            raise _call_error("NotifyRegistrationStatus", exc, str(self.registration_socket)) from exc

    # -- DRA ---------------------------------------------------------------------------------------
    def prepare(self, claims: Sequence[ClaimRef], timeout: float | None = None) -> dict[str, ClaimResult]:
        """``NodePrepareResources``: per claim UID in the answer, its devices and error."""
        pb = self.api.pb
        stub = self.api.grpc.DRAPluginStub(self._channel("dra"))
        request = pb.NodePrepareResourcesRequest(claims=[c.to_pb(pb) for c in claims])
        try:
            response = stub.NodePrepareResources(request, timeout=timeout or self.timeout)
        except grpc.RpcError as exc:
            raise _call_error(PREPARE, exc, self._dra_target) from exc
        out: dict[str, ClaimResult] = {}
        for uid, result in response.claims.items():
            devices = tuple(
                PluginDevice(
                    request_names=tuple(d.request_names),
                    pool_name=d.pool_name,
                    device_name=d.device_name,
                    cdi_device_ids=tuple(d.cdi_device_ids),
                    share_id=d.share_id if hasattr(d, "share_id") and d.HasField("share_id") else None,
                )
                for d in result.devices
            )
            out[uid] = ClaimResult(devices, result.error)
        return out

    def unprepare(self, claims: Sequence[ClaimRef], timeout: float | None = None) -> dict[str, str]:
        """``NodeUnprepareResources``: per claim UID in the answer, its error (``""`` on success)."""
        pb = self.api.pb
        stub = self.api.grpc.DRAPluginStub(self._channel("dra"))
        request = pb.NodeUnprepareResourcesRequest(claims=[c.to_pb(pb) for c in claims])
        try:
            response = stub.NodeUnprepareResources(request, timeout=timeout or self.timeout)
        except grpc.RpcError as exc:
            raise _call_error(UNPREPARE, exc, self._dra_target) from exc
        return {uid: result.error for uid, result in response.claims.items()}

    def watch_health(self, service: str = "v1alpha1.DRAResourceHealth", timeout: float | None = None) -> HealthStream:
        """Open the ``NodeWatchResources`` stream of health version ``service``; cancel it when done."""
        api = HEALTH_VERSIONS.get(service)
        if api is None:
            raise ValueError(f"unknown health service {service!r}; known: {', '.join(HEALTH_VERSIONS)}")
        stub = api.grpc.DRAResourceHealthStub(self._channel("dra"))
        call = stub.NodeWatchResources(api.pb.NodeWatchResourcesRequest(), timeout=timeout)
        return HealthStream(call, api, self._dra_target)

    # -- lifecycle ---------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            for ch in (self._dra_channel, self._reg_channel):
                if ch is not None:
                    ch.close()
            self._dra_channel = self._reg_channel = None

    def __enter__(self) -> PluginClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
