"""``driver-restart``: the DRA driver on a node is killed (or stopped) and started again.

A correct driver recovers every prepared claim from its checkpoint; none is lost or prepared twice.
"""

from __future__ import annotations

from draguard.harness.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.model import Params

from ._common import fake_driver


class DriverRestartParams(Params):
    kill: bool = True
    """SIGKILL (a crash) rather than SIGTERM."""


@FAULTS.register("driver-restart", summary="kill and restart the DRA driver on the targeted node", params=DriverRestartParams)
def driver_restart(ctx: StepContext, params: DriverRestartParams | None) -> None:
    params = params or DriverRestartParams()
    for node in ctx.target_nodes():
        proc = fake_driver(ctx, node)
        ctx.before(UndoAction("none", {"why": "the driver is started again by the step itself"}))
        proc.restart(kill=params.kill)
        if proc.pid:
            ctx.handles.journal.process(proc.pid, f"fake driver on {node} (restarted)")
        ctx.note(f"driver on {node} {'killed' if params.kill else 'stopped'} and restarted")
