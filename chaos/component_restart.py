"""``scheduler-restart``, ``controller-manager-restart``, ``apiserver-restart``: control-plane restarts.

In-memory state (the scheduler's assumed allocations, the controllers' queues) is lost; what was
written to the API must carry the system to the same result.
"""

from __future__ import annotations

from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext


def _restart(ctx: StepContext, component: str) -> None:
    ctx.restart_component(component)
    ctx.fired()
    ctx.note(f"kube-{component} restarted")


@FAULTS.register("scheduler-restart", summary="restart kube-scheduler", needs=("local-backend",))
def scheduler_restart(ctx: StepContext, params: None) -> None:
    _restart(ctx, "scheduler")


@FAULTS.register("controller-manager-restart", summary="restart kube-controller-manager", needs=("local-backend",))
def controller_manager_restart(ctx: StepContext, params: None) -> None:
    _restart(ctx, "controller-manager")


@FAULTS.register("apiserver-restart", summary="restart kube-apiserver", needs=("local-backend",))
def apiserver_restart(ctx: StepContext, params: None) -> None:
    _restart(ctx, "apiserver")
