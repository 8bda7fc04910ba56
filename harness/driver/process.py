"""Run the fake driver as a subprocess: start, wait until both sockets answer, stop, kill -9, restart.

Used by the node agent, the runner and the tests. The child is ``python -m draguard.harness.driver.main
fake ...`` (the harness entry point, not the command line), a :class:`~draguard.harness.core.process.Supervised`
process with stdout and stderr appended to ``<plugins>/<driver>/driver.log``; the checkpoint,
faults file and CDI specs live in the node's directories, so a restarted child recovers.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from draguard.harness.core.errors import HarnessError
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs, state_dir
from draguard.harness.core.process import NodeProcess, Supervised, socket_accepts
from draguard.harness.driver.fault_control import set_faults
from .state import Checkpoint, read_checkpoint

__all__ = ["FakeDriverProcess"]


class FakeDriverProcess(NodeProcess):
    """One fake driver child process for one node."""

    def __init__(
        self,
        kubeconfig: str | Path,
        node: str,
        root: str | Path | None = None,
        driver: str = DEFAULT_DRIVER,
        devices: int | None = None,
        topology: str | Path | None = None,
        mutant: str | None = None,
        health_interval: float | None = None,
        reset_ms: int | None = None,
        log_level: str = "info",
        env: dict[str, str] | None = None,
        node_root: str | Path | None = None,
    ) -> None:
        self.kubeconfig = Path(kubeconfig)
        self.node = node
        self.root = Path(root) if root is not None else state_dir() / "nodes"
        self.driver = driver
        self.dirs = NodeDirs(self.root, node)
        self.node_root = Path(node_root) if node_root is not None else self.root
        """Where the node's device truth and CDI specs live (the sockets may be elsewhere)."""
        self.args = ["--kubeconfig", str(self.kubeconfig), "--node", node, "--root", str(self.root)]
        self.args += ["--driver", driver, "--log-level", log_level]
        if node_root is not None:
            self.args += ["--node-root", str(self.node_root)]
        if devices is not None:
            self.args += ["--devices", str(devices)]
        if topology is not None:
            self.args += ["--topology", str(topology)]
        if mutant is not None:
            self.args += ["--mutant", mutant]
        if health_interval is not None:
            self.args += ["--health-interval", str(health_interval)]
        if reset_ms is not None:
            self.args += ["--reset-ms", str(reset_ms)]
        self.env = env
        self.instance: str | None = None
        """The pod UID of the running instance once a rolling update replaced the first (None before)."""
        # Its own session (a Ctrl-C in the parent's terminal is not the driver's business), and it dies
        # with draguard even when a chaos step's thread restarted it (harness.process.spawn).
        self._proc = self._child(f"fake driver for node {node}", self._argv(), self._sockets_accept)

    def _argv(self, args: list[str] | None = None) -> list[str]:
        return [sys.executable, "-m", "draguard.harness.driver.main", "fake", *(self.args if args is None else args)]

    def _child(self, name: str, argv: list[str], ready: Any) -> Supervised:
        """A driver child logging to the node's ``driver.log``, ready when ``ready()`` says its sockets answer."""
        return Supervised(name, argv, self.plugin_dir / "driver.log", ready, env=self.env, poll=0.02, log_lines=20)

    # -- paths ------------------------------------------------------------------------------------
    @property
    def dra_socket(self) -> Path:
        return self.dirs.dra_socket(self.driver, self.instance)

    @property
    def registration_socket(self) -> Path:
        return self.dirs.registration_socket(self.driver, self.instance)

    @property
    def plugin_dir(self) -> Path:
        return self.dirs.plugin_dir(self.driver)

    @property
    def log_path(self) -> Path:
        return self.plugin_dir / "driver.log"

    @property
    def title(self) -> str:
        return f"fake driver on {self.node}"

    @property
    def socket(self) -> Path:
        return self.dra_socket

    def _sockets_accept(self) -> bool:
        return socket_accepts(self.dra_socket) and socket_accepts(self.registration_socket)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> FakeDriverProcess:
        """Start the child and wait until both sockets accept connections."""
        if self.alive:
            raise HarnessError(f"fake driver for node {self.node} is already running (pid {self.pid})")
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self._proc.argv = self._argv()  # callers may add to self.args before starting
        self._proc.start(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        self._proc.wait_ready(timeout)

    def kill(self) -> int | None:
        """SIGKILL now, as a node crash or ``kill -9`` would; sockets stay behind as on a real node."""
        return self._proc.kill()

    def restart(self, kill: bool = False, timeout: float = 30.0) -> FakeDriverProcess:
        self.kill() if kill else self.stop()
        return self.start(timeout)

    def rolling_update(self, overlap: float = 1.0, timeout: float = 30.0) -> str:
        """Replace the running driver as a DaemonSet's rolling update with surge does: a new instance (a new
        pod UID, the kubeletplugin helper's rolling-update socket names, the same plugin directory) starts
        beside the old one, both serve for ``overlap`` seconds, then the old one is stopped (SIGTERM). The
        node agent turns to the newer registration at once (the kubelet prefers the most recent connected
        instance). Returns the new instance's pod UID; later restarts keep it, as a container restarted
        in its pod keeps the pod's UID."""
        if not self.alive:
            raise HarnessError(f"fake driver for node {self.node} is not running: nothing to update")
        instance = str(uuid.uuid4())
        args = list(self.args)
        if "--pod-uid" in args:
            i = args.index("--pod-uid")
            del args[i : i + 2]
        args += ["--pod-uid", instance]
        dra, reg = self.dirs.dra_socket(self.driver, instance), self.dirs.registration_socket(self.driver, instance)
        new = self._child(f"fake driver for node {self.node} (instance {instance[:8]})", self._argv(args),
                          lambda: socket_accepts(dra) and socket_accepts(reg))
        new.start(timeout)
        time.sleep(overlap)
        old, self._proc, self.args, self.instance = self._proc, new, args, instance
        old.stop()
        return instance

    # -- conveniences ---------------------------------------------------------------------------
    def set_faults(self, **faults: Any) -> None:
        set_faults(self.root, self.node, self.driver, **faults)

    def checkpoint(self) -> Checkpoint:
        return read_checkpoint(self.root, self.node, self.driver)

    def __enter__(self) -> FakeDriverProcess:
        return self.start() if not self.alive else self
