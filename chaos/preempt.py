"""``preempt``: a higher-priority gang arrives and the scheduler preempts members of a bound one.

The arriving workload is declared in the scenario (with a higher ``priority``) and held back until
this step creates its pods; kube-scheduler's preemption then evicts lower-priority pods to fit it.
"""

from __future__ import annotations

from draguard.harness.errors import UsageError
from draguard.harness.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.model import DnsLabel, Params


class PreemptParams(Params):
    workload: DnsLabel
    """The higher-priority workload of the scenario whose pods arrive with this step."""


@FAULTS.register("preempt", summary="create a higher-priority gang so that the scheduler preempts", params=PreemptParams)
def preempt(ctx: StepContext, params: PreemptParams | None) -> None:
    if params is None:
        raise UsageError(f"step {ctx.step.name}: preempt needs params.workload")
    try:
        w = ctx.scenario.workload(params.workload)
    except KeyError:
        raise UsageError(f"step {ctx.step.name}: params.workload {params.workload!r} is not a workload of the scenario") from None
    ctx.before(UndoAction("none", {"why": "the arriving gang is removed with the run's namespace"}))
    assert ctx.handles.deploy_workload is not None
    ctx.handles.deploy_workload(w.name)
    ctx.note(f"gang {w.name} ({w.replicas} pods, priority {w.priority or w.priority_class_name}) arrived")
