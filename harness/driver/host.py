"""One process serving the fake driver for many nodes: the cheap way to run hundreds of them.

A per-node driver process (:mod:`.process`) costs about 64 MiB and a second or more of start-up
(a Python interpreter with grpc, pydantic and the Kube client each). The host runs the same
per-node objects (:class:`~.plugin.FakeDriver` with its checkpoint, CDI directory and
:class:`~.faults.FaultControl` in that node's directories, the servicers of :mod:`.service`) once
per node inside one process; what they share is the interpreter, one Kube client and one thread
pool. Each node still has its own sockets (``dra.sock`` and ``-reg.sock`` in its directories), its
own checkpoint, faults file and mutant, so nothing one node does reaches another.

What differs from a process per node (use that for fidelity runs, ``driver.hosting: per-node``):

* a node is "killed" by stopping its gRPC server at once and dropping its in-memory state (the
  checkpoint on disk stays, exactly what SIGKILL leaves); "started" builds it again from the
  checkpoint, as a new process would;
* an injected crash point (``crash_at``) ends that node's driver only, the RPC in flight fails
  with UNAVAILABLE; the other nodes go on;
* slices are verified against one watch of the driver's slices for all nodes (:class:`_SliceCache`),
  not a LIST per node: a node whose slices changed in the API is verified in the next round, every
  node once every ``verify_every`` seconds (a LIST of every slice each round would cost the host and
  the API server CPU in proportion to the fleet).

A control socket (``<root>/.driver-host.sock``, line-delimited JSON) takes ``kill``, ``stop``,
``start`` and ``status`` for one node; :class:`DriverHostProcess` starts the host as a child and
:class:`HostedDriver` gives each node the interface of :class:`~.process.FakeDriverProcess`, so
chaos steps (``driver-restart``, ``driver-down``) work unchanged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import socketserver
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from draguard.harness.core.errors import HarnessError, UsageError
from ..grpcapi import pluginregistration_pb2_grpc
from ..grpcapi.plugin import DRA_VERSIONS, HEALTH_VERSIONS, ApiVersion
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs
from draguard.harness.core.process import NodeProcess, Supervised, claim_socket_path, release_socket_paths, socket_accepts
from .inflight import CallsInFlight
from draguard.harness.driver.fault_control import FaultControl
from .mutants import get_mutant
from .plugin import DeviceHealth, FakeDriver, KubeClaims
from .process import FakeDriverProcess
from .service import _DraServicer, _Health, _Registration
from .slices import SlicePublisher
from .topology import DEFAULT_DEVICES, Inventory, generic, load_topology, resolve

__all__ = ["HostedNode", "DriverHost", "DriverHostProcess", "HostedDriver", "control_socket"]

log = logging.getLogger("draguard.driver.host")

T = TypeVar("T")


def control_socket(root: Path) -> Path:
    return Path(root) / ".driver-host.sock"


@dataclass(frozen=True)
class HostedNode:
    """One node the host serves: its name, devices (a topology file or N generic GPUs), mutant."""

    node: str
    topology: str | None = None
    devices: int | None = None
    mutant: str | None = None

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> HostedNode:
        return cls(str(raw["node"]), raw.get("topology"), raw.get("devices"), raw.get("mutant"))


class NodeCrash(BaseException):
    """An injected crash point reached in one node's driver (a BaseException: no handler swallows it)."""


class _NodeFaults(FaultControl):
    def exit(self) -> None:
        raise NodeCrash()


