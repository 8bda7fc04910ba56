"""One ``draguard-kubelet`` (hollow DRA kubelet) per node, as a supervised child process.

The node root is the :class:`~draguard.harness.core.paths.NodeDirs` base: the kubelet's root directory
(``plugins_registry/``, ``plugins/<driver>/``, the DRA checkpoint ``dra_manager_state``), the CDI
directory ``cdi/`` that its fake runtime resolves devices against, ``containers/<id>.json`` (what each
container got: its CDI devices and their environment; beside it ``<id>.truth`` while the device truth
has the container running, see :mod:`.feed`) and the runtime's socket ``cri.sock``. The
kubelet talks to the API server as ``system:node:<name>`` with a certificate from the cluster's CA.

Talks to: the binary (a :class:`~draguard.harness.core.process.Supervised` child that dies with its
parent), the filesystem, and for readiness its healthz port and the Node object.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..cluster import binaries
from ..cluster.pki import Pki, node_kubeconfig
from draguard.harness.core.process import NodeProcess, Supervised, free_port, last_lines
from draguard.harness.core.errors import DraguardError, HarnessError
from ..kube import Kube
from draguard.harness.core.paths import NodeDirs
from .feed import DeviceTruthFeed

__all__ = ["AGENT_CAPABILITIES", "HollowKubelet", "ContainerRecord", "find_kubelet"]

AGENT_CAPABILITIES: Mapping[str, frozenset[str]] = {
    "fake": frozenset({"node-restart", "node-loss", "node-loss-partial", "many-nodes"}),
    "kubelet": frozenset({"node-restart", "node-loss"}),
}
"""Node-side abilities per agent: faults a scenario may ask of nodes run by that agent.

Both agents restart (``node-restart``: the process) and disappear (``node-loss``: heartbeats and
pod syncs stop). Only the fake agent loses a single node among many served by one process while
the others keep going without a restart, and serves hundreds of nodes in one process."""


def find_kubelet(bin_dir: str | Path | None = None, build: bool = True) -> Path:
    """The ``draguard-kubelet`` binary: in ``bin_dir`` if given, else in the binary cache entry
    (built there from the pinned module on first use when ``build``, minutes on a warm Go cache)."""
    if bin_dir:
        path = Path(bin_dir).expanduser() / binaries.KUBELET
    else:
        try:
            entry = binaries.resolve(allow_download=False, allow_build=False, progress=lambda _: None)
        except HarnessError as exc:
            raise HarnessError(f"the hollow DRA kubelet is not available: {exc}; run `draguard cluster build`") from exc
        if build:
            binaries.ensure_built(entry, (binaries.KUBELET,))
        path = entry.path(binaries.KUBELET)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise HarnessError(f"the hollow DRA kubelet {path} is missing; `draguard cluster build` builds it")
    return path


@dataclass(frozen=True)
class ContainerRecord:
    """What the kubelet's runtime recorded for one container (``<root>/<node>/containers/<id>.json``)."""

    id: str
    pod_namespace: str
    pod_name: str
    pod_uid: str
    container: str
    cdi_devices: tuple[str, ...]
    env: tuple[str, ...]
    running: bool


_REGISTERED = re.compile(r'"Registered DRA plugin".*? driverName="([^"]+)"')


