"""``driver-crash``: the DRA driver dies at a chosen point inside a call, and comes back later.

The crash is armed in the fake driver's fault file (``crash_at``): the driver exits as ``kill -9``
would the first time (or the ``after``+1-th time) it reaches ``point``, for instance between
writing ``PrepareStarted`` to its checkpoint and answering NodePrepareResources, a window no
step that kills the driver from outside can hit. A watcher started by the step brings the driver
back ``down`` seconds after it died, as a DaemonSet restarts a crashed plugin pod. The step
returns at once; it notes when the crash happened and when the driver was back.
"""

from __future__ import annotations

import json
import threading

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from draguard.harness.driver import faults as driver_faults
from draguard.harness.driver.faults import CrashPoint
from draguard.harness.errors import DraguardError
from draguard.harness.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.model import Params, PositiveDuration

from ._common import fake_driver

if TYPE_CHECKING:
    from draguard.harness.driver.process import FakeDriverProcess


def _current(path: Path) -> dict[str, Any]:
    """The faults other steps set on this driver: arming the crash keeps them."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    data.pop("generation", None)
    return data


class DriverCrashParams(Params):
    point: CrashPoint
    """Where in the driver it dies, e.g. ``prepare.after_started`` (see harness/driver/faults.py)."""
    after: int = 0
    """Times the point is passed before the crash."""
    down: PositiveDuration = timedelta(seconds=2)
    """How long the driver stays down after it died."""


def _watch(ctx: StepContext, proc: FakeDriverProcess, node: str, down: float, stop: threading.Event) -> None:
    """Wait for the armed crash, keep the driver down for ``down`` seconds, start it again."""
    while not stop.is_set():
        if proc.wait_exit(timeout=0.2) is not None:
            break
    else:
        return
    ctx.note(f"driver on {node} crashed at the armed point (exit {proc.returncode}); down for {down:.0f}s")
    if stop.wait(down):
        return
    try:
        proc.start()
    except DraguardError as exc:
        ctx.note(f"driver on {node} did not come back: {exc}")
        return
    if proc.pid:
        ctx.handles.journal.process(proc.pid, f"fake driver on {node} (after crash)")
    ctx.note(f"driver on {node} back")


@FAULTS.register("driver-crash", summary="the DRA driver dies at a point inside a call and restarts later",
                 params=DriverCrashParams)
def driver_crash(ctx: StepContext, params: DriverCrashParams) -> None:
    for node in ctx.target_nodes(default="all"):
        proc = fake_driver(ctx, node)
        path = driver_faults.faults_path(proc.root, node, proc.driver)
        previous = path.read_text() if path.exists() else None
        ctx.before(UndoAction("write-file", {"path": str(path), "content": previous}))
        crash = {"point": params.point, "after": params.after}
        driver_faults.set_faults(proc.root, node, proc.driver, faults={**_current(path), "crash_at": crash})
        stop = threading.Event()
        watcher = threading.Thread(target=_watch, args=(ctx, proc, node, params.down.total_seconds(), stop),
                                   name=f"driver-crash-{node}", daemon=True)
        watcher.start()

        def undo(proc: FakeDriverProcess = proc, node: str = node, stop: threading.Event = stop,
                 watcher: threading.Thread = watcher) -> None:
            stop.set()
            watcher.join(timeout=35)
            driver_faults.clear_faults(proc.root, node, proc.driver)
            if not proc.alive:  # crashed and not yet back: the run's teardown expects a driver
                proc.start()

        ctx.on_undo(undo)
        ctx.note(f"crash armed at {params.point} (after {params.after}) on {node}")

