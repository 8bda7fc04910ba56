"""``load``: claim churn at a target rate while the rest of the timeline happens (chaos under load).

Runs ``draguard load``'s engine (locust in its own process) against the run's cluster and namespace
for ``duration``: operations that create and delete gangs, template claims and shared claims, each
timed to allocation, prepared, Running and fully released. What it measured (per operation kind the
count, errors and p50/p90/p99/max of each phase; the target and achieved rate; whether it fell
behind; what its own judging saw violated) goes to the step's result (:class:`LoadSummary`), which
every report renders; locust's CSV files and ``summary.json`` go to the run's record (``ctx.record``),
which the reports place at ``<report>/<scenario>/load-<step>/``.

The step fails (status ``error``, the reason in its detail) when the load cannot run or falls behind
its target rate (the engine's tolerance, :data:`BEHIND_RATIO`): chaos "under load" that did not
happen at the declared rate is not a pass. Mark the step ``optional`` to keep a best-effort load.
What the load breaks is judged by the run's invariants (the load's objects live in the run's
namespace) and against the scenario's expectations; the load's own checks are noted on the step.
A step with a duration runs alongside the others when the runner runs steps concurrently;
otherwise later steps wait for it.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field

from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.load.engine import BEHIND_RATIO, KINDS, LoadConfig, LoadResult, run_load
from draguard.harness.core.registry import FAULTS
from draguard.harness.result import LoadKind, LoadPhase, LoadSummary
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.deploy import sharing_config
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.format import Params, PositiveDuration
from draguard.harness.scenario.types import SharingStrategy


class LoadParams(Params):
    rate: float = Field(default=5.0, gt=0, le=10_000)
    """Target operations per second, all kinds together."""
    duration: PositiveDuration = timedelta(seconds=30)
    """How long operations are started."""
    kinds: list[str] = Field(default=list(KINDS), min_length=1, max_length=3)
    """Operation kinds: ``gang``, ``template``, ``shared``."""
    gang_size: int = Field(default=2, ge=1, le=64)
    """Pods per ``gang`` and ``shared`` operation."""
    devices_per_claim: int = Field(default=1, ge=1, le=128)
    device_class: str | None = None
    """The DeviceClass the claims request (default: the scenario's first)."""
    users: int | None = Field(default=None, ge=1, le=10_000)
    op_timeout: PositiveDuration = timedelta(seconds=60)
    """How long one operation may take to run, and again to be released."""
    sharing: SharingStrategy | None = None
    """The sharing strategy of ``shared`` claims (several pods on one claim must name one); default
    ``TimeSlicing`` on draguard's fake driver, none on another driver (set it, or its config, there)."""


@FAULTS.register("load", summary="churn claims at a target rate (locust) for a while", params=LoadParams)
def load(ctx: StepContext, params: LoadParams | None) -> None:
    params = params or LoadParams()
    unknown = sorted(set(params.kinds) - set(KINDS))
    if unknown:
        raise UsageError(f"step {ctx.step.name}: unknown load kinds {', '.join(unknown)}; known: {', '.join(KINDS)}")
    classes = [dc.name for dc in ctx.scenario.device_classes]
    device_class = params.device_class or (classes[0] if classes else ctx.scenario.driver.device_class)
    if not device_class or ctx.kubeconfig is None:
        raise UsageError(f"step {ctx.step.name}: the load needs a DeviceClass and the run's kubeconfig")
    sharing = params.sharing or ("TimeSlicing" if ctx.scenario.driver.kind == "fake" else None)
    ctx.before(UndoAction("none", {"why": "the load deletes what it created; leftovers carry the run label"}))
    config = LoadConfig(
        kubeconfig=ctx.kubeconfig, namespace=ctx.namespace, device_class=device_class,
        out_dir=ctx.record(f"load-{ctx.step.name}", f"the files of load step {ctx.step.name}: locust's CSV files, "
                           "summary.json"), rate=params.rate,
        duration=params.duration.total_seconds(), kinds=tuple(params.kinds), gang_size=params.gang_size,
        devices_per_claim=params.devices_per_claim, users=params.users,
        op_timeout=params.op_timeout.total_seconds(), run_label=ctx.run_id,
        shared_config=(sharing_config(ctx.driver_name, sharing),) if sharing else (),
    )  # fmt: skip
    result = run_load(config, ctx.kube)
    summary = load_summary(result, config.user_count, f"{ctx.scenario.name}/load-{ctx.step.name}")
    ctx.record_load(summary)
    ctx.fired(summary.operations_finished)  # no operation finished: the load never happened
    ctx.note(f"load: {summary.headline}")
    for name, found in summary.violations.items():
        ctx.note(f"load saw {name} violated: {found[0]}")
    if result.error or summary.fell_behind:
        raise HarnessError(f"step {ctx.step.name}: {_why_not(summary, result.error, params)}")


PHASES = ("allocated", "prepared", "running", "released")
"""The phases of an operation the load times, in order (locust request names of ``harness/load/users.py``)."""


def load_summary(result: LoadResult, users: int, files: str | None = None) -> LoadSummary:
    """The result model's view of what the load engine returned (its ``summary.json``)."""
    s = result.summary
    locust = s.get("locust") or {}
    entries = locust.get("entries") or []
    kinds = []
    for kind in [k for k in KINDS if any(e["kind"] == k for e in entries)]:
        mine = {e["name"]: e for e in entries if e["kind"] == kind}
        phases = tuple(
            LoadPhase(name, int(e["count"]), int(e["failures"]), float(e["p50_ms"]), float(e["p90_ms"]),
                      float(e["p99_ms"]), float(e["max_ms"]))
            for name in PHASES if (e := mine.get(name)) is not None
        )  # fmt: skip
        operations = int(mine["create"]["count"]) if "create" in mine else 0
        kinds.append(LoadKind(kind, operations, sum(int(e["failures"]) for e in mine.values()), phases))
    errors = sorted(locust.get("errors") or [], key=lambda e: -int(e.get("count", 1)))
    return LoadSummary(
        target_rate=float(s.get("target_rate", 0.0)), achieved_rate=float(s.get("achieved_rate", 0.0)),
        fell_behind=result.behind, behind_ratio=BEHIND_RATIO,
        duration=float((s.get("config") or {}).get("duration", 0.0)),
        operations_started=int(locust.get("operations_started", 0)),
        operations_finished=int(locust.get("operations_finished", 0)), users=users, kinds=tuple(kinds),
        violations={n: tuple(v) for n, v in result.violations.items() if v},
        errors=tuple(f"{e['kind']} {e['name']}: {e['error']} (×{e.get('count', 1)})" for e in errors[:10]),
        error=result.error, files=files,
    )  # fmt: skip


def _why_not(summary: LoadSummary, error: str | None, params: LoadParams) -> str:
    """Why a load step is not a pass: its load could not run, or did not reach its target rate."""
    if error:
        return f"the load could not run: {error}; {summary.headline}"
    need = summary.behind_ratio * summary.target_rate
    more = "more users (params.users)" if params.users else f"more users than the default {summary.users} (params.users)"
    return (f"the load fell behind its target rate: {summary.operations_started} operations started in "
            f"{summary.duration:g}s, {summary.achieved_rate:g}/s of the target {summary.target_rate:g}/s (it must "
            f"reach {summary.behind_ratio:.0%}, {need:g}/s); each of its {summary.users} users runs one operation at "
            f"a time, so operations slower than {summary.users / summary.target_rate:g}s hold it back: give it "
            f"{more} or a lower rate")  # fmt: skip
