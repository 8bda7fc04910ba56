"""``junit``: JUnit XML for CI (``junit.xml``), read by GitLab, Jenkins, GitHub test reporters.

One ``<testsuite>`` per scenario with one ``<testcase>`` per invariant and per step, plus a suite for
sanity/conformance checks. A case that did not meet its expectation is a ``<failure>`` whose message
is the first piece of evidence (all of it in the body); an invariant never checked is ``<skipped>``
with the reason, and so is one the scenario ignores (``expect.ignore``: its reason, and its
violations if it had any); a violated invariant the scenario did not name is a failure like any other; a scenario stopped by an error is an ``<error>`` case of the error's class. A
``load`` step's case carries its rates and per-phase times in its output (or its failure's body).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from draguard.harness.result import (CheckResult, Evidence, ExpectationResult, InvariantResult, LoadSummary, RunResult, ScenarioResult,
                                     StepResult)

from .files import write_atomic
from .registry import REPORTS

__all__ = ["render", "to_xml"]

FILE = "junit.xml"


def _evidence_text(evidence: list[Evidence]) -> str:
    lines = []
    for e in evidence:
        lines.append(e.message + (f" (t={e.time:.1f}s)" if e.time is not None else ""))
        if e.objects:
            lines.append("  objects: " + ", ".join(e.objects))
        if e.devices:
            lines.append("  devices: " + ", ".join(e.devices))
    return "\n".join(lines)


def _invariant_case(suite: ET.Element, s: ScenarioResult, inv: InvariantResult) -> str:
    case = ET.SubElement(suite, "testcase", classname=f"draguard.scenario.{s.name}", name=f"invariant {inv.name}", time="0")
    if inv.expected == "ignore":
        first = f": {inv.violations[0].message}" if inv.violations else ""
        ET.SubElement(case, "skipped", message=f"ignored by the scenario ({inv.reason}); it was {inv.status}{first}")
        if inv.violations:
            ET.SubElement(case, "system-out").text = _evidence_text(inv.violations)
        return "skipped"
    if inv.status == "not-checked":
        why = inv.note or s.error or "the run ended before this invariant was judged"
        ET.SubElement(case, "skipped", message=f"not checked: {why}")
        return "skipped"
    if not inv.met:
        want = "hold" if inv.expected == "hold" else "be violated"
        first = inv.violations[0].message if inv.violations else f"{inv.name} was {inv.status}"
        unnamed = "" if inv.required else " (not named in expect.hold: every violation counts)"
        f = ET.SubElement(case, "failure", message=f"should {want} but was {inv.status}{unnamed}: {first}",
                          type=inv.status)
        f.text = _evidence_text(inv.violations) or f"{inv.summary}: {inv.status}"
        return "failure"
    out = ET.SubElement(case, "system-out")
    out.text = f"{inv.summary}\n{inv.status} (expected: {inv.describe_expected})"
    if inv.note:
        out.text += f"\n{inv.note}"
    if inv.violations:
        out.text += "\n" + _evidence_text(inv.violations)
    return "passed"


def _load_text(load: LoadSummary) -> str:
    """A load step's measurements as lines: the rates, then per operation kind and phase its times in ms."""
    lines = [f"load: {load.headline}"]
    for k in load.kinds:
        lines.append(f"{k.kind}: {k.operations} started, {k.errors} error(s)")
        lines += [f"  {p.phase}: {p.count} ({p.failures} failed) p50 {p.p50_ms:.0f} ms, p90 {p.p90_ms:.0f} ms, "
                  f"p99 {p.p99_ms:.0f} ms, max {p.max_ms:.0f} ms" for p in k.phases]  # fmt: skip
    lines += [f"load saw {name} violated: {'; '.join(found)}" for name, found in load.violations.items()]
    lines += [f"failure: {e}" for e in load.errors]
    if load.error:
        lines.append(f"error: {load.error}")
    return "\n".join(lines)