class _Node:
    """One node's driver inside the host: plugin objects, one gRPC server on both sockets, publisher."""

    def __init__(self, host: DriverHost, spec: HostedNode, inventory: Inventory, instance: str | None = None) -> None:
        self.host = host
        self.spec = spec
        self.name = spec.node
        self.inventory = inventory
        self.mutant = get_mutant(spec.mutant)
        self.instance = instance
        """The pod UID of this instance after a rolling update (``roll``); None for the first."""
        self.dirs = NodeDirs(host.root, spec.node)
        self.dra_socket = self.dirs.dra_socket(host.driver, instance)
        self.registration_socket = self.dirs.registration_socket(host.driver, instance)
        self.publisher = _CachedPublisher(host, spec.node)
        self.plugin: FakeDriver | None = None
        self.server: grpc.aio.Server | None = None
        self.stopping = threading.Event()
        self.published: dict[str, Any] = {}
        self.next_cleanup = 0.0
        self.lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return self.server is not None

    def start(self) -> None:
        with self.lock:
            if self.server is not None:
                return
            claim_socket_path(self.dra_socket)
            claim_socket_path(self.registration_socket)
            self.dirs.create()
            plugin_dir = self.dirs.plugin_dir(self.host.driver)
            node_log = logging.getLogger(f"draguard.driver.{self.name}")
            plugin = FakeDriver(driver=self.host.driver, node=self.name, dirs=self.dirs, inventory=self.inventory,
                                claims=self.host.claims, mutant=self.mutant, faults=_NodeFaults(plugin_dir, node_log),
                                reset_seconds=self.host.reset_seconds, log=node_log, instance=self.instance)  # fmt: skip
            self.stopping = threading.Event()
            calls = CallsInFlight(plugin_dir)
            for path in (self.dra_socket, self.registration_socket):
                path.parent.mkdir(parents=True, exist_ok=True)

            async def serve() -> grpc.aio.Server:
                # Created on the loop that serves it (grpc.aio objects belong to their loop's thread).
                server = grpc.aio.server(migration_thread_pool=self.host.executor)
                for api in DRA_VERSIONS.values():
                    api.grpc.add_DRAPluginServicer_to_server(_CrashSafe(plugin, api, calls, self), server)
                for api in HEALTH_VERSIONS.values():
                    api.grpc.add_DRAResourceHealthServicer_to_server(
                        _AsyncHealth(plugin, self.host.health_interval, self.stopping, api, self.host.executor), server
                    )
                # Registration is served on both sockets too (one server per node keeps the host light);
                # the node side asks it only on -reg.sock, as the kubelet does.
                pluginregistration_pb2_grpc.add_RegistrationServicer_to_server(
                    _Registration(self.host.driver, self.dra_socket), server
                )
                for path in (self.dra_socket, self.registration_socket):
                    try:
                        server.add_insecure_port(f"unix://{path}")
                    except RuntimeError as exc:
                        raise HarnessError(f"{path}: cannot listen: {exc}") from exc
                await server.start()
                return server

            server = self.host.loop.run(serve())
            self.plugin, self.server = plugin, server
            self.published = {}
            self.next_cleanup = time.monotonic()
            self.pid_file.write_text(f"{os.getpid()}\n")

    @property
    def pid_file(self) -> Path:
        return self.dirs.plugin_dir(self.host.driver) / (f"driver-{self.instance}.pid" if self.instance else "driver.pid")

    def stop(self, kill: bool = False) -> None:
        """Stop serving; ``kill``: at once (calls in flight fail; the checkpoint stays, as after SIGKILL),
        else with a short grace. grpc removes the socket files as its server stops, either way."""
        with self.lock:
            server, self.server, self.plugin = self.server, None, None
            self.stopping.set()
            if server is not None:
                self.host.loop.run(server.stop(0 if kill else 0.5))
            if not kill:
                release_socket_paths(self.registration_socket, self.dra_socket)
                self.pid_file.unlink(missing_ok=True)

    def crashed(self) -> None:
        log.warning("node %s: injected crash; its driver stops as if killed", self.name)
        threading.Thread(target=self.stop, kwargs={"kill": True}, daemon=True).start()

    def sync(self, verify: bool) -> None:
        """Publish slices when health changed or a verification round is due; stale-claim cleanup."""
        plugin = self.plugin
        if plugin is None:
            return
        unhealthy = plugin.unhealthy()
        if self.published.get("unhealthy") != unhealthy or verify:
            try:
                self.publisher.publish(self.inventory, unhealthy)
                self.published["unhealthy"] = unhealthy
                self.published.pop("error", None)
            except Exception as exc:  # the API or the Node may come later: retry next round
                if self.published.get("error") != str(exc):
                    log.warning("node %s: cannot publish ResourceSlices yet: %s", self.name, exc)
                    self.published["error"] = str(exc)
        if time.monotonic() >= self.next_cleanup:
            self.next_cleanup = time.monotonic() + self.host.cleanup_interval
            try:
                plugin.cleanup_stale()
            except Exception:
                log.exception("node %s: stale-claim cleanup failed", self.name)


