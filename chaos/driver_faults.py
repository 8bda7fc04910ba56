"""Faults the fake driver simulates in its hardware and RPCs: reset, prepare and unprepare failures.

``reset-failure``: the device reset after unprepare fails (N times or for good), on every device or
only the listed ``devices`` — with the forget-before-reset bug this orphans the device; on one device
of a pod with several claims, it makes one claim of a NodeUnprepareResources call fail while the others
succeed (the batch-abort-on-error bug strands them). ``reset-slow``: resets take longer (a driver that
holds its lock across the reset stalls every other call meanwhile). ``prepare-failure`` / ``prepare-hang`` /
``unprepare-failure``: NodePrepareResources / NodeUnprepareResources fail or hang. They are switched
on in the fake driver of each targeted node through ``ctx.fake_driver(node).set_fault``, which
journals the previous fault file to restore.

When the scenario puts the gRPC interposer in front of the driver (``driver.interpose``), the three
RPC faults are injected there instead, as validated interposer rules: that works for any driver,
with or without fault hooks of its own. A reset failure is hardware: fake driver only.

A fault with a ``count`` stays until it has fired that often (it ends by itself); one without lasts
until the cleanup phase starts, so that the workloads can still be cleaned up and judged.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from draguard.harness.proxy.call_rules import Action, FaultRule
from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.scenario.format import DnsLabel, Params


class CountParams(Params):
    count: int | None = Field(default=None, ge=1, le=1_000_000)
    """How many times it fails; omit for every time (until the cleanup phase)."""


class HangParams(Params):
    seconds: float = Field(default=30.0, ge=0, le=3600)
    """How long each prepare call hangs."""
    count: int | None = Field(default=None, ge=1, le=1_000_000)
    """How many calls hang; omit for every call."""


def _count(params: CountParams | HangParams | SlowParams) -> dict[str, Any]:
    return {"count": params.count} if params.count else {}


def _apply(ctx: StepContext, kind: str, spec: dict[str, Any], until_cleanup: bool) -> None:
    for node in ctx.target_nodes(default="all"):
        ctx.fake_driver(node).set_fault(kind, spec, until_cleanup=until_cleanup)


class ResetFailParams(CountParams):
    devices: list[DnsLabel] | None = Field(default=None, min_length=1, max_length=128)
    """Only the resets of these devices fail (their names in the node's ResourceSlice); omit for every device."""


@FAULTS.register("reset-failure", summary="device resets fail on the targeted nodes", params=ResetFailParams,
                 needs=("fake-driver",))
def reset_failure(ctx: StepContext, params: ResetFailParams | None) -> None:
    params = params or ResetFailParams()
    spec: dict[str, Any] = {"count": params.count} if params.count else {"forever": True}
    if params.devices is not None:
        for node in ctx.target_nodes(default="all"):
            ctx.require_devices(node, params.devices)
        spec["devices"] = list(params.devices)
    _apply(ctx, "reset_fail", spec, params.count is None)


@FAULTS.register("prepare-failure", summary="NodePrepareResources fails on the targeted nodes", params=CountParams,
                 needs=("rpc-faults",))
def prepare_failure(ctx: StepContext, params: CountParams | None) -> None:
    params = params or CountParams()
    rule = FaultRule(method="NodePrepareResources", action=Action.ERROR, message="injected prepare failure",
                     count=params.count)
    if not ctx.inject_rpc_fault(rule):
        _apply(ctx, "prepare_fail", {"claims": "all", **_count(params)}, params.count is None)


@FAULTS.register("prepare-hang", summary="NodePrepareResources hangs on the targeted nodes", params=HangParams,
                 needs=("rpc-faults",))
def prepare_hang(ctx: StepContext, params: HangParams | None) -> None:
    params = params or HangParams()
    rule = FaultRule(method="NodePrepareResources", action=Action.DELAY, seconds=params.seconds, count=params.count)
    if not ctx.inject_rpc_fault(rule):
        _apply(ctx, "prepare_hang", {"seconds": params.seconds, "claims": "all", **_count(params)},
               params.count is None)


@FAULTS.register("unprepare-failure", summary="NodeUnprepareResources fails on the targeted nodes",
                 params=CountParams, needs=("rpc-faults",))
def unprepare_failure(ctx: StepContext, params: CountParams | None) -> None:
    params = params or CountParams()
    rule = FaultRule(method="NodeUnprepareResources", action=Action.ERROR, message="injected unprepare failure",
                     count=params.count)
    if not ctx.inject_rpc_fault(rule):
        _apply(ctx, "unprepare_fail", {"claims": "all", **_count(params)}, params.count is None)


class SlowParams(Params):
    seconds: float = Field(default=20.0, gt=0, le=600)
    """How much longer each device reset takes."""
    count: int | None = Field(default=None, ge=1, le=1_000_000)
    """How many resets are slow; omit for every reset (until the cleanup phase)."""


@FAULTS.register("reset-slow", summary="device resets take longer on the targeted nodes (a drain, a slow GPU reset)",
                 params=SlowParams, needs=("fake-driver",))
def reset_slow(ctx: StepContext, params: SlowParams | None) -> None:
    params = params or SlowParams()
    _apply(ctx, "reset_slow", {"seconds": params.seconds, **_count(params)}, params.count is None)
