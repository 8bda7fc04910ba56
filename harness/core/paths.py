"""Where draguard keeps things on disk: XDG cache and state roots, and the per-node directory layout.

A node's directories follow one convention, shared by the fake driver, the fake nodes, the
interposer and real plugins, mirroring ``/var/lib/kubelet`` and ``/etc/cdi`` on a real node::

    <root>/<node>/plugins_registry/<driver>-reg.sock   registration sockets
    <root>/<node>/plugins/<driver>/dra.sock            DRA service sockets, plugin data
    <root>/<node>/cdi/                                 CDI spec files
"""

from __future__ import annotations

import base64
import hashlib

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["cache_dir", "state_dir", "runs_dir", "run_dir", "NodeDirs", "DEFAULT_DRIVER"]

DEFAULT_DRIVER = "gpu.draguard.dev"


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/draguard`` (default ``~/.cache/draguard``): rebuildable things such as binaries."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "draguard"


def state_dir() -> Path:
    """``$XDG_STATE_HOME/draguard`` (default ``~/.local/state/draguard``): clusters, node roots, journals."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "draguard"


def runs_dir() -> Path:
    """``<state>/runs``: the folders of runs (:func:`run_dir`)."""
    return state_dir() / "runs"


def run_dir(run_id: str) -> Path:
    """``<state>/runs/<id>``: one run's own files (its nodes' directories, its timeline spool, its record).
    The run removes them at its end, all but the record, which the reports take and then remove with
    the folder; a run whose result is never rendered leaves its record for the next run to prune."""
    return runs_dir() / run_id


def _digest(data: str, size: int) -> str:
    """The first ``size`` bytes of the SHA-256 of ``data``, base64url without padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(data.encode()).digest()[:size]).decode().rstrip("=")


@dataclass(frozen=True)
class NodeDirs:
    """The kubelet-like directories of one node under a root."""

    root: Path
    node: str

    @property
    def base(self) -> Path:
        return self.root / self.node

    @property
    def registry(self) -> Path:
        return self.base / "plugins_registry"

    @property
    def plugins(self) -> Path:
        return self.base / "plugins"

    @property
    def cdi(self) -> Path:
        return self.base / "cdi"

    @property
    def booted(self) -> Path:
        """When the node last rebooted (wall-clock seconds), written by ``node-reboot``: what lived in memory
        and on tmpfs (its CDI folder, sockets, containers) is gone since."""
        return self.base / "booted"

    def plugin_dir(self, driver: str) -> Path:
        return self.plugins / driver

    def dra_socket(self, driver: str, instance: str | None = None) -> Path:
        """The DRA service socket; one instance of a rolling update serves ``dra-<instance>.sock`` (the
        kubeletplugin helper's rolling-update name, k8s.io/dynamic-resource-allocation/kubeletplugin), or
        ``dra-<b64(sha256(instance))[:8 bytes]>.sock`` where that path would not fit a unix socket (a deep
        root; the kubelet learns the endpoint from the registration, so the name is the driver's own)."""
        if not instance:
            return self.plugin_dir(driver) / "dra.sock"
        path = self.plugin_dir(driver) / f"dra-{instance}.sock"
        return path if len(str(path)) <= 107 else self.plugin_dir(driver) / f"dra-{_digest(instance, 8)}.sock"

    def registration_socket(self, driver: str, instance: str | None = None) -> Path:
        """The registration socket; for one instance of a rolling update the first of these names whose path
        fits a unix socket (107 bytes): ``<driver>-<instance>-reg.sock``, ``<driver>-<b64(sha256(instance))[:8
        bytes]>-reg.sock``, ``dra-<b64(sha256(driver NUL instance))[:16 bytes]>-reg.sock`` (the kubeletplugin
        helper's RollingUpdateRegistrarSocketFile, k8s.io/dynamic-resource-allocation/kubeletplugin)."""
        if not instance:
            return self.registry / f"{driver}-reg.sock"
        names = [f"{driver}-{instance}-reg.sock", f"{driver}-{_digest(instance, 8)}-reg.sock",
                 f"dra-{_digest(driver + chr(0) + instance, 16)}-reg.sock"]  # fmt: skip
        for name in names:
            if len(str(self.registry / name)) <= 107:
                return self.registry / name
        return self.registry / names[-1]

    def create(self) -> "NodeDirs":
        for d in (self.registry, self.plugins, self.cdi):
            d.mkdir(parents=True, exist_ok=True)
        return self


KUBELET_DIR = Path("/var/lib/kubelet")
CDI_DIR = Path("/var/run/cdi")


@dataclass(frozen=True)
class KubeletDirs(NodeDirs):
    """A real node's directories, as a driver pod mounts them from the host at the same paths: the
    kubelet's registration directory ``/var/lib/kubelet/plugins_registry``, its plugin directories
    ``/var/lib/kubelet/plugins/<driver>`` (where the DRA socket, the checkpoint and the fault file live,
    so they outlast the pod), and containerd's CDI directory ``/var/run/cdi``. ``root`` keeps only what has
    no kubelet home (the fake hardware's device truth)."""

    @property
    def registry(self) -> Path:
        return KUBELET_DIR / "plugins_registry"

    @property
    def plugins(self) -> Path:
        return KUBELET_DIR / "plugins"

    @property
    def cdi(self) -> Path:
        return CDI_DIR