class HollowKubelet(NodeProcess):
    """A hollow DRA kubelet for ``node`` with its root at ``NodeDirs(root, node).base``."""

    def __init__(
        self,
        pki: Pki,
        server: str,
        node: str,
        root: str | Path,
        *,
        admin: Kube,
        feature_gates: Mapping[str, bool] | None = None,
        labels: Mapping[str, str] | None = None,
        cdi_dir: str | Path | None = None,
        binary: str | Path | None = None,
        verbosity: int = 2,
    ) -> None:
        self.node = node
        self.dirs = NodeDirs(Path(root), node)
        self.admin = admin
        self.binary = Path(binary) if binary is not None else find_kubelet()
        self.cdi_dir = Path(cdi_dir) if cdi_dir is not None else self.dirs.cdi
        self.kubeconfig = self.dirs.base / "kubelet.kubeconfig"
        self.log = self.dirs.base / "kubelet.log"
        self._pki, self._server = pki, server
        self.port, self.healthz_port = free_port(), free_port()
        gates = ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted((feature_gates or {}).items()))
        argv = [
            str(self.binary), f"-v={verbosity}", "-vmodule=dra_plugin_manager=3",
            f"--node-name={node}", f"--root-dir={self.dirs.base}", f"--kubeconfig={self.kubeconfig}",
            f"--cdi-dir={self.cdi_dir}", f"--port={self.port}", f"--healthz-port={self.healthz_port}",
        ]
        if gates:
            argv.append(f"--feature-gates={gates}")
        if labels:
            argv.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
        self._proc = Supervised(f"hollow kubelet for node {node}", argv, self.log, self._ready)
        self._log_offset = 0
        self._started = 0.0
        self._feed: DeviceTruthFeed | None = None

    @property
    def title(self) -> str:
        return f"hollow kubelet {self.node}"

    @property
    def argv(self) -> list[str]:
        return list(self._proc.argv)

    # -- readiness ----------------------------------------------------------------------------
    def _healthz(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=1) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _ready(self) -> bool:
        """Healthz answers and this kubelet posted its Node Ready (a heartbeat since it started: a
        restarted kubelet's Node is still Ready from before)."""
        if not self._healthz():
            return False
        try:
            node = self.admin.get("Node", self.node)
        except DraguardError:
            return False
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._started - 1))
        conds = (node or {}).get("status", {}).get("conditions", [])
        return any(c.get("type") == "Ready" and c.get("status") == "True" and c.get("lastHeartbeatTime", "") >= since
                   for c in conds)

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> HollowKubelet:
        if self.alive:
            raise HarnessError(f"the hollow kubelet for node {self.node} is already running (pid {self.pid})")
        try:
            self.dirs.create()
            probe = self.dirs.base / ".writable"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise HarnessError(f"node root {self.dirs.base} is not writable: {exc}") from exc
        if not self.kubeconfig.exists():
            node_kubeconfig(self._pki, self._server, self.node, self.kubeconfig)
        self._log_offset = self.log.stat().st_size if self.log.exists() else 0
        self._started = time.time()
        # What its runtime does goes into the node's device truth, as the fake agent's runtime records it.
        # The feed watches before the kubelet starts: a restarted runtime drops the containers of the
        # last one (runtime.go, clearRecords), and they must leave the truth before the kubelet can
        # unprepare a claim of a pod deleted meanwhile.
        self._feed = DeviceTruthFeed(self.dirs, self.cdi_dir, self.admin).start()
        try:
            self._proc.start(timeout)
        except HarnessError:
            self._proc.stop(timeout=5)
            self._stop_feed()
            raise
        return self

    def _stop_feed(self) -> None:
        if self._feed is not None:
            self._feed.stop()
            self._feed = None

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM: the kubelet stops and removes its runtime socket; SIGKILL after ``timeout``."""
        self._stop_feed()
        return self._proc.stop(timeout)

    def kill(self) -> int | None:
        """SIGKILL, as a crash: the checkpoint and the sockets stay behind."""
        self._stop_feed()
        return self._proc.kill()

    def restart(self, kill: bool = True, timeout: float = 90.0) -> HollowKubelet:
        self.kill() if kill else self.stop()
        return self.start(timeout)

    # -- what it did --------------------------------------------------------------------------
    def registered_drivers(self) -> set[str]:
        """Drivers whose plugin the kubelet registered since its last start (from its log)."""
        try:
            with self.log.open("rb") as f:
                f.seek(self._log_offset)
                text = f.read().decode(errors="replace")
        except OSError:
            return set()
        return set(_REGISTERED.findall(text))

    def wait_registered(self, driver: str, timeout: float = 30.0) -> None:
        """Wait until the kubelet's plugin manager registered ``driver``; HarnessError naming the socket if not
        (a driver whose registration socket never answers, or answers with something the kubelet refuses)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if driver in self.registered_drivers():
                return
            if not self.alive:
                raise HarnessError(f"the hollow kubelet for node {self.node} exited; last lines of {self.log}:\n"
                                   + self.log_tail())
            time.sleep(0.1)
        raise HarnessError(
            f"the kubelet of node {self.node} did not register driver {driver} within {timeout:.0f}s: its socket "
            f"{self.dirs.registration_socket(driver)} never answered as a DRA plugin; last lines of {self.log}:\n"
            + self.log_tail()
        )

    def log_tail(self, lines: int = 12) -> str:
        return last_lines(self.log, lines)

    def containers(self) -> list[ContainerRecord]:
        """What the fake runtime recorded for each container it still has."""
        out = []
        for path in sorted((self.dirs.base / "containers").glob("*.json")):
            try:
                d = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            out.append(ContainerRecord(d["id"], d["podNamespace"], d["podName"], d["podUID"], d["container"],
                                       tuple(d["cdiDevices"]), tuple(d["env"]), bool(d["running"])))
        return out
