"""``draguard nodes`` as a child process, for the runner and the chaos steps (node restart, node loss).

:class:`FakeNodesProcess` starts ``python -m draguard.harness.nodes.main ...`` (the entry point
``draguard nodes`` shares) under :class:`~draguard.harness.core.process.Supervised` (own session, dies with its parent, log file),
waits until the process reports ready, and can stop it, kill it (a crash), restart it, or switch
node loss on and off for single nodes (the ``<root>/<node>/lost`` file the agent checks).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from draguard.harness.core.process import NodeProcess, Supervised
from draguard.harness.core.errors import UsageError
from draguard.harness.core.paths import NodeDirs, state_dir
from draguard.harness.scenario.format import MAX_NODES

from .agent import LOST_FILE

__all__ = ["FakeNodesProcess", "default_root", "node_names"]


def default_root() -> Path:
    """Where fake nodes keep their directories unless told otherwise."""
    return state_dir() / "nodes"


def node_names(nodes: Sequence[str] = (), count: int | None = None, prefix: str | None = None) -> list[str]:
    """The node names of ``--node ...`` or ``--count N --prefix P`` (``P-0`` .. ``P-<N-1>``)."""
    if nodes and (count is not None or prefix is not None):
        raise UsageError("give either --node NAME ... or --count N --prefix P, not both")
    if nodes:
        return list(nodes)
    if count is None or prefix is None:
        raise UsageError("give --node NAME (repeatable) or --count N with --prefix P")
    if count < 1:
        raise UsageError(f"--count {count}: must be at least 1")
    if count > MAX_NODES:  # checked before any name is built
        raise UsageError(f"--count {count}: must be at most {MAX_NODES}")
    base = prefix.rstrip("-")
    if not base:
        raise UsageError(f"--prefix {prefix!r}: must not be empty")
    return [f"{base}-{i}" for i in range(count)]


class FakeNodesProcess(NodeProcess):
    """A ``draguard nodes`` child process serving ``nodes`` under ``root``."""

    def __init__(
        self,
        kubeconfig: str | Path,
        nodes: Sequence[str] = (),
        *,
        count: int | None = None,
        prefix: str | None = None,
        root: str | Path | None = None,
        run_label: str | None = None,
        labels: dict[str, str] | None = None,
        log: str | Path | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.kubeconfig = Path(kubeconfig)
        self.nodes = node_names(nodes, count, prefix)
        self.root = Path(root) if root else default_root()
        self.run_label = run_label
        self.ready_file = self.root / f".nodes-{uuid.uuid4().hex[:8]}.ready"
        self.log = Path(log) if log else self.root / f"nodes-{self.nodes[0]}.log"
        argv = [sys.executable, "-m", "draguard.harness.nodes.main", "--kubeconfig", str(self.kubeconfig)]
        for n in self.nodes:
            argv += ["--node", n]
        argv += ["--root", str(self.root), "--ready-file", str(self.ready_file)]
        if run_label:
            argv += ["--run-label", run_label]
        for k, v in (labels or {}).items():
            argv += ["--label", f"{k}={v}"]
        argv += list(extra_args)
        self._proc = Supervised("draguard nodes", argv, self.log, self.ready_file.exists)

    @property
    def title(self) -> str:
        return "draguard nodes"

    def start(self, timeout: float = 60.0) -> FakeNodesProcess:
        self.root.mkdir(parents=True, exist_ok=True)
        self.ready_file.unlink(missing_ok=True)
        self._proc.start(timeout)
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (clean shutdown), SIGKILL after ``timeout``."""
        code = self._proc.stop(timeout)
        self.ready_file.unlink(missing_ok=True)
        return code

    def kill(self) -> int | None:
        """SIGKILL: the agent dies mid-work, as in a node restart."""
        code = self._proc.kill()
        self.ready_file.unlink(missing_ok=True)
        return code

    def set_lost(self, node: str, lost: bool = True) -> None:
        """Node loss on/off for one node: its heartbeats and pod syncs stop while lost."""
        if node not in self.nodes:
            raise UsageError(f"node {node!r} is not served by this process; nodes: {', '.join(self.nodes)}")
        path = NodeDirs(self.root, node).base / LOST_FILE
        if lost:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        else:
            path.unlink(missing_ok=True)
