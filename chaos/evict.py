"""``evict``: evict gang members through the Eviction API (what drains and autoscalers do)."""

from __future__ import annotations

from pydantic import Field

from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.format import MAX_SECONDS, Params

from ._common import name, require


class EvictParams(Params):
    grace_seconds: int | None = Field(default=None, ge=0, le=MAX_SECONDS)
    """Grace period for the pod (default: the pod's own)."""


@FAULTS.register("evict", summary="evict the targeted pods through the Eviction API", params=EvictParams)
def evict(ctx: StepContext, params: EvictParams | None) -> None:
    params = params or EvictParams()
    ctx.before(UndoAction("none", {"why": "an eviction is not undone; the gang controller would recreate pods"}))
    for pod in require(ctx.target_pods(), ctx):
        md = pod["metadata"]
        body: dict[str, object] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                   "metadata": {"name": md["name"], "namespace": md["namespace"]}}
        if params.grace_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": params.grace_seconds}
        ctx.kube.request("POST", ctx.kube.path("Pod", md["name"], md["namespace"], "eviction"), body=body)
        ctx.fired()
        ctx.note(f"evicted {name(pod)}")
