"""A minimal in-process DRA kubelet plugin: registration and DRA services on real unix sockets.

It prepares every claim it is asked for (one device per claim), records each call, and can be told
to fail or stall claims by name. The node agent's and the interposer's tests, and ``draguard bench``,
use it where the full fake driver (:mod:`draguard.harness.driver`) would be more than needed. It
talks to whoever dials its sockets (fake nodes, the interposer) and to nothing else.
"""

from __future__ import annotations

import fnmatch
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from draguard.harness import cdi
from draguard.harness.grpcapi import pluginregistration_pb2, pluginregistration_pb2_grpc
from draguard.harness.grpcapi.plugin import (
    DRA_VERSIONS,
    PLUGIN_TYPE,
    SUPPORTED_VERSIONS,
    ClaimRef,
    PluginDevice,
    PluginInfo,
)
from draguard.harness.core.paths import NodeDirs

__all__ = ["StubPlugin", "StubCall"]


@dataclass(frozen=True)
class StubCall:
    """One DRA call the stub plugin answered."""

    method: str  # "NodePrepareResources" | "NodeUnprepareResources"
    claims: tuple[ClaimRef, ...]
    at: float


@dataclass
class StubPlugin:
    """A DRA plugin for ``driver`` on ``node`` under ``root`` (the :class:`NodeDirs` layout).

    ``fail`` maps a claim-name glob to an error message returned for that claim; ``stall`` holds
    claim-name globs whose prepare blocks until :meth:`release` (or the plugin stops);
    ``fail_unprepare`` maps a claim-name glob to an error message its unprepare returns.
    """

    root: Path
    node: str
    driver: str = "gpu.draguard.dev"
    versions: tuple[str, ...] = SUPPORTED_VERSIONS
    plugin_type: str = PLUGIN_TYPE
    cdi_dir: Path | None = None
    """Where its CDI specs go (the node's host directory); default ``<root>/<node>/cdi``. Behind the
    interposer the sockets live under another root than the node's CDI directory."""
    calls: list[StubCall] = field(default_factory=list)
    registrations: list[tuple[bool, str]] = field(default_factory=list)
    fail: dict[str, str] = field(default_factory=dict)
    stall: set[str] = field(default_factory=set)
    fail_unprepare: dict[str, str] = field(default_factory=dict)
    prepared: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.dirs = NodeDirs(Path(self.root), self.node)
        self._server: grpc.Server | None = None
        self._lock = threading.Lock()
        self._released = threading.Event()

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> StubPlugin:
        self.dirs.create()
        self.dirs.plugin_dir(self.driver).mkdir(parents=True, exist_ok=True)
        self._released.clear()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pluginregistration_pb2_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        for api in DRA_VERSIONS.values():
            api.grpc.add_DRAPluginServicer_to_server(_Dra(self, api.pb), server)
        # DRA socket first, registration last: a watcher that sees the registration socket can dial at once.
        server.add_insecure_port(f"unix:{self.dra_socket}")
        server.add_insecure_port(f"unix:{self.registration_socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None
        for sock in (self.registration_socket, self.dra_socket):
            sock.unlink(missing_ok=True)

    def __enter__(self) -> StubPlugin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def registration_socket(self) -> Path:
        return self.dirs.registration_socket(self.driver)

    @property
    def dra_socket(self) -> Path:
        return self.dirs.dra_socket(self.driver)

    def release(self) -> None:
        """Let stalled prepare calls finish (and stop stalling)."""
        self.stall.clear()
        self._released.set()

    # -- inspection ----------------------------------------------------------------------------
    def calls_of(self, method: str) -> list[StubCall]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def count(self, method: str, claim_name: str) -> int:
        """How many calls of ``method`` named the claim ``claim_name``."""
        return sum(1 for c in self.calls_of(method) for ref in c.claims if ref.name == claim_name)

    # -- behaviour -----------------------------------------------------------------------------
    def _answer(self, method: str, request: Any, pb: Any) -> Any:
        claims = tuple(ClaimRef.from_pb(c) for c in request.claims)
        with self._lock:
            self.calls.append(StubCall(method, claims, time.time()))
        if method == "NodePrepareResources":
            if any(fnmatch.fnmatchcase(ref.name, pat) for ref in claims for pat in list(self.stall)):
                self._released.wait()
            response = pb.NodePrepareResourcesResponse()
            for ref in claims:
                error = next((msg for pat, msg in self.fail.items() if fnmatch.fnmatchcase(ref.name, pat)), "")
                entry = response.claims[ref.uid]
                if error:
                    entry.error = error
                    continue
                PluginDevice(("req",), self.node, f"dev-{ref.name}", (f"{self.driver}/gpu={ref.uid}",)).add_to(entry)
                # A spec for the returned ID, so a container runtime can resolve it.
                cdi.write_spec(cdi.spec_path(self.cdi_dir or NodeDirs(self.root, self.node).cdi, self.driver, ref.uid), {
                    "cdiVersion": cdi.CDI_VERSION, "kind": f"{self.driver}/gpu",
                    "devices": [{"name": ref.uid, "containerEdits": {"env": [f"STUB_CLAIM={ref.namespace}/{ref.name}"]}}]})  # fmt: skip
                with self._lock:
                    self.prepared.add(ref.uid)
            return response
        response = pb.NodeUnprepareResourcesResponse()
        for ref in claims:
            error = next((m for pat, m in self.fail_unprepare.items() if fnmatch.fnmatchcase(ref.name, pat)), "")
            response.claims[ref.uid].error = error
            if error:
                continue
            cdi.remove_spec(cdi.spec_path(self.cdi_dir or NodeDirs(self.root, self.node).cdi, self.driver, ref.uid))
            with self._lock:
                self.prepared.discard(ref.uid)
        return response


class _Registration(pluginregistration_pb2_grpc.RegistrationServicer):
    def __init__(self, plugin: StubPlugin) -> None:
        self.plugin = plugin

    def GetInfo(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC method name
        p = self.plugin
        return PluginInfo(p.plugin_type, p.driver, str(p.dra_socket), tuple(p.versions)).to_pb()

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.plugin.registrations.append((request.plugin_registered, request.error))
        return pluginregistration_pb2.RegistrationStatusResponse()


class _Dra:
    def __init__(self, plugin: StubPlugin, pb: Any) -> None:
        self.plugin = plugin
        self.pb = pb

    def NodePrepareResources(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.plugin._answer("NodePrepareResources", request, self.pb)

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.plugin._answer("NodeUnprepareResources", request, self.pb)
