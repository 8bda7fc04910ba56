"""``scheduler-restart``, ``controller-manager-restart``, ``apiserver-restart``: control-plane restarts.

In-memory state (the scheduler's assumed allocations, the controllers' queues) is lost; what was
written to the API must carry the system to the same result.
"""

from __future__ import annotations

from draguard.harness.errors import UsageError
from draguard.harness.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction


def _restart(ctx: StepContext, component: str) -> None:
    cluster = ctx.handles.cluster
    if cluster is None:
        raise UsageError(f"step {ctx.step.name}: restarting {component} needs the local backend")
    ctx.before(UndoAction("none", {"why": f"{component} is started again by the step itself"}))
    cluster.restart(component)
    sup = cluster.components.get(f"kube-{component}")
    if sup is not None and sup.pid:
        ctx.handles.journal.process(sup.pid, f"kube-{component} (restarted)")
    ctx.note(f"kube-{component} restarted")


@FAULTS.register("scheduler-restart", summary="restart kube-scheduler")
def scheduler_restart(ctx: StepContext, params: None) -> None:
    _restart(ctx, "scheduler")


@FAULTS.register("controller-manager-restart", summary="restart kube-controller-manager")
def controller_manager_restart(ctx: StepContext, params: None) -> None:
    _restart(ctx, "controller-manager")


@FAULTS.register("apiserver-restart", summary="restart kube-apiserver")
def apiserver_restart(ctx: StepContext, params: None) -> None:
    _restart(ctx, "apiserver")
