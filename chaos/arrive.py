"""``arrive``: a workload the scenario held back arrives now (its pods are created).

With ``at``, ``when`` or ``after`` this races a new gang against whatever else is happening, e.g. a
new pod against the cleanup of a force-deleted one on the same devices.
"""

from __future__ import annotations

from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.scenario.format import DnsLabel, Params


class ArriveParams(Params):
    workload: DnsLabel
    """The workload of the scenario whose pods are created by this step (held back until then)."""


@FAULTS.register("arrive", summary="create the pods of a workload held back until this step", params=ArriveParams)
def arrive(ctx: StepContext, params: ArriveParams) -> None:
    w = ctx.scenario.workload(params.workload)
    ctx.create_workload(w.name)
    ctx.fired(w.replicas)
    ctx.note(f"workload {w.name} ({w.replicas} pod(s)) arrived")
