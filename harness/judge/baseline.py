"""A run judged against a baseline run: a driver much slower than the baseline's says so in the verdict.

A driver change whose only symptom is time (slower prepares, a lock waited on where no call is seen
waiting) leaves every invariant held and every scenario met. ``draguard run --baseline DIR`` reads a
finished run of the same scenarios (typically the driver's previous release, or the same cluster last
night) and adds to each scenario that ran in both a
``baseline`` expectation: its wall time is at most ``max_slowdown`` times the baseline's, or within
``min_seconds`` of it (short scenarios vary by seconds on a busy machine). A scenario the baseline did not
meet, did not run, or ran under another name is not compared, and says why. Pure: takes and changes
:class:`~draguard.harness.result.RunResult` objects; reading the baseline's files is the caller's.
"""

from __future__ import annotations

from draguard.harness.result import ExpectationResult, RunResult

__all__ = ["MAX_SLOWDOWN", "MIN_SECONDS", "judge_against"]

MAX_SLOWDOWN = 2.0
"""A scenario may take up to this many times its baseline's wall time."""
MIN_SECONDS = 10.0
"""A slowdown of fewer seconds than this never counts, whatever the ratio."""


def judge_against(result: RunResult, baseline: RunResult, source: str, max_slowdown: float = MAX_SLOWDOWN,
                  min_seconds: float = MIN_SECONDS) -> list[str]:
    """Add a ``baseline`` expectation to each scenario of ``result`` that ran and that ``baseline`` met;
    the lines say which scenarios were not compared and why."""
    before = {s.name: s for s in baseline.scenarios}
    skipped = []
    rule = f"at most {max_slowdown:g}x the wall time of the baseline run ({source})"
    for sc in result.scenarios:
        if sc.not_applicable is not None or sc.error is not None:
            continue
        base = before.get(sc.name)
        if base is None or base.not_applicable is not None:
            skipped.append(f"{sc.name}: not compared: the baseline run did not run it")
            continue
        if not base.ok:
            skipped.append(f"{sc.name}: not compared: the baseline run did not meet it ({base.outcome})")
            continue
        slower = sc.duration - base.duration
        ratio = sc.duration / base.duration if base.duration > 0 else float("inf")
        met = ratio <= max_slowdown or slower < min_seconds
        detail = (f"{sc.duration:.1f}s, {ratio:.1f}x the baseline's {base.duration:.1f}s"
                  + ("" if met else f": the driver is much slower than in the baseline run ({slower:.0f}s more)"))
        sc.expectation_results.append(ExpectationResult("baseline", rule, met, detail))
    return skipped
