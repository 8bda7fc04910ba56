"""The fake driver as a kubelet plugin: gRPC servicers, the two unix-socket servers, and the run loop.

* ``<plugins>/<driver>/dra.sock`` serves ``k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin``, the same
  service in ``v1beta1``, and ``DRAResourceHealth`` (NodeWatchResources) in ``v1`` and ``v1alpha1``;
* ``<plugins_registry>/<driver>-reg.sock`` serves ``pluginregistration.Registration``: GetInfo
  answers type ``DRAPlugin``, the driver name, the DRA socket path and every service it serves:
  ``v1.DRAPlugin``, ``v1beta1.DRAPlugin``, ``v1.DRAResourceHealth``, ``v1alpha1.DRAResourceHealth``
  (the kubelet watches health only when the registration lists a health service).

Versions, message layouts and the claim reference come from :mod:`draguard.harness.grpcapi.plugin`.

:func:`build` validates every input (names, topology, mutant, sockets) before anything starts, so
bad input fails with one clear error and leaves nothing running; :func:`serve` then publishes the
ResourceSlices, starts both servers and keeps slices and stale-claim cleanup going until stopped.
The CLI (``draguard driver fake``) is a thin wrapper around these two.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.core.paths import DEFAULT_DRIVER, KubeletDirs, NodeDirs
from draguard.harness.core.process import check_dns_subdomain, claim_socket_path, release_socket_paths

from ..grpcapi import pluginregistration_pb2, pluginregistration_pb2_grpc
from ..grpcapi.plugin import (
    DRA_VERSIONS,
    HEALTH_SERVICES,
    HEALTH_VERSIONS,
    PLUGIN_TYPE,
    SUPPORTED_VERSIONS,
    ApiVersion,
    ClaimRef,
    PluginDevice,
    PluginInfo,
)
from ..kube import Kube
from draguard.harness.driver.fault_control import FaultControl
from .inflight import CallsInFlight
from .mutants import get_mutant
from .plugin import BatchAborted, DeviceHealth, FakeDriver, KubeClaims
from .slices import SlicePublisher
from .topology import DEFAULT_DEVICES, Inventory, generic, load_topology, resolve

__all__ = [
    "ADVERTISED",
    "DriverConfig",
    "PluginServer",
    "Driver",
    "build",
    "serve",
]

log = logging.getLogger("draguard.driver")

ADVERTISED = (*SUPPORTED_VERSIONS, *HEALTH_SERVICES)
"""What the fake driver lists in ``supported_versions``: every DRA and health service it serves."""


# -- servicers ------------------------------------------------------------------------------------


class _DraServicer:
    """NodePrepareResources / NodeUnprepareResources for one API version (same messages in both)."""

    def __init__(self, driver: FakeDriver, api: ApiVersion, calls: CallsInFlight) -> None:
        self.driver = driver
        self.pb = api.pb
        self.calls = calls

    def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        refs = [ClaimRef.from_pb(c) for c in request.claims]
        resp = self.pb.NodePrepareResourcesResponse()
        with self.calls.call():
            try:
                results = self.driver.prepare(refs)
            except BatchAborted as exc:  # the batch-abort-on-error mutant: the whole RPC fails
                context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        for uid, result in results.items():
            entry = resp.claims[uid]
            if result.error:
                entry.error = result.error
                continue
            for d in result.devices:
                PluginDevice(tuple(d.requests), d.pool, d.device, tuple(d.cdi_device_ids)).add_to(entry)
        return resp

    def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        refs = [ClaimRef.from_pb(c) for c in request.claims]
        resp = self.pb.NodeUnprepareResourcesResponse()
        with self.calls.call():
            try:
                errors = self.driver.unprepare(refs)
            except BatchAborted as exc:
                context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        for uid, error in errors.items():
            entry = resp.claims[uid]
            if error:
                entry.error = error
        return resp


class _Registration(pluginregistration_pb2_grpc.RegistrationServicer):
    def __init__(self, driver: str, endpoint: Path) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.status: tuple[bool, str] | None = None

    def GetInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        return PluginInfo(PLUGIN_TYPE, self.driver, str(self.endpoint), ADVERTISED).to_pb()

    def NotifyRegistrationStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.status = (request.plugin_registered, request.error)
        if request.plugin_registered:
            log.info("registered with the kubelet")
        else:
            log.error("the kubelet refused the registration: %s", request.error)
        return pluginregistration_pb2.RegistrationStatusResponse()


class _Health:
    """NodeWatchResources for one health API version (same messages in v1 and v1alpha1)."""

    def __init__(self, driver: FakeDriver, interval: float, stop: threading.Event, api: ApiVersion) -> None:
        self.driver = driver
        self.interval = interval
        self.stop = stop
        self.pb = api.pb

    def _message(self, health: list[DeviceHealth]) -> Any:
        now = int(time.time())
        pb = self.pb
        resp = pb.NodeWatchResourcesResponse()
        for h in health:
            resp.devices.add(
                device=pb.DeviceIdentifier(pool_name=self.driver.node, device_name=h.device),
                health=pb.HEALTHY if h.healthy else pb.UNHEALTHY,
                last_updated_time=now,
                health_check_timeout_seconds=max(30, int(self.interval * 5)),
                message=h.message,
            )
        return resp

    def _due(self, current: list[DeviceHealth], last: list[DeviceHealth] | None, sent_at: float) -> bool:
        """Send on every change, and again now and then so the kubelet's timeout never expires."""
        return current != last or time.monotonic() - sent_at >= 10 * self.interval

    def NodeWatchResources(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        last: list[DeviceHealth] | None = None
        sent_at = 0.0
        while not self.stop.is_set() and context.is_active():
            current = self.driver.health()
            if self._due(current, last, sent_at):
                yield self._message(current)
                last, sent_at = current, time.monotonic()
            self.stop.wait(self.interval)


# -- sockets and servers --------------------------------------------------------------------------


class PluginServer:
    """The DRA server (dra.sock) and the registration server (-reg.sock) of one driver."""

    def __init__(
        self,
        driver: FakeDriver,
        dra_socket: Path,
        registration_socket: Path,
        health_interval: float = 1.0,
        max_workers: int = 16,
    ) -> None:
        self.driver = driver
        self.dra_socket = dra_socket
        self.registration_socket = registration_socket
        self.stopping = threading.Event()
        self.registration = _Registration(driver.driver, dra_socket)
        self._dra = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="dra"))
        calls = CallsInFlight(driver.plugin_dir)
        for api in DRA_VERSIONS.values():
            api.grpc.add_DRAPluginServicer_to_server(_DraServicer(driver, api, calls), self._dra)
        for api in HEALTH_VERSIONS.values():
            api.grpc.add_DRAResourceHealthServicer_to_server(_Health(driver, health_interval, self.stopping, api), self._dra)
        self._reg = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="reg"))
        pluginregistration_pb2_grpc.add_RegistrationServicer_to_server(self.registration, self._reg)
        self._started = False

    def start(self) -> None:
        for server, path in ((self._dra, self.dra_socket), (self._reg, self.registration_socket)):
            claim_socket_path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                server.add_insecure_port(f"unix://{path}")
            except RuntimeError as exc:
                raise HarnessError(f"{path}: cannot listen: {exc}") from exc
        # Registration last: the kubelet connects to dra.sock as soon as it sees the -reg.sock.
        self._dra.start()
        self._reg.start()
        self._started = True

    def stop(self, grace: float = 1.0) -> None:
        self.stopping.set()
        if self._started:
            self._reg.stop(grace).wait()
            self._dra.stop(grace).wait()
        release_socket_paths(self.registration_socket, self.dra_socket)


