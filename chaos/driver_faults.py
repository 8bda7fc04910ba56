"""Faults the fake driver simulates in its hardware and RPCs: reset, prepare and unprepare failures.

``reset-failure``: the device reset after unprepare fails (N times or for good) — with the
forget-before-reset bug this orphans the device. ``prepare-failure`` / ``prepare-hang`` /
``unprepare-failure``: NodePrepareResources / NodeUnprepareResources fail or hang. They are written
to the driver's fault file on each targeted node; the journal keeps the previous file to restore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from draguard.harness.driver import faults as driver_faults
from draguard.harness.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.model import Params

from ._common import fake_driver

if TYPE_CHECKING:
    from draguard.harness.driver.process import FakeDriverProcess


class CountParams(Params):
    count: int | None = None
    """How many times it fails; omit for every time (until the scenario ends)."""


class HangParams(Params):
    seconds: float = 30.0
    """How long each prepare call hangs."""
    count: int | None = None
    """How many calls hang; omit for every call."""


def _apply(ctx: StepContext, key: str, value: dict[str, Any]) -> None:
    for node in ctx.target_nodes(default="all"):
        proc = fake_driver(ctx, node)
        path = driver_faults.faults_path(proc.root, node, proc.driver)
        previous = path.read_text() if path.exists() else None
        ctx.before(UndoAction("write-file", {"path": str(path), "content": previous}))
        driver_faults.set_faults(proc.root, node, proc.driver, **{key: value})

        def clear(proc: FakeDriverProcess = proc, node: str = node) -> None:
            driver_faults.clear_faults(proc.root, node, proc.driver)

        ctx.on_undo(clear)
        ctx.note(f"{key} {value} on {node}")


@FAULTS.register("reset-failure", summary="device resets fail on the targeted nodes", params=CountParams)
def reset_failure(ctx: StepContext, params: CountParams | None) -> None:
    params = params or CountParams()
    _apply(ctx, "reset_fail", {"count": params.count} if params.count else {"forever": True})


@FAULTS.register("prepare-failure", summary="NodePrepareResources fails on the targeted nodes", params=CountParams)
def prepare_failure(ctx: StepContext, params: CountParams | None) -> None:
    params = params or CountParams()
    _apply(ctx, "prepare_fail", {"claims": "all", **({"count": params.count} if params.count else {})})


@FAULTS.register("prepare-hang", summary="NodePrepareResources hangs on the targeted nodes", params=HangParams)
def prepare_hang(ctx: StepContext, params: HangParams | None) -> None:
    params = params or HangParams()
    _apply(ctx, "prepare_hang", {"seconds": params.seconds, "claims": "all",
                                 **({"count": params.count} if params.count else {})})


@FAULTS.register("unprepare-failure", summary="NodeUnprepareResources fails on the targeted nodes", params=CountParams)
def unprepare_failure(ctx: StepContext, params: CountParams | None) -> None:
    params = params or CountParams()
    _apply(ctx, "unprepare_fail", {"claims": "all", **({"count": params.count} if params.count else {})})


Kind = Literal["reset-failure", "prepare-failure", "prepare-hang", "unprepare-failure"]
