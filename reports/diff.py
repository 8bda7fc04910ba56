"""``draguard diff OLD NEW``: what changed between two runs (report directories or verdict files).

Every case of a run has a stable key (``scenario/invariant/NAME``, ``scenario/step/NAME``,
``scenario/run``, ``check/ID``) and an outcome (passed, failed, skipped). The diff lists:

- **new failures**: failed in NEW, passed, skipped or absent in OLD (exit 1 when there is one);
- **fixes**: passed in NEW, failed in OLD;
- **flips**: the outcome changed although the scenario ran with the same inputs (seed, driver,
  mutant, Kubernetes version) — likely flaky;
- **evidence changes**: the same outcome, different evidence (messages, devices);
- **duration changes** beyond a threshold (relative and absolute), per scenario and per step.

A violated invariant fails its case whether the scenario named it or not (every violation counts);
one the scenario ignores (``expect.ignore``) is skipped, its reason the first line of its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from draguard.harness.result import RunResult, ScenarioResult

__all__ = ["Case", "RunDiff", "cases", "diff_runs", "print_diff"]


@dataclass(frozen=True)
class Case:
    key: str
    outcome: str
    """``passed``, ``failed`` or ``skipped``."""
    evidence: tuple[str, ...] = ()
    duration: float | None = None
    inputs: tuple[Any, ...] = ()


def _inputs(s: ScenarioResult) -> tuple[Any, ...]:
    env = s.environment
    driver = env.get("driver") or {}
    return (s.seed, driver.get("name"), driver.get("mutant"), env.get("kubernetesVersion"), s.source)


def cases(result: RunResult) -> dict[str, Case]:
    out: dict[str, Case] = {}
    for s in result.scenarios:
        inputs = _inputs(s)
        run = "skipped" if s.not_applicable is not None else "passed" if s.ok else "failed"
        out[f"{s.name}/run"] = Case(f"{s.name}/run", run, tuple(m for m in (s.error or s.not_applicable,) if m),
                                    s.duration, inputs)
        for name, inv in s.invariants.items():
            ignored = inv.expected == "ignore"
            outcome = "skipped" if inv.status == "not-checked" or ignored else "passed" if inv.met else "failed"
            ev = tuple(sorted(f"{v.message} [{', '.join(v.devices)}]" for v in inv.violations))
            if ignored:
                ev = (f"ignored ({inv.reason}): {inv.status}", *ev)
            out[f"{s.name}/invariant/{name}"] = Case(f"{s.name}/invariant/{name}", outcome, ev, None, inputs)
        for st in s.steps:
            ok = st.ok and st.status == "ok"
            took = st.finished - st.ran if st.finished is not None and st.ran is not None else None
            out[f"{s.name}/step/{st.name}"] = Case(f"{s.name}/step/{st.name}", "passed" if ok else "skipped" if st.optional else "failed",
                                                   (st.detail,) if not ok else (), took, inputs)
    for c in result.checks:
        outcome = {"passed": "passed", "skipped": "skipped", "not-applicable": "skipped"}.get(c.status, "failed")
        out[f"check/{c.id}"] = Case(f"check/{c.id}", outcome, tuple(sorted(e.message for e in c.evidence)), c.duration)
    return out


@dataclass
class RunDiff:
    new_failures: list[tuple[Case | None, Case]] = field(default_factory=list)
    fixes: list[tuple[Case, Case]] = field(default_factory=list)
    flips: list[tuple[Case, Case]] = field(default_factory=list)
    evidence: list[tuple[Case, Case]] = field(default_factory=list)
    durations: list[tuple[Case, Case]] = field(default_factory=list)
    gone: list[Case] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        return bool(self.new_failures)

    def as_dict(self) -> dict[str, Any]:
        def pair(o: Case | None, n: Case) -> dict[str, Any]:
            return {"case": n.key, "old": o.outcome if o else None, "new": n.outcome,
                    "oldEvidence": list(o.evidence) if o else [], "newEvidence": list(n.evidence),
                    "oldSeconds": o.duration if o else None, "newSeconds": n.duration}
        return {"newFailures": [pair(o, n) for o, n in self.new_failures], "fixes": [pair(o, n) for o, n in self.fixes],
                "flips": [pair(o, n) for o, n in self.flips], "evidenceChanged": [pair(o, n) for o, n in self.evidence],
                "durationChanged": [pair(o, n) for o, n in self.durations], "gone": [c.key for c in self.gone]}


def diff_runs(old: RunResult, new: RunResult, *, threshold: float = 0.25, min_seconds: float = 2.0) -> RunDiff:
    """Compare two runs; a duration change counts when it is above ``threshold`` (relative) and ``min_seconds``."""
    a, b = cases(old), cases(new)
    d = RunDiff()
    for key, n in b.items():
        o = a.get(key)
        if n.outcome == "failed" and (o is None or o.outcome != "failed"):
            d.new_failures.append((o, n))
        elif o is not None and o.outcome == "failed" and n.outcome == "passed":
            d.fixes.append((o, n))
        if o is not None and o.outcome != n.outcome and o.inputs == n.inputs and "skipped" not in (o.outcome, n.outcome):
            d.flips.append((o, n))
        if o is not None and o.outcome == n.outcome and o.evidence != n.evidence:
            d.evidence.append((o, n))
        if o is not None and o.duration is not None and n.duration is not None:
            delta = n.duration - o.duration
            if abs(delta) >= min_seconds and abs(delta) > threshold * max(o.duration, 1e-9):
                d.durations.append((o, n))
    d.gone = [c for k, c in a.items() if k not in b]
    return d


def print_diff(d: RunDiff, console: Console | None = None) -> None:
    console = console or Console(log_path=False, soft_wrap=True)

    def section(title: str, style: str, items: list[str]) -> None:
        if items:
            console.print(f"[{style}]{title} ({len(items)})[/{style}]")
            for line in items:
                console.print(f"  {line}", highlight=False)

    section("new failures", "bold red", [f"{n.key}: {o.outcome if o else 'absent'} → failed"
                                          + (f": {n.evidence[0]}" if n.evidence else "") for o, n in d.new_failures])
    section("fixes", "bold green", [f"{n.key}: failed → {n.outcome}" for o, n in d.fixes])
    section("flips with the same inputs (flaky?)", "bold yellow", [f"{n.key}: {o.outcome} → {n.outcome}" for o, n in d.flips])
    section("evidence changed", "bold", [f"{n.key}: {'; '.join(o.evidence) or '-'} → {'; '.join(n.evidence) or '-'}"
                                         for o, n in d.evidence])
    section("duration changed", "bold", [f"{n.key}: {o.duration:.1f}s → {n.duration:.1f}s" for o, n in d.durations
                                         if o.duration is not None and n.duration is not None])
    section("no longer run", "dim", [c.key for c in d.gone])
    if not any((d.new_failures, d.fixes, d.flips, d.evidence, d.durations, d.gone)):
        console.print("no changes")