class _CrashSafe(_DraServicer):
    """DRA servicer of one hosted node: an injected crash ends that node's driver, not the host."""

    def __init__(self, plugin: FakeDriver, api: ApiVersion, calls: CallsInFlight, node: _Node) -> None:
        super().__init__(plugin, api, calls)
        self.node = node

    def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return super().NodePrepareResources(request, context)
        except NodeCrash:
            self.node.crashed()
            context.abort(grpc.StatusCode.UNAVAILABLE, f"driver on {self.node.name} crashed (injected)")

    def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return super().NodeUnprepareResources(request, context)
        except NodeCrash:
            self.node.crashed()
            context.abort(grpc.StatusCode.UNAVAILABLE, f"driver on {self.node.name} crashed (injected)")


class _AsyncHealth(_Health):
    """The health stream on the host's event loop: a waiting stream costs no thread (a synchronous
    generator would hold one of the pool's threads for as long as the kubelet watches), and a
    cancelled one ends at once. The health check itself (file reads, the driver's lock) runs in the pool."""

    def __init__(self, driver: FakeDriver, interval: float, stop: threading.Event, api: ApiVersion,
                 pool: futures.Executor) -> None:  # fmt: skip
        super().__init__(driver, interval, stop, api)
        self.pool = pool

    async def NodeWatchResources(self, request: Any, context: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        loop = asyncio.get_running_loop()
        last: list[DeviceHealth] | None = None
        sent_at = 0.0
        while not self.stop.is_set():
            current = await loop.run_in_executor(self.pool, self.driver.health)
            if self._due(current, last, sent_at):
                yield self._message(current)
                last, sent_at = current, time.monotonic()
            await asyncio.sleep(self.interval)


class _Loop:
    """The one asyncio loop, on its own thread, that every hosted node's gRPC server runs on.

    A synchronous ``grpc.server`` polls its own completion queue on its own thread and wakes every
    200 ms to look for signals (grpcio's ``_serve``): at 500 nodes, 2500 wake-ups a second, about
    0.067 cores with nothing to do. ``grpc.aio`` servers share one completion queue per process;
    the handlers stay synchronous and run in the host's thread pool (``migration_thread_pool``).
    Measured side by side, 500 servers on unix sockets: idle 0.067 -> 0.0007 cores; 4000 calls
    from 8 client threads, server CPU per call 0.62 -> 0.42 ms.
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="grpc-aio", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run ``coro`` on the loop and wait for its result (never call from the loop's own thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5.0)


class _SliceCache:
    """The driver's ResourceSlices by node, kept by one list-and-watch; which nodes changed since asked.

    A node is *dirty* when an event touched its slices (ours included: the next round then finds them
    equal and writes nothing). While the watch is down (:attr:`synced` false) publishers list for
    themselves, as a per-node driver does.
    """

    def __init__(self, kube: Any, driver: str, stop: threading.Event) -> None:
        self.kube, self.driver, self.stop = kube, driver, stop
        self.synced = False
        self._by_node: dict[str, dict[str, dict[str, Any]]] = {}
        self._dirty: set[str] = set()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="slice-watch", daemon=True)

    def start(self, timeout: float = 30.0) -> None:
        self.thread.start()
        self._ready.wait(timeout)

    def existing(self, node: str) -> list[dict[str, Any]] | None:
        with self._lock:
            return list(self._by_node.get(node, {}).values()) if self.synced else None

    def take_dirty(self) -> set[str]:
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            return dirty

    def _put(self, etype: str, obj: dict[str, Any]) -> None:
        node = str(obj.get("spec", {}).get("nodeName"))
        name = obj["metadata"]["name"]
        with self._lock:
            if etype == "DELETED":
                self._by_node.get(node, {}).pop(name, None)
            else:
                self._by_node.setdefault(node, {})[name] = obj
            self._dirty.add(node)

    def _listed(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self._dirty |= set(self._by_node)
            self._by_node = {}
            for item in items:
                self._by_node.setdefault(str(item["spec"].get("nodeName")), {})[item["metadata"]["name"]] = item
            self._dirty |= set(self._by_node)
            self.synced = True
        self._ready.set()

    def _lost(self, exc: Exception) -> None:
        log.warning("ResourceSlice watch ended: %s; listing again", exc)
        with self._lock:
            self.synced = False

    def _run(self) -> None:
        # The server ends the watch after a minute and a fresh list follows (a connection that hung
        # without an error, behind a load balancer, is given up within 90 s).
        self.kube.list_watch("ResourceSlice", self._listed, self._put, self.stop,
                             field_selector=f"spec.driver={self.driver}", on_error=self._lost)  # fmt: skip


class _CachedPublisher(SlicePublisher):
    """A node's publisher reading the existing slices from the host's watch (:class:`_SliceCache`)."""

    def __init__(self, host: DriverHost, node: str) -> None:
        super().__init__(host.kube, host.driver, node, logging.getLogger(f"draguard.driver.{node}"))
        self.host = host

    def existing(self) -> list[dict[str, Any]]:
        cached = self.host.slices.existing(self.node)
        return super().existing() if cached is None else cached


class DriverHost:
    """The fake driver for many nodes in this process. Build (every input checked), then :meth:`serve`."""

    def __init__(
        self,
        kube: Any,
        root: Path,
        nodes: Sequence[HostedNode],
        driver: str = DEFAULT_DRIVER,
        workers: int = 32,
        health_interval: float = 1.0,
        reset_seconds: float = 0.005,
        resync_interval: float = 1.0,
        verify_every: float = 5.0,
        cleanup_interval: float = 30.0,
    ) -> None:
        if not nodes:
            raise UsageError("the driver host needs at least one node")
        names = [n.node for n in nodes]
        if len(set(names)) != len(names):
            raise UsageError("the driver host got a node twice")
        self.kube = kube
        self.root = Path(root).absolute()
        self.driver = driver
        self.claims = KubeClaims(kube)
        self.health_interval = health_interval
        self.reset_seconds = reset_seconds
        self.resync_interval = resync_interval
        self.verify_every = verify_every
        self.cleanup_interval = cleanup_interval
        self.executor = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dra")
        self.stop_event = threading.Event()
        self.slices = _SliceCache(kube, driver, self.stop_event)
        self.nodes: dict[str, _Node] = {}
        inventories: dict[tuple[str | None, int | None], Any] = {}
        for spec in nodes:
            get_mutant(spec.mutant)  # bad names fail before anything starts
            key = (spec.topology, spec.devices)
            if key not in inventories:
                inventories[key] = (
                    load_topology(spec.topology).device_specs() if spec.topology else generic(spec.devices or DEFAULT_DEVICES)
                )
            self.nodes[spec.node] = _Node(self, spec, resolve(inventories[key], spec.node))
        for node in self.nodes.values():
            claim_socket_path(node.dra_socket)
            claim_socket_path(node.registration_socket)
        self._control: socketserver.ThreadingUnixStreamServer | None = None
        self.loop = _Loop()  # last: nothing runs until every input was checked

    # -- control --------------------------------------------------------------------------------
    def node(self, name: str) -> _Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise UsageError(f"the driver host serves no node {name!r}") from None

    def command(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "ping":
            return {"ok": True, "nodes": len(self.nodes)}
        node = self.node(str(request.get("node")))
        if op == "kill":
            node.stop(kill=True)
        elif op == "stop":
            node.stop()
        elif op == "start":
            node.start()
            node.sync(verify=True)
        elif op == "roll":
            return {"ok": True, "alive": True, "instance": self.roll(node, float(request.get("overlap", 1.0)))}
        elif op != "status":
            raise UsageError(f"unknown driver host command {op!r}")
        return {"ok": True, "alive": node.alive}

    def roll(self, old: _Node, overlap: float) -> str:
        """A rolling update of one node's driver: a new instance beside the old, both serving for ``overlap``
        seconds, then the old one stopped (see :meth:`FakeDriverProcess.rolling_update`)."""
        if not old.alive:
            raise HarnessError(f"the driver of node {old.name} is not running: nothing to update")
        new = _Node(self, old.spec, old.inventory, instance=str(uuid.uuid4()))
        new.start()
        new.sync(verify=True)
        time.sleep(overlap)
        self.nodes[old.name] = new
        old.stop()
        assert new.instance is not None
        return new.instance

    def _serve_control(self) -> None:
        host = self
        path = control_socket(self.root)
        claim_socket_path(path)

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for line in self.rfile:
                    try:
                        reply = host.command(json.loads(line))
                    except (UsageError, HarnessError, ValueError) as exc:
                        reply = {"ok": False, "error": str(exc)}
                    self.wfile.write(json.dumps(reply).encode() + b"\n")
                    self.wfile.flush()

        self._control = socketserver.ThreadingUnixStreamServer(str(path), Handler)
        self._control.daemon_threads = True
        threading.Thread(target=self._control.serve_forever, name="control", daemon=True).start()

    # -- run ------------------------------------------------------------------------------------
    def start(self, parallel: int = 8) -> None:
        """Start every node's servers, publish every node's slices, open the control socket."""
        for node in self.nodes.values():
            node.start()
        self.slices.start()
        self.slices.take_dirty()  # every node is verified just below
        with futures.ThreadPoolExecutor(parallel, thread_name_prefix="publish") as pool:
            list(pool.map(lambda n: n.sync(verify=True), self.nodes.values()))
        self._serve_control()
        log.info("serving %s for %d nodes under %s", self.driver, len(self.nodes), self.root)

    def serve(self) -> None:
        """Run until :attr:`stop_event` is set; every node's sockets go on exit, checkpoints stay."""
        next_verify = time.monotonic() + self.verify_every
        try:
            while not self.stop_event.wait(self.resync_interval):
                every = time.monotonic() >= next_verify
                if every:
                    next_verify = time.monotonic() + self.verify_every
                changed = self.slices.take_dirty()
                for node in list(self.nodes.values()):
                    node.sync(every or node.name in changed)
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        if self._control is not None:
            self._control.shutdown()
            self._control.server_close()
            control_socket(self.root).unlink(missing_ok=True)
            self._control = None
        for node in self.nodes.values():
            node.stop()
        self.loop.close()
        self.executor.shutdown(wait=False, cancel_futures=True)


def read_nodes_file(path: Path) -> list[HostedNode]:
    """The host's node list: JSON ``{"nodes": [{"node": N, "topology": F, "devices": 8, "mutant": M}]}``."""
    try:
        raw = json.loads(Path(path).read_text())
        return [HostedNode.from_json(n) for n in raw["nodes"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a driver host node list: {exc}") from exc


# -- the host as a child process, and per-node handles ---------------------------------------------


class DriverHostProcess(NodeProcess):
    """The host as a child process (``python -m draguard.harness.driver.main host ...``), supervised."""

    def __init__(self, kubeconfig: str | Path, root: str | Path, nodes: Sequence[HostedNode],
                 driver: str = DEFAULT_DRIVER, log_level: str = "info", reset_ms: int | None = None) -> None:  # fmt: skip
        self.kubeconfig = Path(kubeconfig)
        self.root = Path(root)
        self.driver = driver
        self.nodes = list(nodes)
        self.log_level = log_level
        spec = self.root / "driver-host.json"
        argv = [sys.executable, "-m", "draguard.harness.driver.main", "host", "--kubeconfig", str(self.kubeconfig),
                "--root", str(self.root), "--driver", self.driver, "--nodes-file", str(spec),
                "--log-level", self.log_level]  # fmt: skip
        if reset_ms is not None:  # the modelled device reset; the host's own default otherwise (5 ms)
            argv += ["--reset-ms", str(reset_ms)]
        self._proc = Supervised("the fake driver host", argv, self.log_path,
                                lambda: socket_accepts(control_socket(self.root)), poll=0.05, log_lines=20)

    @property
    def log_path(self) -> Path:
        return self.root / "driver-host.log"

    @property
    def title(self) -> str:
        return f"fake driver host for {len(self.nodes)} nodes"

    @property
    def socket(self) -> Path:
        return control_socket(self.root)

    def start(self, timeout: float = 120.0) -> DriverHostProcess:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "driver-host.json").write_text(json.dumps({"nodes": [n.__dict__ for n in self.nodes]}))
        try:
            self._proc.start(timeout)
        except HarnessError:
            self.stop()
            raise
        return self

    def command(self, request: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            try:
                s.connect(str(control_socket(self.root)))
                s.sendall(json.dumps(request).encode() + b"\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError as exc:
                raise HarnessError(f"the fake driver host does not answer ({exc})") from exc
        reply: dict[str, Any] = json.loads(data or b"{}")
        if not reply.get("ok"):
            raise HarnessError(f"driver host: {reply.get('error', 'no answer')}")
        return reply

    def stop(self, timeout: float = 15.0) -> int | None:
        return self._proc.stop(timeout)

    def handles(self) -> dict[str, HostedDriver]:
        return {n.node: HostedDriver(self, n) for n in self.nodes}


class HostedDriver(FakeDriverProcess):
    """One node's driver in a :class:`DriverHostProcess`, with the interface of a per-node process."""

    def __init__(self, host: DriverHostProcess, node: HostedNode) -> None:
        super().__init__(host.kubeconfig, node.node, root=host.root, driver=host.driver, devices=node.devices,
                         topology=node.topology, mutant=node.mutant)  # fmt: skip
        self.host = host

    @property
    def pid(self) -> int | None:
        return self.host.pid

    @property
    def alive(self) -> bool:
        return self.host.alive and bool(self.host.command({"op": "status", "node": self.node})["alive"])

    @property
    def returncode(self) -> int | None:
        return None

    @property
    def log_path(self) -> Path:
        return self.host.log_path

    def start(self, timeout: float = 30.0) -> HostedDriver:
        self.host.command({"op": "start", "node": self.node}, timeout)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.host.alive:
                raise HarnessError(f"the fake driver host exited:\n{self.host.log_tail()}")
            if socket_accepts(self.dra_socket) and socket_accepts(self.registration_socket):
                return
            time.sleep(0.02)
        raise HarnessError(f"fake driver for node {self.node} (hosted): sockets not ready after {timeout:.0f}s")

    def wait_exit(self, timeout: float = 10.0) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                return 137
            time.sleep(0.05)
        return None

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.host.alive:
            self.host.command({"op": "stop", "node": self.node}, timeout)
        return 0

    def kill(self) -> int | None:
        if self.host.alive:
            self.host.command({"op": "kill", "node": self.node})
        return 137

    def rolling_update(self, overlap: float = 1.0, timeout: float = 30.0) -> str:
        reply = self.host.command({"op": "roll", "node": self.node, "overlap": overlap}, timeout + overlap)  # raises if not ok
        self.instance = str(reply["instance"])
        self.wait_ready(timeout)
        return self.instance
