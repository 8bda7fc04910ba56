"""The ``load`` step (claim churn inside a scenario), its load engine replaced: what the engine measured
reaches the step's result, and a load that fell behind its target rate or could not run is an
``error`` step that fails the scenario, with the reason in its detail. No cluster."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import draguard.chaos  # noqa: F401  (registers fault kinds)
import draguard.chaos.load as load_step
from draguard.harness.core.errors import HarnessError
from draguard.harness.load.engine import BEHIND_RATIO, LoadConfig, LoadResult
from draguard.harness.core.registry import FAULTS
from draguard.harness.result import LoadPhase
from draguard.harness.runner.context import RunHandles
from draguard.harness.runner.journal import Journal
from draguard.harness.judge.observe import Timeline
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.runner.timeline import StepRun
from draguard.harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]


def _entry(kind: str, name: str, count: int, p50: float, failures: int = 0) -> dict[str, Any]:
    return {"kind": kind, "name": name, "count": count, "failures": failures, "p50_ms": p50, "p90_ms": p50 * 2,
            "p99_ms": p50 * 3, "max_ms": p50 * 3 + 1, "mean_ms": p50}  # fmt: skip


def _engine_result(config: LoadConfig, started: int, error: str | None = None) -> LoadResult:
    """What run_load returns for ``started`` operations over the config's duration (as engine.py computes it)."""
    entries = []
    for kind, share in (("gang", 0.5), ("template", 0.25), ("shared", 0.25)):
        n = round(started * share)
        entries += [_entry(kind, "create", n, 40), _entry(kind, "allocated", n, 300), _entry(kind, "prepared", n, 500),
                    _entry(kind, "running", n, 600, failures=1 if kind == "template" else 0),
                    _entry(kind, "released", n, 200)]  # fmt: skip
    achieved = started / config.duration
    behind = achieved < BEHIND_RATIO * config.rate
    locust = {"wall_s": config.duration + 1, "operations_started": started, "operations_finished": started,
              "entries": entries, "errors": [{"kind": "template", "name": "running", "error": "op: not running after 60s",
                                              "count": 1}]}  # fmt: skip
    summary = {"config": {"duration": config.duration, "rate": config.rate}, "target_rate": config.rate,
               "achieved_rate": round(achieved, 3), "fell_behind": behind, "locust": locust,
               "invariants": {}, "checked": [], "error": error}  # fmt: skip
    return LoadResult(summary=summary, violations={}, behind=behind, error=error)


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runner:
    """driver-restart-under-churn's runner with its run's handles in place, but no cluster."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    scenario = load_scenario(ROOT / "scenarios" / "driver-restart-under-churn.yaml")
    r = Runner(scenario, RunOptions(backend="local"))
    r._handles = RunHandles(run_id=r.run_id, scenario=scenario, kube=None, namespace="ns",  # type: ignore[arg-type]
                            journal=Journal(r.run_id, tmp_path / "journal"), timeline=Timeline(),
                            observer=None, node_root=tmp_path,  # type: ignore[arg-type]
                            kubeconfig=str(tmp_path / "kubeconfig"), record=r.result.record)
    return r


def _run_churn(runner: Runner, monkeypatch: pytest.MonkeyPatch, started: int, error: str | None = None) -> Any:
    """Run the scenario's ``churn`` step as the runner does, the engine replaced; its StepResult."""
    seen: list[LoadConfig] = []

    def fake_run_load(config: LoadConfig, kube: Any) -> LoadResult:
        seen.append(config)
        return _engine_result(config, started, error)

    monkeypatch.setattr(load_step, "run_load", fake_run_load)
    churn = next(s for s in runner.scenario.timeline if s.fault == "load")
    ok, detail = runner._run_step(churn)
    runner._player = SimpleNamespace(runs={churn.name: StepRun(churn, due=0.0, ran=0.0, finished=20.0, ok=ok,
                                                               detail=detail)})  # type: ignore[assignment]
    runner._count_fired()
    runner._finish_steps()
    [config] = seen
    assert config.rate == 3 and config.duration == 20
    return next(s for s in runner.result.steps if s.name == churn.name)


