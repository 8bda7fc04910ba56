"""The ``kubelet`` fleet: hollow DRA kubelets (upstream's kubelet code, one process per node) in front of
draguard's fake driver; the kubelets start as every fleet starts them (:mod:`.hollow`).
"""

from __future__ import annotations

from .base import FLEETS
from .fake import FakeFleet

__all__ = ["KubeletFleet"]


@FLEETS.register("kubelet", summary="hollow DRA kubelets in front of draguard's fake driver")
class KubeletFleet(FakeFleet):
    """Every node a hollow kubelet; the driver as in the ``fake`` fleet (which serves mixed nodes too)."""

    name = "kubelet"
