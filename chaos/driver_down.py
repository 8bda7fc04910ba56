"""``driver-down``: the DRA driver on a node is gone for a while (or for good).

Pods needing it stay Pending with FailedPrepareDynamicResources; unprepare of deleted pods waits.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from draguard.harness.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.model import Params, PositiveDuration

from ._common import fake_driver

if TYPE_CHECKING:
    from draguard.harness.driver.process import FakeDriverProcess


class DriverDownParams(Params):
    duration: PositiveDuration | None = None
    """How long the driver stays down (default: until the cleanup phase)."""


@FAULTS.register("driver-down", summary="stop the DRA driver on the targeted node for a while", params=DriverDownParams)
def driver_down(ctx: StepContext, params: DriverDownParams | None) -> None:
    params = params or DriverDownParams()
    for node in ctx.target_nodes():
        proc = fake_driver(ctx, node)
        ctx.before(UndoAction("none", {"why": "a stopped driver process is restarted by the run or stopped by cleanup"}))
        proc.kill()
        ctx.note(f"driver on {node} down")
        if params.duration is not None:
            time.sleep(params.duration.total_seconds())
            proc.start()
            ctx.note(f"driver on {node} back")
        else:

            def restart(proc: FakeDriverProcess = proc) -> None:
                proc.start()

            ctx.on_undo(restart)