def _step_case(suite: ET.Element, s: ScenarioResult, st: StepResult) -> str:
    took = (st.finished - st.ran) if st.finished is not None and st.ran is not None else 0.0
    case = ET.SubElement(suite, "testcase", classname=f"draguard.scenario.{s.name}", name=f"step {st.name} ({st.fault})",
                         time=f"{took:.3f}")
    timing = (f"due={st.due}s ran={st.ran}s finished={st.finished}s fired={st.fired}"
              if st.ran is not None or st.due is not None else f"t={st.t:.1f}s")
    if st.load is not None:
        timing += "\n" + _load_text(st.load)
    if st.ok and st.status == "ok":
        ET.SubElement(case, "system-out").text = f"{timing}\n{st.detail}".strip()
        return "passed"
    if st.optional:
        ET.SubElement(case, "skipped", message=f"optional step {st.status}: {st.detail}")
        return "skipped"
    f = ET.SubElement(case, "failure", message=f"{st.status}: {st.detail}"[:500], type=st.status)
    f.text = f"{timing}\n{st.detail}"
    return "failure"


def _expectation_case(suite: ET.Element, s: ScenarioResult, e: ExpectationResult) -> str:
    case = ET.SubElement(suite, "testcase", classname=f"draguard.scenario.{s.name}", name=f"expect {e.kind} {e.rule}",
                         time="0")
    if e.met:
        ET.SubElement(case, "system-out").text = e.detail or "met"
        return "passed"
    ET.SubElement(case, "failure", message=f"not met: {e.detail}"[:500], type=e.kind).text = e.detail or "not met"
    return "failure"


def _check_case(suite: ET.Element, c: CheckResult) -> str:
    case = ET.SubElement(suite, "testcase", classname="draguard.check", name=c.id, time=f"{c.duration:.3f}")
    if c.status in ("skipped", "not-applicable"):
        why = c.reason or c.status
        ET.SubElement(case, "skipped", message=f"not applicable: {why}" if c.status == "not-applicable" else why)
        return "skipped"
    if c.status in ("failed", "error"):
        tag = "failure" if c.status == "failed" else "error"
        el = ET.SubElement(case, tag, message=f"{c.rule}: {c.reason}"[:500], type=c.status)
        el.text = f"rule: {c.rule}\nsource: {c.source}\n{c.reason}\n{_evidence_text(c.evidence)}".strip()
        return tag
    ET.SubElement(case, "system-out").text = f"rule: {c.rule}\nsource: {c.source}"
    return "passed"


def _finish(suite: ET.Element, outcomes: list[str], seconds: float) -> None:
    suite.set("tests", str(len(outcomes)))
    for key, name in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        suite.set(name, str(outcomes.count(key)))
    suite.set("time", f"{seconds:.3f}")


def to_xml(result: RunResult) -> str:
    root = ET.Element("testsuites", name=f"draguard run {result.run_id}")
    all_outcomes: list[str] = []
    for s in result.scenarios:
        suite = ET.SubElement(root, "testsuite", name=f"scenario {s.name}")
        props = ET.SubElement(suite, "properties")
        for key, value in (("source", s.source), ("seed", s.seed), *sorted(s.environment.items())):
            ET.SubElement(props, "property", name=str(key), value=str(value))
        outcomes: list[str] = []
        if s.not_applicable is not None:  # not run on this driver: one skipped case with the reason
            case = ET.SubElement(suite, "testcase", classname=f"draguard.scenario.{s.name}", name="run", time="0")
            ET.SubElement(case, "skipped", message=s.not_applicable[:500]).text = s.not_applicable
            outcomes.append("skipped")
        if s.error is not None:
            case = ET.SubElement(suite, "testcase", classname=f"draguard.scenario.{s.name}", name="run", time=f"{s.duration:.3f}")
            ET.SubElement(case, "error", message=s.error[:500], type=s.error_kind or "error").text = s.error
            outcomes.append("error")
        outcomes += [_invariant_case(suite, s, inv) for inv in s.invariants.values()]
        outcomes += [_step_case(suite, s, st) for st in s.steps]
        outcomes += [_expectation_case(suite, s, e) for e in s.expectation_results]
        _finish(suite, outcomes, s.duration)
        all_outcomes += outcomes
    if result.checks:
        suite = ET.SubElement(root, "testsuite", name="checks")
        outcomes = [_check_case(suite, c) for c in result.checks]
        _finish(suite, outcomes, sum(c.duration for c in result.checks))
        all_outcomes += outcomes
    _finish(root, all_outcomes, sum(s.duration for s in result.scenarios) + sum(c.duration for c in result.checks))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


@REPORTS.register("junit", summary="junit.xml: one testcase per scenario x invariant, per step and per check")
def render(result: RunResult, out: Path) -> list[Path]:
    return [write_atomic(out / FILE, to_xml(result))]
