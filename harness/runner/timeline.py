"""Concurrent timed steps: each chaos step runs on its own thread, at its own time or condition.

A step is due ``at`` a time after the workloads were created, ``when`` a condition on the pods is
reached, or ``after`` another step started (plus a delay). Every step waits and runs in its own
thread, so a step that lasts (``driver-down`` for 8 s) never delays another one. For each step the
player records when it was due, when it ran and when it finished, in seconds of the run's clock;
the runner turns that into a :class:`~draguard.harness.result.StepResult` with a status (late,
never ran, error, not fired).

``stop`` (set when the cleanup phase starts, or when the run fails) ends every wait: a step not yet
due then never runs, and a step sleeping through its duration (``ctx.sleep``) wakes and undoes
itself. Talks to: nothing but the callables it is given (no cluster), so tests drive it directly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..scenario.types import Condition, Step

__all__ = ["StepRun", "TimelinePlayer"]


@dataclass
class StepRun:
    """What happened to one step, in seconds of the run's clock."""

    step: Step
    due: float | None = None
    ran: float | None = None
    finished: float | None = None
    ok: bool = True
    detail: str = ""
    started: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def late(self) -> float:
        """Seconds it started after it was due (0 when it has no due time or did not run)."""
        if self.due is None or self.ran is None:
            return 0.0
        return max(0.0, self.ran - self.due)


class TimelinePlayer:
    """Plays ``steps``: ``start()`` spawns one thread per step; ``join()`` waits for all of them."""

    def __init__(
        self,
        steps: tuple[Step, ...] | list[Step],
        *,
        clock: Callable[[], float],
        condition: Callable[[Condition], bool],
        wait_for: Callable[[Callable[[], bool], float], bool],
        execute: Callable[[Step], tuple[bool, str]],
        stop: threading.Event,
    ) -> None:
        self.clock = clock
        self.condition = condition
        self.wait_for = wait_for
        self.execute = execute
        self.stop = stop
        self.runs = {s.name: StepRun(s) for s in steps}
        self._threads: list[threading.Thread] = []
        self.t0 = 0.0

    def start(self) -> None:
        """Start every step's clock now (``at`` is counted from this moment)."""
        self.t0 = self.clock()
        for run in self.runs.values():
            t = threading.Thread(target=self._play, args=(run,), name=f"step-{run.step.name}", daemon=True)
            t.start()
            self._threads.append(t)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every step finished (or gave up); False if some are still going at ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def _sleep_until(self, due: float) -> bool:
        """Sleep until the run clock reads ``due``; False if ``stop`` came first."""
        left = due - self.clock()
        return left <= 0 or not self.stop.wait(left)

    def _play(self, run: StepRun) -> None:
        step = run.step
        try:
            if step.at is not None:
                run.due = self.t0 + step.at.total_seconds()
                if not self._sleep_until(run.due):
                    run.detail = "the run moved on to cleanup before the step was due"
                    return
            elif step.after is not None:
                ref = self.runs[step.after.step]
                if not self._wait_started(ref, step.timeout.total_seconds()):
                    run.detail = f"step {ref.step.name} never started, so this step never became due"
                    return
                assert ref.ran is not None
                run.due = ref.ran + step.after.delay.total_seconds()
                if not self._sleep_until(run.due):
                    run.detail = "the run moved on to cleanup before the step was due"
                    return
            elif step.when is not None:
                cond = step.when
                if not self._wait(lambda: self.condition(cond), step.timeout.total_seconds()):
                    run.detail = (f"condition never reached within {step.timeout.total_seconds():.0f}s: "
                                  f"{cond.count} pod(s) of {cond.workload} {cond.phase}")
                    return
            run.ran = self.clock()
            run.started.set()
            run.ok, run.detail = self.execute(step)
        finally:
            if run.ran is not None:
                run.finished = self.clock()
            run.done.set()

    def _wait_started(self, ref: StepRun, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not ref.started.wait(0.05):
            if self.stop.is_set() or ref.done.is_set() or time.monotonic() >= deadline:
                return False
        return True

    def _wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait for ``predicate`` up to ``timeout``; False on timeout or ``stop``."""
        if self.wait_for(lambda: self.stop.is_set() or predicate(), timeout):
            return not self.stop.is_set() or predicate()
        return False
