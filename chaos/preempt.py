"""``preempt``: a higher-priority gang arrives and members of a bound gang are preempted.

The arriving workload is declared in the scenario (with a higher ``priority``) and held back until
this step creates its pods. kube-scheduler gets ``wait`` to preempt by itself. In Kubernetes 1.37 it
does not preempt for DRA devices: its DynamicResources filter reports "cannot allocate all claims"
as unresolvable, so the preemption dry run says "Preemption is not helpful". A workload-level
preemptor (Kueue, a gang controller) then does it instead; so does this step: it marks the targeted
victims with a ``DisruptionTarget`` condition and deletes them gracefully, and says which path
happened. Victims are chosen by the step's target (default: one random member) with the seeded rng.
"""

from __future__ import annotations

import time
from datetime import timedelta

from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.format import DnsLabel, Params, PositiveDuration

from ._common import name, require


class PreemptParams(Params):
    workload: DnsLabel | None = None
    """The higher-priority workload of the scenario whose pods arrive with this step."""
    wait: PositiveDuration = timedelta(seconds=5)
    """How long kube-scheduler may take to preempt by itself before the step preempts."""


def _scheduler_preempted(ctx: StepContext, victims_of: str | None) -> list[str]:
    return [name(p) for p in ctx.pods(victims_of, live_only=False) if p["metadata"].get("deletionTimestamp")]


@FAULTS.register("preempt", summary="a higher-priority gang arrives and bound members are preempted", params=PreemptParams)
def preempt(ctx: StepContext, params: PreemptParams | None) -> None:
    params = params or PreemptParams()
    ctx.before(UndoAction("none", {"why": "preempted pods are not restored; the arriving gang goes with the namespace"}))
    if params.workload is not None:
        ctx.create_workload(params.workload)
        w = ctx.scenario.workload(params.workload)
        ctx.note(f"gang {w.name} ({w.replicas} pods, priority {w.priority or w.priority_class_name}) arrived")
    victims_of = ctx.target.workload
    if ctx.wait_for(lambda: bool(_scheduler_preempted(ctx, victims_of)), params.wait.total_seconds()):
        victims = _scheduler_preempted(ctx, victims_of)
        ctx.fired(len(victims))
        ctx.note(f"kube-scheduler preempted {', '.join(victims)}")
        return
    ctx.note(f"kube-scheduler did not preempt within {params.wait.total_seconds():.0f}s; preempting as a workload-level preemptor")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for pod in require(ctx.target_pods(bound_only=True), ctx):
        md = pod["metadata"]
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByDraguard",
                     "message": f"preempted for a higher-priority gang (draguard step {ctx.step.name})", "lastTransitionTime": now}
        ctx.kube.patch("Pod", md["name"], {"status": {"conditions": [condition]}}, md["namespace"],
                       patch_type="strategic", subresource="status")
        ctx.kube.delete("Pod", md["name"], md["namespace"])
        ctx.fired()
        ctx.note(f"preempted {name(pod)}")