# -- configuration and run loop -------------------------------------------------------------------


@dataclass(frozen=True)
class DriverConfig:
    """Everything ``draguard driver fake`` takes; defaults match the CLI's."""

    kubeconfig: Path | None
    node: str
    root: Path
    driver: str = DEFAULT_DRIVER
    devices: int | None = None
    topology: Path | None = None
    mutant: str | None = None
    node_root: Path | None = None
    """Where the node's device truth and CDI specs live, when not under ``root`` (the interposer)."""
    health_interval: float = 1.0
    reset_seconds: float = 0.005
    cleanup_interval: float = 30.0
    resync_interval: float = 1.0
    in_cluster: bool = False
    """No kubeconfig: the API server of the cluster the driver's pod runs in, as its ServiceAccount."""
    kubelet_dirs: bool = False
    """Serve and write where a real node's kubelet and containerd look (:class:`KubeletDirs`), not under ``root``."""
    instance: str | None = None
    """The pod UID of this instance in a rolling update: it serves ``dra-<uid>.sock`` and registers
    ``<driver>-<uid>-reg.sock``, so that two instances run side by side; None: the plain socket names."""


@dataclass
class Driver:
    """A built, not yet started driver: all inputs checked."""

    config: DriverConfig
    dirs: NodeDirs
    inventory: Inventory
    plugin: FakeDriver
    server: PluginServer
    publisher: SlicePublisher | None
    stop: threading.Event = field(default_factory=threading.Event)


