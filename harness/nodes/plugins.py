"""Plugin discovery and DRA clients of a fake node, the way the kubelet's plugin manager does it.

A :class:`NodePlugins` watches ``<root>/<node>/plugins_registry/`` for ``*-reg.sock`` files (polled;
:class:`PluginWatcher` scans every node of a process from one thread, a directory whose mtime has not
moved costing one stat). For each new socket it calls
``Registration.GetInfo``, requires type ``DRAPlugin``, picks the first of the plugin's
``supported_versions`` that it speaks (``v1.DRAPlugin``, ``v1beta1.DRAPlugin``), dials the endpoint
and answers ``NotifyRegistrationStatus``. A socket that disappears deregisters its plugin; a socket
that is re-created (new inode) registers again. Talks only to plugins (or the interposer) over gRPC, through
:class:`~draguard.harness.grpcapi.plugin.PluginClient`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from draguard.harness.core.fsio import vouches
from draguard.harness.grpcapi.plugin import (
    CALL_TIMEOUT,
    PLUGIN_TYPE,
    REGISTRATION_TIMEOUT,
    SUPPORTED_VERSIONS,
    PluginCallError,
    PluginClient,
    choose_version,
)

__all__ = ["NodePlugins", "PluginWatcher"]

log = logging.getLogger("draguard.nodes")

RETRY_FAILED_AFTER = 5.0
FULL_SCAN_EVERY = 10.0
"""Seconds after which a node's directory is read again even though its mtime says nothing changed."""


@dataclass
class _Registered:
    socket: str
    ident: tuple[int, int]
    driver: str
    client: PluginClient
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
        self._scanned: tuple[tuple[int, int], float] | None = None
        """The directory's (inode, mtime) at the last scan that can vouch for it, and when that scan ran."""
        self._failed: dict[str, tuple[tuple[int, int], float]] = {}
        self.on_change: Callable[[str], None] | None = None

    def client(self, driver: str) -> PluginClient | None:
        """The most recently registered plugin instance of ``driver``, if any."""
        with self._lock:
            regs = [r for r in self._by_socket.values() if r.driver == driver]
        return max(regs, key=lambda r: r.at).client if regs else None

    def drivers(self) -> list[str]:
        with self._lock:
            return sorted({r.driver for r in self._by_socket.values()})

    def unchanged(self) -> bool:
        """True when the registry directory cannot have changed since the last scan that read it: its inode
        and mtime are the same, the scan's read vouched for it (:func:`~draguard.harness.driver.state.vouches`),
        no failed registration waits for its retry, and the scan is under :data:`FULL_SCAN_EVERY` old. A socket created, removed or
        re-created (driver restart) changes its directory's mtime. At 500 nodes reading every directory
        twice a second cost a fifth of the fake nodes' idle CPU; one stat per node is what stays."""
        scanned = self._scanned
        if scanned is None or self._failed or time.time() - scanned[1] > FULL_SCAN_EVERY:
            return False
        try:
            st = os.stat(self.registry)
        except OSError:
            return False
        return (st.st_ino, st.st_mtime_ns) == scanned[0]

    def scan(self, submit: Callable[[Callable[[], None]], object]) -> None:
        """Compare the registry directory with what is registered; registrations run via ``submit``."""
        seen: dict[str, tuple[int, int]] = {}
        started = time.time()
        try:  # before reading the entries: a change while they are read makes the next scan read them again
            st = os.stat(self.registry)
            settled = vouches(((st.st_mtime_ns, st.st_size),), started)
            self._scanned = ((st.st_ino, st.st_mtime_ns), started) if settled else None
        except OSError:
            self._scanned = None
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
        log.info("node %s: plugin %s registered (%s, %s)", self.node, reg.driver, reg.client.dra_socket, reg.client.version)
        self._changed(reg.driver)

    def _try_register(self, path: str, ident: tuple[int, int]) -> _Registered:
        with PluginClient(registration_socket=path) as registration:
            info = registration.get_info(timeout=REGISTRATION_TIMEOUT)
            error = ""
            version = choose_version(info.supported_versions)
            if info.type != PLUGIN_TYPE:
                error = f"plugin type {info.type!r} is not {PLUGIN_TYPE}"
            elif not version:
                error = (
                    f"none of the plugin's versions {list(info.supported_versions)} is supported "
                    f"(supported: {list(SUPPORTED_VERSIONS)})"
                )
            elif not info.endpoint:
                error = "plugin gave no endpoint"
            if error or version is None:
                registration.notify(False, error, timeout=REGISTRATION_TIMEOUT)
                raise PluginCallError("GetInfo", "INVALID_ARGUMENT", error, path)
            endpoint = info.endpoint
            if not os.path.isabs(endpoint):
                endpoint = os.path.join(os.path.dirname(path), endpoint)
            client = PluginClient(endpoint, version=version, timeout=self.call_timeout, driver=info.name)
            registration.notify(True, timeout=REGISTRATION_TIMEOUT)
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
            if not plugins.unchanged():
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
