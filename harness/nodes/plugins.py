"""Plugin discovery and DRA clients of a fake node, the way the kubelet's plugin manager does it.

A :class:`NodePlugins` watches ``<root>/<node>/plugins_registry/`` for ``*-reg.sock`` files (polled;
:class:`PluginWatcher` scans every node of a process from one thread). For each new socket it calls
``Registration.GetInfo``, requires type ``DRAPlugin``, picks the first of the plugin's
``supported_versions`` that it speaks (``v1.DRAPlugin``, ``v1beta1.DRAPlugin``), dials the endpoint
and answers ``NotifyRegistrationStatus``. A socket that disappears deregisters its plugin; a socket
that is re-created (new inode) registers again. Talks only to plugins (or the interposer) over gRPC.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from draguard.harness.grpcapi import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)

__all__ = [
    "ClaimRef",
    "DraClient",
    "PluginCallError",
    "NodePlugins",
    "PluginWatcher",
    "SUPPORTED_VERSIONS",
    "CALL_TIMEOUT",
]

log = logging.getLogger("draguard.nodes")

SUPPORTED_VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
"""What the kubelet speaks, in its order of preference (``servicesSupportedByKubelet``)."""
CALL_TIMEOUT = 45.0
"""The kubelet's ``defaultClientCallTimeout`` for DRA calls."""
REGISTRATION_TIMEOUT = 5.0
RETRY_FAILED_AFTER = 5.0

_PB: dict[str, tuple[Any, Any]] = {
    "v1.DRAPlugin": (dra_v1_pb2, dra_v1_pb2_grpc),
    "v1beta1.DRAPlugin": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc),
}


@dataclass(frozen=True)
class ClaimRef:
    """A claim as the node sends it to a plugin."""

    namespace: str
    name: str
    uid: str


class PluginCallError(Exception):
    """A DRA call failed as a whole (transport error, gRPC status, driver not registered)."""


def _target(path: str | Path) -> str:
    return f"unix://{os.path.abspath(path)}"


