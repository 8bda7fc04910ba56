"""``driver-down``: the DRA driver on a node is gone for a while (or until cleanup).

Pods needing it stay Pending with FailedPrepareDynamicResources; unprepare of deleted pods waits.
Without a ``duration`` the driver comes back when the cleanup phase starts, so the node can
unprepare what the workloads held before ``no-leak`` judges. Either way the step does not hold up
the other steps: each step runs on its own. The fake driver's process is stopped; a driver installed
as a DaemonSet is taken off the node by a journaled node-affinity patch of the DaemonSet.
"""

from __future__ import annotations

from draguard.harness.core.registry import FAULTS
from draguard.harness.fleet.base import DriverControl
from draguard.harness.runner.context import StepContext
from draguard.harness.scenario.format import Params, PositiveDuration


class DriverDownParams(Params):
    duration: PositiveDuration | None = None
    """How long the driver stays down (default: until the cleanup phase starts)."""


@FAULTS.register("driver-down", summary="stop the DRA driver on the targeted node for a while",
                 params=DriverDownParams, needs=("stop-driver",))
def driver_down(ctx: StepContext, params: DriverDownParams | None) -> None:
    params = params or DriverDownParams()
    drivers = [ctx.driver(node) for node in ctx.target_nodes()]
    for driver in drivers:
        driver.down()
        ctx.fired()
        ctx.note(f"driver on {driver.node} down")
        if params.duration is None:
            ctx.on_undo(driver.up, until_cleanup=True)
    if params.duration is None:
        return
    ended_early = not ctx.sleep(params.duration.total_seconds())
    for driver in drivers:
        _back(ctx, driver, ended_early)


def _back(ctx: StepContext, driver: DriverControl, early: bool) -> None:
    driver.up()
    ctx.note(f"driver on {driver.node} back" + (" (cleanup started before the duration ended)" if early else ""))