def test_a_load_that_kept_up_passes_with_its_percentiles_in_the_step_result(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = _run_churn(runner, monkeypatch, started=60)  # 3/s over 20 s
    assert step.status == "ok" and step.ok and step.fired == 60
    load = step.load
    assert load is not None and not load.fell_behind and load.achieved_rate == 3.0 and load.target_rate == 3.0
    assert load.behind_ratio == BEHIND_RATIO and load.users == 12 and load.duration == 20.0
    assert [k.kind for k in load.kinds] == ["gang", "template", "shared"]
    gang = load.kinds[0]
    assert gang.operations == 30 and gang.errors == 0
    assert [p.phase for p in gang.phases] == ["allocated", "prepared", "running", "released"]
    assert gang.phase("running") == LoadPhase("running", 30, 0, 600, 1200, 1800, 1801)
    assert load.kinds[1].errors == 1 and load.errors == ("template running: op: not running after 60s (×1)",)
    assert load.files == "driver-restart-under-churn/load-churn"
    assert "load: target 3/s, achieved 3/s: kept up; 60 operations started" in step.detail
    assert runner.result.steps[0].as_dict()["load"]["kinds"][0]["phases"][2]["p99Ms"] == 1800


def test_a_load_that_fell_behind_its_target_rate_is_an_error_step_that_fails_the_scenario(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = _run_churn(runner, monkeypatch, started=36)  # 1.8/s of 3/s: under 90 %
    assert step.status == "error" and not step.ok
    assert step.load is not None and step.load.fell_behind and step.load.achieved_rate == 1.8, "its numbers stay"
    assert step.detail == (
        "step churn: the load fell behind its target rate: 36 operations started in 20s, 1.8/s of the target 3/s "
        "(it must reach 90%, 2.7/s); each of its 12 users runs one operation at a time, so operations slower than "
        "4s hold it back: give it more users than the default 12 (params.users) or a lower rate")
    assert not runner.result.ok
    assert any(f.startswith("step churn (load): error step churn: the load fell behind") for f in runner.result.shortfalls)


def test_a_load_just_within_the_engines_tolerance_passes(runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    step = _run_churn(runner, monkeypatch, started=54)  # 2.7/s: exactly 90 % of 3/s
    assert step.status == "ok" and step.load is not None and not step.load.fell_behind


def test_a_load_that_could_not_run_is_an_error_step_with_what_it_measured(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = _run_churn(runner, monkeypatch, started=60, error="the locust process exited with 1 (see locust.log)")
    assert step.status == "error"
    assert step.detail.startswith("step churn: the load could not run: the locust process exited with 1")
    assert step.load is not None and step.load.error == "the locust process exited with 1 (see locust.log)"


def test_an_optional_load_step_that_fell_behind_does_not_fail_the_scenario(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    churn = next(s for s in runner.scenario.timeline if s.fault == "load")
    optional = dataclasses.replace(churn, optional=True)
    runner.scenario = dataclasses.replace(runner.scenario, timeline=tuple(
        optional if s.name == churn.name else s for s in runner.scenario.timeline))
    step = _run_churn(runner, monkeypatch, started=20)
    assert step.status == "error" and step.optional
    assert all(not f.startswith("step churn") for f in runner.result.shortfalls)


def test_the_engine_raising_is_an_error_step_without_a_load(runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    def cannot_start(config: LoadConfig, kube: Any) -> LoadResult:
        raise HarnessError("resourceclaimtemplates: forbidden")

    monkeypatch.setattr(load_step, "run_load", cannot_start)
    churn = next(s for s in runner.scenario.timeline if s.fault == "load")
    assert FAULTS.get("load").target is load_step.load
    ok, detail = runner._run_step(churn)
    assert not ok and detail == "resourceclaimtemplates: forbidden"
    assert runner._contexts[churn.name].load is None
