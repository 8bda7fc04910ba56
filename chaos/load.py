"""``load``: claim churn at a target rate while the rest of the timeline happens (chaos under load).

Runs ``draguard load``'s engine (locust in its own process) against the run's cluster and namespace
for ``duration``: operations that create and delete gangs, template claims and shared claims, each
timed to allocation, prepared, Running and fully released. Locust's CSV files and ``summary.json``
go to ``<report>/<scenario>/load-<step>/``. The step fails when the load cannot run; what the load
breaks is judged by the run's invariants (the load's objects live in the run's namespace) and by
the load's own checks, noted on the step. A step with a duration runs alongside the others when
the runner runs steps concurrently; otherwise later steps wait for it.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field

from draguard.harness.errors import HarnessError, UsageError
from draguard.harness.load.engine import KINDS, LoadConfig, run_load
from draguard.harness.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.deploy import sharing_config
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.model import Params, PositiveDuration
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
    if not device_class or ctx.kubeconfig is None or ctx.report_dir is None:
        raise UsageError(f"step {ctx.step.name}: the load needs a DeviceClass and the run's kubeconfig")
    sharing = params.sharing or ("TimeSlicing" if ctx.scenario.driver.kind == "fake" else None)
    ctx.before(UndoAction("none", {"why": "the load deletes what it created; leftovers carry the run label"}))
    config = LoadConfig(
        kubeconfig=ctx.kubeconfig, namespace=ctx.namespace, device_class=device_class,
        report_dir=ctx.report_dir / f"load-{ctx.step.name}", rate=params.rate,
        duration=params.duration.total_seconds(), kinds=tuple(params.kinds), gang_size=params.gang_size,
        devices_per_claim=params.devices_per_claim, users=params.users,
        op_timeout=params.op_timeout.total_seconds(), run_label=ctx.run_id,
        shared_config=(sharing_config(ctx.driver_name, sharing),) if sharing else (),
    )  # fmt: skip
    result = run_load(config, ctx.kube)
    s = result.summary
    ctx.fired(int(s['locust'].get('operations_finished', 0)))  # no operation finished: the load never happened
    running = [e for e in s["locust"].get("entries", []) if e["name"] == "running"]
    p99 = max((e["p99_ms"] for e in running), default=0)
    failures = sum(e["failures"] for e in s["locust"].get("entries", []))
    ctx.note(f"load: target {s['target_rate']}/s, achieved {s['achieved_rate']}/s"
             f"{' (fell behind)' if result.behind else ''}, {s['locust'].get('operations_finished', 0)} operations, "
             f"p99 to Running {p99:.0f} ms, {failures} failed request(s)")  # fmt: skip
    for name, found in result.violations.items():
        ctx.note(f"load saw {name} violated: {found[0]}")
    if result.error:
        raise HarnessError(f"step {ctx.step.name}: {result.error}")
