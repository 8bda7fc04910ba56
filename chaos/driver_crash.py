"""``driver-crash``: the DRA driver dies at a chosen point inside a call, and comes back later.

The crash is armed as the fake driver's ``crash_at`` fault: the driver exits as ``kill -9`` would
the first time (or the ``after``+1-th time) it reaches ``point``, for instance between writing
``PrepareStarted`` to its checkpoint and answering NodePrepareResources, a window no step that
kills the driver from outside can hit. A watcher started by the step brings the driver back
``down`` seconds after it died, as a DaemonSet restarts a crashed plugin pod. The step returns at
once; it notes when the crash happened and when the driver was back, and counts as fired when the
driver reached the point (a crash that never happened fails the step).
"""

from __future__ import annotations

import threading
from datetime import timedelta

from pydantic import Field

from draguard.harness.core.errors import DraguardError
from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import CrashPoint, FakeDriverControl, StepContext
from draguard.harness.scenario.format import Params, PositiveDuration


class DriverCrashParams(Params):
    point: CrashPoint
    """Where in the driver it dies, e.g. ``prepare.after_started`` (see harness/driver/fault_control.py)."""
    after: int = Field(0, ge=0, le=1_000_000)
    """Times the point is passed before the crash (0 to a million)."""
    down: PositiveDuration = timedelta(seconds=2)
    """How long the driver stays down after it died."""


def _watch(ctx: StepContext, driver: FakeDriverControl, down: float, stop: threading.Event) -> None:
    """Wait for the armed crash, keep the driver down for ``down`` seconds, start it again."""
    while not stop.is_set():
        code = driver.wait_exit(timeout=0.2)
        if code is not None:
            break
    else:
        return
    ctx.note(f"driver on {driver.node} crashed at the armed point (exit {code}); down for {down:.0f}s")
    if stop.wait(down):
        return
    try:
        driver.start()
    except DraguardError as exc:
        ctx.note(f"driver on {driver.node} did not come back: {exc}")
        return
    ctx.note(f"driver on {driver.node} back")


@FAULTS.register("driver-crash", summary="the DRA driver dies at a point inside a call and restarts later",
                 params=DriverCrashParams, needs=("fake-driver",))
def driver_crash(ctx: StepContext, params: DriverCrashParams) -> None:
    for node in ctx.target_nodes(default="all"):
        driver = ctx.fake_driver(node)
        driver.set_fault("crash_at", {"point": params.point, "after": params.after}, until_cleanup=False)
        stop = threading.Event()
        watcher = threading.Thread(target=_watch, args=(ctx, driver, params.down.total_seconds(), stop),
                                   name=f"driver-crash-{node}", daemon=True)
        watcher.start()

        def undo(driver: FakeDriverControl = driver, stop: threading.Event = stop,
                 watcher: threading.Thread = watcher) -> None:
            stop.set()
            watcher.join(timeout=35)
            if not driver.alive:  # crashed and not yet back: the run's teardown expects a driver
                driver.start()

        ctx.on_undo(undo)
        ctx.note(f"crash armed at {params.point} (after {params.after}) on {node}")
