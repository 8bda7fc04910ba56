"""The timeline player: steps run concurrently at their own times; each records due, ran, finished.

No cluster: the player only gets callables (clock, condition, execute), so these tests drive it
with real threads and a real clock, and check the order and the statuses it produces.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from draguard.harness.result import Evidence, ScenarioResult, StepResult
from draguard.harness.runner.runner import step_status
from draguard.harness.runner.timeline import StepRun, TimelinePlayer
from draguard.harness.scenario.types import After, Condition, Step

T0 = time.monotonic()


def clock() -> float:
    return time.monotonic() - T0


def step(name: str, *, at: float | None = None, when: Condition | None = None, after: After | None = None,
         tolerance: float = 0.5, timeout: float = 2.0, optional: bool = False) -> Step:
    return Step(index=0, name=name, at=timedelta(seconds=at) if at is not None else None, when=when, fault="x",
                target=None, params=None, after=after, tolerance=timedelta(seconds=tolerance),
                timeout=timedelta(seconds=timeout), optional=optional)


def polling_wait(predicate, timeout):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def play(steps: list[Step], execute, condition=lambda c: False, stop: threading.Event | None = None):  # type: ignore[no-untyped-def]
    player = TimelinePlayer(steps, clock=clock, condition=condition, wait_for=polling_wait, execute=execute,
                            stop=stop or threading.Event())
    player.start()
    return player


def test_a_step_that_lasts_does_not_delay_a_later_step() -> None:
    def execute(s: Step) -> tuple[bool, str]:
        if s.name == "long":
            time.sleep(1.5)  # a driver-down with a duration
        return True, s.name

    player = play([step("long", at=0.0), step("later", at=0.3)], execute)
    assert player.join(timeout=5)
    long, later = player.runs["long"], player.runs["later"]
    assert later.ran is not None and long.finished is not None
    assert later.ran < long.finished, "the later step waited for the long one"
    assert later.late < 0.3 and step_status(later, None) == "ok"
    assert later.due == player.t0 + 0.3


def test_an_after_step_is_due_its_delay_after_the_step_it_follows_started() -> None:
    order: list[str] = []

    def execute(s: Step) -> tuple[bool, str]:
        order.append(s.name)
        if s.name == "down":
            time.sleep(1.0)
        return True, ""

    player = play([step("down", at=0.1), step("inside", after=After("down", timedelta(seconds=0.4)))], execute)
    assert player.join(timeout=5)
    down, inside = player.runs["down"], player.runs["inside"]
    assert down.ran is not None and down.finished is not None and inside.ran is not None
    assert inside.due == down.ran + 0.4
    assert down.ran < inside.ran < down.finished, "the after-step must run while the step it follows lasts"


def test_a_condition_never_reached_leaves_the_step_never_ran_with_the_reason() -> None:
    cond = Condition("llm", "Running", 2)
    player = play([step("never", when=cond, timeout=0.3)], lambda s: (True, ""))
    assert player.join(timeout=5)
    run = player.runs["never"]
    assert run.ran is None and step_status(run, None) == "never-ran"
    assert "condition never reached" in run.detail and "2 pod(s) of llm Running" in run.detail


def test_a_step_that_follows_one_that_never_ran_never_runs_either() -> None:
    cond = Condition("llm", "Running", 1)
    player = play([step("first", when=cond, timeout=0.2), step("second", after=After("first", timedelta(0)))],
                  lambda s: (True, ""))
    assert player.join(timeout=5)
    assert step_status(player.runs["second"], None) == "never-ran"
    assert "never started" in player.runs["second"].detail


def test_stop_ends_the_waits_of_steps_not_yet_due() -> None:
    stop = threading.Event()
    player = play([step("far", at=30.0)], lambda s: (True, ""), stop=stop)
    stop.set()
    assert player.join(timeout=2)
    assert player.runs["far"].ran is None and "cleanup" in player.runs["far"].detail


def test_a_step_is_late_when_it_started_more_than_its_tolerance_after_it_was_due() -> None:
    run = StepRun(step("s", at=1.0, tolerance=0.5), due=1.0, ran=1.4)
    assert step_status(run, 1) == "ok"
    run.ran = 1.6
    assert step_status(run, 1) == "late"


def test_error_and_not_fired_statuses() -> None:
    assert step_status(StepRun(step("s", at=0.0), due=0.0, ran=0.0, ok=False), None) == "error"
    assert step_status(StepRun(step("s", at=0.0), due=0.0, ran=0.0), 0) == "not-fired"
    assert step_status(StepRun(step("s", at=0.0), due=0.0, ran=0.0), None) == "ok"


def test_a_failed_step_fails_the_scenario_unless_it_is_optional() -> None:
    result = ScenarioResult("s", None, 0)
    result.steps.append(StepResult("a", "x", 0.0, False, status="not-fired"))
    assert not result.ok
    result.steps[0] = StepResult("a", "x", 0.0, False, status="not-fired", optional=True)
    assert result.ok
    d = result.as_dict()["steps"][0]
    assert {k: d[k] for k in ("status", "optional", "fired", "due", "ran", "finished")} == {
        "status": "not-fired", "optional": True, "fired": None, "due": None, "ran": None, "finished": None}


def test_a_breach_with_a_grace_period_counts_once_it_lasted_that_long_from_when_it_started() -> None:
    from draguard.harness.invariants import Violation
    from draguard.harness.runner.runner import record_breaches

    def partial(t: float, grace: float = 30.0) -> Violation:
        return Violation("gang-atomic", f"gang partial at {t}", ("Pod/ns/a-0",), (), t, key="gang a", grace=grace)

    seen: dict[tuple[str, str], float] = {}
    recorded: dict[str, Evidence] = {}
    assert record_breaches("gang-atomic", [partial(5.0)], 5.0, seen, recorded) == []
    assert record_breaches("gang-atomic", [partial(20.0)], 20.0, seen, recorded) == []
    assert record_breaches("gang-atomic", [], 21.0, seen, recorded) == []  # it healed: starts over
    assert record_breaches("gang-atomic", [partial(40.0)], 40.0, seen, recorded) == []
    [(key, evidence)] = record_breaches("gang-atomic", [partial(71.0)], 71.0, seen, recorded)
    assert key == "gang a" and evidence.time == 40.0 and evidence.message == "gang partial at 71.0"
    assert record_breaches("gang-atomic", [partial(72.0)], 72.0, seen, recorded) == []  # once
    # no grace (a settled gang): at once
    [(_, now)] = record_breaches("gang-atomic", [Violation("gang-atomic", "b", key="gang b", time=3.0)], 3.0, seen, {})
    assert now.time == 3.0
