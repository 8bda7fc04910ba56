"""Faults the fake driver simulates in its hardware and RPCs: reset, prepare and unprepare failures.

``reset-failure``: the device reset after unprepare fails (N times or for good) — with the
forget-before-reset bug this orphans the device. ``prepare-failure`` / ``prepare-hang`` /
``unprepare-failure``: NodePrepareResources / NodeUnprepareResources fail or hang. They are written
to the driver's fault file on each targeted node; the journal keeps the previous file to restore.

When the scenario puts the gRPC interposer in front of the driver (``driver.interpose``), the three
RPC faults are injected there instead, as rules in the interposer's fault file: that works for any
driver, with or without fault hooks of its own. A reset failure is hardware: fake driver only.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import Field

from draguard.harness.driver import faults as driver_faults
from draguard.harness.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.model import Params

from ._common import fake_driver

if TYPE_CHECKING:
    from draguard.harness.driver.process import FakeDriverProcess


class CountParams(Params):
    count: int | None = Field(default=None, ge=1, le=1_000_000)
    """How many times it fails; omit for every time (until the scenario ends)."""


class HangParams(Params):
    seconds: float = Field(default=30.0, ge=0, le=3600)
    """How long each prepare call hangs."""
    count: int | None = Field(default=None, ge=1, le=1_000_000)
    """How many calls hang; omit for every call."""


def _interpose(ctx: StepContext, rule: dict[str, Any]) -> bool:
    """Add ``rule`` (for each targeted node) to the interposer's faults; False when there is none."""
    path = ctx.handles.proxy_faults
    if ctx.handles.interposer is None or path is None:
        return False
    previous = path.read_text()
    rules = json.loads(previous).get("faults", [])
    for node in ctx.target_nodes(default="all"):
        rules.append({**rule, "node": node, "driver": ctx.handles.driver_name})
        ctx.note(f"interposer: {rule['action']} on {rule['method']} at {node}")
    ctx.before(UndoAction("write-file", {"path": str(path), "content": previous}))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"faults": rules}, indent=1) + "\n")
    tmp.replace(path)
    return True


def _count(params: CountParams | HangParams) -> dict[str, Any]:
    return {"count": params.count} if params.count else {}


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
    if not _interpose(ctx, {"method": "NodePrepareResources", "action": "error", "message": "injected prepare failure", **_count(params)}):
        _apply(ctx, "prepare_fail", {"claims": "all", **_count(params)})


@FAULTS.register("prepare-hang", summary="NodePrepareResources hangs on the targeted nodes", params=HangParams)
def prepare_hang(ctx: StepContext, params: HangParams | None) -> None:
    params = params or HangParams()
    if not _interpose(ctx, {"method": "NodePrepareResources", "action": "delay", "seconds": params.seconds, **_count(params)}):
        _apply(ctx, "prepare_hang", {"seconds": params.seconds, "claims": "all", **_count(params)})


@FAULTS.register("unprepare-failure", summary="NodeUnprepareResources fails on the targeted nodes", params=CountParams)
def unprepare_failure(ctx: StepContext, params: CountParams | None) -> None:
    params = params or CountParams()
    if not _interpose(ctx, {"method": "NodeUnprepareResources", "action": "error", "message": "injected unprepare failure", **_count(params)}):
        _apply(ctx, "unprepare_fail", {"claims": "all", **_count(params)})

