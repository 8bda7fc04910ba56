"""Where draguard keeps things on disk: XDG cache and state roots, and the per-node directory layout.

A node's directories follow one convention, shared by the fake driver, the fake nodes, the
interposer and real plugins, mirroring ``/var/lib/kubelet`` and ``/etc/cdi`` on a real node::

    <root>/<node>/plugins_registry/<driver>-reg.sock   registration sockets
    <root>/<node>/plugins/<driver>/dra.sock            DRA service sockets, plugin data
    <root>/<node>/cdi/                                 CDI spec files
"""

from __future__ import annotations

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

    def plugin_dir(self, driver: str) -> Path:
        return self.plugins / driver

    def dra_socket(self, driver: str) -> Path:
        return self.plugin_dir(driver) / "dra.sock"

    def registration_socket(self, driver: str) -> Path:
        return self.registry / f"{driver}-reg.sock"

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
