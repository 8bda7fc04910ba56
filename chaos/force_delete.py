"""``force-delete``: delete pods with grace period 0, as `kubectl delete --force` does.

The API object goes at once, while the node may still hold the pod's prepared devices: the node
agent (kubelet) must still unprepare them, or they leak.
"""

from __future__ import annotations

from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction

from ._common import name, require


@FAULTS.register("force-delete", summary="delete the targeted pods with grace period 0")
def force_delete(ctx: StepContext, params: None) -> None:
    ctx.before(UndoAction("none", {"why": "a deletion is not undone"}))
    for pod in require(ctx.target_pods(), ctx):
        ctx.kube.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"], grace_seconds=0)
        ctx.fired()
        ctx.note(f"force-deleted {name(pod)}")
