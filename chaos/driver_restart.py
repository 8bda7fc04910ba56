"""``driver-restart``: the DRA driver on a node is killed (or stopped) and started again.

A correct driver recovers every prepared claim from its checkpoint; none is lost or prepared twice.
The fake driver's process is restarted; a driver installed as a DaemonSet has its pod on the node
deleted (without grace for a kill) and the step waits for the DaemonSet's replacement to be Ready.
"""

from __future__ import annotations

from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.scenario.format import Params


class DriverRestartParams(Params):
    kill: bool = True
    """SIGKILL (a crash) rather than SIGTERM."""


@FAULTS.register("driver-restart", summary="kill and restart the DRA driver on the targeted node",
                 params=DriverRestartParams, needs=("restart-driver",))
def driver_restart(ctx: StepContext, params: DriverRestartParams | None) -> None:
    params = params or DriverRestartParams()
    for node in ctx.target_nodes():
        ctx.driver(node).restart(kill=params.kill)
        ctx.fired()
        ctx.note(f"driver on {node} {'killed' if params.kill else 'stopped'} and restarted")