class DraClient:
    """A connection to one plugin's DRA service, in the version chosen at registration."""

    def __init__(self, driver: str, endpoint: str, version: str, timeout: float = CALL_TIMEOUT) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.version = version
        self.timeout = timeout
        self._pb, grpc_mod = _PB[version]
        self._channel = grpc.insecure_channel(_target(endpoint))
        self._stub = grpc_mod.DRAPluginStub(self._channel)

    def _claims(self, claims: Iterable[ClaimRef]) -> list[Any]:
        return [self._pb.Claim(namespace=c.namespace, name=c.name, uid=c.uid) for c in claims]

    def prepare(self, claims: list[ClaimRef]) -> dict[str, tuple[list[dict[str, Any]], str]]:
        """``NodePrepareResources``: per claim UID, the devices and the error string the plugin gave."""
        request = self._pb.NodePrepareResourcesRequest(claims=self._claims(claims))
        try:
            response = self._stub.NodePrepareResources(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise PluginCallError(f"NodePrepareResources to {self.driver}: {_rpc_error(exc)}") from exc
        out: dict[str, tuple[list[dict[str, Any]], str]] = {}
        for uid, result in response.claims.items():
            devices = [
                {
                    "requestNames": list(d.request_names),
                    "poolName": d.pool_name,
                    "deviceName": d.device_name,
                    "cdiDeviceIDs": list(d.cdi_device_ids),
                }
                for d in result.devices
            ]
            out[uid] = (devices, result.error)
        return out

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, str]:
        """``NodeUnprepareResources``: per claim UID, the error string the plugin gave."""
        request = self._pb.NodeUnprepareResourcesRequest(claims=self._claims(claims))
        try:
            response = self._stub.NodeUnprepareResources(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise PluginCallError(f"NodeUnprepareResources to {self.driver}: {_rpc_error(exc)}") from exc
        return {uid: result.error for uid, result in response.claims.items()}

    def close(self) -> None:
        self._channel.close()


def _rpc_error(exc: grpc.RpcError) -> str:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return f"{code.name if code else 'UNKNOWN'}: {details}"


@dataclass
class _Registered:
    socket: str
    ident: tuple[int, int]
    driver: str
    client: DraClient
    at: float


class NodePlugins:
    """The DRA plugins registered on one node."""

    def __init__(self, node: str, registry: Path, call_timeout: float = CALL_TIMEOUT) -> None:
        self.node = node
        self.registry = registry
        self.call_timeout = call_timeout
        self._lock = threading.Lock()
        self._by_socket: dict[str, _Registered] = {}
        self._pending: set[str] = set()
        self._failed: dict[str, tuple[tuple[int, int], float]] = {}
        self.on_change: Callable[[str], None] | None = None

    def client(self, driver: str) -> DraClient | None:
        """The most recently registered plugin instance of ``driver``, if any."""
        with self._lock:
            regs = [r for r in self._by_socket.values() if r.driver == driver]
        return max(regs, key=lambda r: r.at).client if regs else None

    def drivers(self) -> list[str]:
        with self._lock:
            return sorted({r.driver for r in self._by_socket.values()})

    def scan(self, submit: Callable[[Callable[[], None]], object]) -> None:
        """Compare the registry directory with what is registered; registrations run via ``submit``."""
        seen: dict[str, tuple[int, int]] = {}
        try:
            with os.scandir(self.registry) as it:
                for entry in it:
                    if entry.name.endswith("-reg.sock"):
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue
                        seen[entry.path] = (st.st_ino, st.st_ctime_ns)
        except FileNotFoundError:
            pass
        gone: list[_Registered] = []
        todo: list[tuple[str, tuple[int, int]]] = []
        now = time.monotonic()
        with self._lock:
            for path, reg in list(self._by_socket.items()):
                if seen.get(path) != reg.ident:
                    gone.append(self._by_socket.pop(path))
            for path, ident in seen.items():
                if path in self._by_socket or path in self._pending:
                    continue
                failed = self._failed.get(path)
                if failed and failed[0] == ident and now - failed[1] < RETRY_FAILED_AFTER:
                    continue
                self._pending.add(path)
                todo.append((path, ident))
        for reg in gone:
            log.info("node %s: plugin %s deregistered (%s gone)", self.node, reg.driver, reg.socket)
            reg.client.close()
            self._changed(reg.driver)
        for path, ident in todo:
            submit(lambda p=path, i=ident: self._register(p, i))  # type: ignore[misc]

    def _register(self, path: str, ident: tuple[int, int]) -> None:
        try:
            reg = self._try_register(path, ident)
        except Exception as exc:  # any failure: remember and retry later, as the kubelet does
            log.warning("node %s: registration of %s failed: %s", self.node, path, exc)
            with self._lock:
                self._pending.discard(path)
                self._failed[path] = (ident, time.monotonic())
            return
        with self._lock:
            self._pending.discard(path)
            self._failed.pop(path, None)
            self._by_socket[path] = reg
        log.info("node %s: plugin %s registered (%s, %s)", self.node, reg.driver, reg.client.endpoint, reg.client.version)
        self._changed(reg.driver)

    def _try_register(self, path: str, ident: tuple[int, int]) -> _Registered:
        with grpc.insecure_channel(_target(path)) as channel:
            stub = pluginregistration_pb2_grpc.RegistrationStub(channel)
            info = stub.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=REGISTRATION_TIMEOUT)
            error = ""
            version = next((v for v in info.supported_versions if v in SUPPORTED_VERSIONS), "")
            if info.type != "DRAPlugin":
                error = f"plugin type {info.type!r} is not DRAPlugin"
            elif not version:
                error = (
                    f"none of the plugin's versions {list(info.supported_versions)} is supported "
                    f"(supported: {list(SUPPORTED_VERSIONS)})"
                )
            elif not info.endpoint:
                error = "plugin gave no endpoint"
            if error:
                stub.NotifyRegistrationStatus(
                    pluginregistration_pb2.RegistrationStatus(plugin_registered=False, error=error),
                    timeout=REGISTRATION_TIMEOUT,
                )
                raise PluginCallError(f"{path}: {error}")
            endpoint = info.endpoint
            if not os.path.isabs(endpoint):
                endpoint = os.path.join(os.path.dirname(path), endpoint)
            client = DraClient(info.name, endpoint, version, self.call_timeout)
            stub.NotifyRegistrationStatus(
                pluginregistration_pb2.RegistrationStatus(plugin_registered=True), timeout=REGISTRATION_TIMEOUT
            )
        return _Registered(path, ident, info.name, client, time.monotonic())

    def _changed(self, driver: str) -> None:
        if self.on_change is not None:
            self.on_change(driver)

    def close(self) -> None:
        with self._lock:
            regs = list(self._by_socket.values())
            self._by_socket.clear()
        for reg in regs:
            reg.client.close()


class PluginWatcher:
    """One thread that scans the registry directories of many nodes every ``interval`` seconds."""

    def __init__(self, executor: Executor, interval: float = 0.5) -> None:
        self.executor = executor
        self.interval = interval
        self._nodes: dict[str, NodePlugins] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="plugin-watcher", daemon=True)

    def add(self, plugins: NodePlugins) -> None:
        with self._lock:
            self._nodes[plugins.node] = plugins

    def start(self) -> None:
        self._thread.start()

    def scan_once(self) -> None:
        with self._lock:
            nodes = list(self._nodes.values())
        for plugins in nodes:
            plugins.scan(self.executor.submit)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.scan_once()
            except Exception:  # keep watching; a broken directory must not end discovery for all nodes
                log.exception("plugin scan failed")
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        with self._lock:
            nodes = list(self._nodes.values())
        for plugins in nodes:
            plugins.close()
