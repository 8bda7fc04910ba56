"""The cluster a command points at: a kubeconfig, a context in it, and the context it may disturb.

Every command that talks to an existing cluster takes the same three options (``--kubeconfig``,
``--context``, ``--allow-context``; ``draguard.cli.options`` declares them) and gets a
:class:`KubeTarget`. It answers what those commands ask of a target: which file it is (``$KUBECONFIG``
or ``~/.kube/config`` when none is given), which context is active, whether it is a local draguard
cluster (``draguard cluster up``), and whether steps that touch more than a run's own objects
(a drain, a taint, a load) are allowed there. Reads the kubeconfig through the kubernetes client's
loader; talks to no API server.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from draguard.harness.core.errors import UsageError

from .kind.cluster import clusters_root as kind_clusters_root
from .local import clusters_root

__all__ = ["KubeTarget", "default_kubeconfig"]


def default_kubeconfig() -> Path:
    """The kubeconfig kubectl would use: ``$KUBECONFIG``, else ``~/.kube/config``."""
    return Path(os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config")


@dataclass(frozen=True)
class KubeTarget:
    """``--kubeconfig``, ``--context`` and ``--allow-context`` as given (None: not given)."""

    kubeconfig: Path | None = None
    context: str | None = None
    allow_context: str | None = None

    @property
    def given(self) -> bool:
        """Whether any of the three options was given."""
        return self.kubeconfig is not None or self.context is not None or self.allow_context is not None

    def path(self) -> Path:
        """The kubeconfig file: ``--kubeconfig``, else the one kubectl would use."""
        return self.kubeconfig if self.kubeconfig is not None else default_kubeconfig()

    def active_context(self) -> str:
        """``--context`` once checked against the kubeconfig, else its current context (UsageError: exit 2)."""
        from kubernetes import config as kube_config  # lazy: the client library takes ~0.3 s to import

        path = self.path()
        try:
            contexts, active = kube_config.list_kube_config_contexts(str(path))
        except Exception as exc:  # noqa: BLE001 - the library raises bare exceptions
            raise UsageError(f"{path}: cannot read kubeconfig: {exc}") from exc
        if self.context is not None:
            if self.context not in {c["name"] for c in contexts}:
                raise UsageError(f"--context {self.context!r}: not in {path}")
            return self.context
        return str(active["name"])

    def is_local(self) -> bool:
        """Whether the kubeconfig is one of a cluster draguard brought up itself, a local control plane or a
        kind cluster (always allowed to be disturbed)."""
        try:
            path = self.path().resolve()
            return any(path.is_relative_to(root.resolve()) for root in (clusters_root(), kind_clusters_root()))
        except OSError:
            return False