def build(config: DriverConfig, kube: Any = None) -> Driver:
    """Check every input and assemble the driver; raises UsageError/HarnessError naming the input."""
    check_dns_subdomain("--driver", config.driver, 63)
    check_dns_subdomain("--node", config.node, 253)
    mutant = get_mutant(config.mutant)
    if config.devices is not None and config.topology is not None:
        raise UsageError("--devices and --topology: give one of them, not both")
    specs = load_topology(config.topology).device_specs() if config.topology else generic(config.devices or DEFAULT_DEVICES)
    inventory = resolve(specs, config.node)
    dirs = (KubeletDirs if config.kubelet_dirs else NodeDirs)(Path(config.root).absolute(), config.node)
    if config.instance is not None:
        check_dns_subdomain("--pod-uid", config.instance, 63)
    # Both socket paths are checked before anything is written, so a taken socket leaves no trace.
    claim_socket_path(dirs.dra_socket(config.driver, config.instance))
    claim_socket_path(dirs.registration_socket(config.driver, config.instance))
    if kube is None and config.kubeconfig is not None:
        kube = Kube.from_kubeconfig(config.kubeconfig)
    elif kube is None and config.in_cluster:
        kube = Kube.in_cluster()
    if kube is None:
        raise UsageError("--kubeconfig: the fake driver needs an API server to read ResourceClaims (or --in-cluster in a pod)")
    dirs.create()
    plugin = FakeDriver(
        driver=config.driver,
        node=config.node,
        dirs=dirs,
        inventory=inventory,
        claims=KubeClaims(kube),
        mutant=mutant,
        faults=FaultControl(dirs.plugin_dir(config.driver), log),
        reset_seconds=config.reset_seconds,
        log=log,
        node_root=Path(config.node_root).absolute() if config.node_root is not None else None,
        instance=config.instance,
    )
    server = PluginServer(plugin, dirs.dra_socket(config.driver, config.instance),
                          dirs.registration_socket(config.driver, config.instance), config.health_interval)  # fmt: skip
    publisher = SlicePublisher(kube, config.driver, config.node, log)
    return Driver(config, dirs, inventory, plugin, server, publisher)


def _sync(d: Driver, published: dict[str, Any], verify_every: float = 2.0) -> None:
    """Keep the slices right: at once when the health picture changes, and every ``verify_every``
    seconds anyway (the kubelet wipes a node's slices when it restarts or loses the driver, and a
    re-created Node has a new uid). Errors are logged once and retried on the next round."""
    if d.publisher is None:
        return
    unhealthy = d.plugin.unhealthy()
    due = time.monotonic() >= published.get("verify_at", 0.0)
    if published.get("unhealthy") == unhealthy and not due:
        return
    try:
        d.publisher.publish(d.inventory, unhealthy)
        published["unhealthy"] = unhealthy
        published["verify_at"] = time.monotonic() + verify_every
        published.pop("error", None)
    except Exception as exc:  # the API or the Node may come later: retry next round
        if published.get("error") != str(exc):
            log.warning("cannot publish ResourceSlices yet: %s", exc)
            published["error"] = str(exc)


def serve(d: Driver, ready: Callable[[], None] | None = None) -> None:
    """Run until ``d.stop`` is set: slices, both servers, stale-claim cleanup. Sockets go on exit."""
    published: dict[str, Any] = {}
    pid_file = d.dirs.plugin_dir(d.config.driver) / (f"driver-{d.config.instance}.pid" if d.config.instance else "driver.pid")
    _sync(d, published)
    d.server.start()
    pid_file.write_text(f"{os.getpid()}\n")
    log.info(
        "serving %s for node %s on %s (%d devices%s)",
        d.config.driver,
        d.config.node,
        d.server.dra_socket,
        len(d.inventory.devices),
        f", mutant {d.plugin.mutant.name}" if d.plugin.mutant.name != "none" else "",
    )
    if ready:
        ready()
    next_cleanup = time.monotonic()
    try:
        while not d.stop.is_set():
            _sync(d, published)
            if time.monotonic() >= next_cleanup:
                next_cleanup = time.monotonic() + d.config.cleanup_interval
                try:
                    d.plugin.cleanup_stale()
                except Exception:
                    log.exception("stale-claim cleanup failed")
            d.stop.wait(d.config.resync_interval)
    finally:
        d.server.stop()
        pid_file.unlink(missing_ok=True)
        log.info("stopped; checkpoint kept at %s", d.plugin.checkpoint_path)
