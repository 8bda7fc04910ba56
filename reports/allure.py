"""``allure``: Allure results (``allure-results/``) written with allure-python-commons.

One Allure test per scenario x invariant (evidence attached as JSON; a violated invariant the
scenario did not name fails, one it ignores is skipped with its reason), one per scenario with its
chaos steps as Allure steps (a ``load`` step with its measurements attached) and its timeline
attached, and one per sanity/conformance check; ``environment.properties`` carries the run's environment. Render them to HTML with Allure 3
(``npx allure generate allure-results -o allure-report``; no Java needed). The folder is written
whole to a temporary place and then moved into place.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from allure_commons.logger import AllureFileLogger
from allure_commons.model2 import Attachment, Label, Parameter, StatusDetails, TestResult, TestStepResult
from allure_commons.model2 import Status as AllureStatus

from draguard.harness.result import CheckResult, Evidence, RunResult, ScenarioResult

from .files import replace_dir
from .registry import REPORTS

__all__ = ["render", "DIR"]

DIR = "allure-results"


def _ms(started: float, seconds: float | None) -> int:
    return int((started + (seconds or 0.0)) * 1000)


class _Writer:
    def __init__(self, root: Path) -> None:
        self.logger = AllureFileLogger(str(root))

    def attach(self, name: str, body: Any) -> Attachment:
        source = f"{uuid.uuid4()}-attachment.json"
        self.logger.report_attached_data(body=json.dumps(body, indent=1, default=str), file_name=source)
        return Attachment(name=name, source=source, type="application/json")

    def result(self, test: TestResult) -> None:
        self.logger.report_result(test)


def _labels(suite: str, sub: str, env: dict[str, Any]) -> list[Label]:
    labels = [Label("framework", "draguard"), Label("parentSuite", "draguard"), Label("suite", suite), Label("subSuite", sub)]
    driver = env.get("driver")
    if isinstance(driver, dict) and driver.get("mutant"):
        labels.append(Label("tag", f"mutant:{driver['mutant']}"))
    return labels


def _evidence(evidence: list[Evidence]) -> list[dict[str, Any]]:
    return [e.as_dict() for e in evidence]


def _scenario(w: _Writer, s: ScenarioResult, started: float) -> None:
    stop = _ms(started, s.duration)
    for inv in s.invariants.values():
        if inv.expected == "ignore":
            status, message = AllureStatus.SKIPPED, f"ignored by the scenario ({inv.reason}); it was {inv.status}" + (
                f": {inv.violations[0].message}" if inv.violations else "")
        elif inv.status == "not-checked":
            status, message = AllureStatus.SKIPPED, (inv.note or f"not checked: {s.error or 'the run ended before it was judged'}")
        elif inv.met:
            status, message = AllureStatus.PASSED, f"{inv.status} (expected {inv.describe_expected})"
            message += f"; {inv.note}" if inv.note else ""
        else:
            status = AllureStatus.FAILED
            want = "hold" if inv.expected == "hold" else "be violated"
            message = f"should {want} but was {inv.status}" + ("" if inv.required else " (not named in expect.hold: "
                                                                "every violation counts)") + (
                f": {inv.violations[0].message}" if inv.violations else "")
        w.result(TestResult(
            uuid=str(uuid.uuid4()), name=f"{s.name}: {inv.name}", fullName=f"draguard.scenario.{s.name}.{inv.name}",
            historyId=f"scenario.{s.name}.invariant.{inv.name}", testCaseId=f"scenario.{s.name}.invariant.{inv.name}",
            description=inv.summary, status=status, statusDetails=StatusDetails(message=message),
            labels=_labels(s.name, "invariants", s.environment), start=_ms(started, 0), stop=stop,
            parameters=[Parameter("expected", inv.describe_expected), Parameter("seed", str(s.seed))],
            attachments=[w.attach("evidence", _evidence(inv.violations))] if inv.violations else [],
        ))
    for e in s.expectation_results:
        ident = f"scenario.{s.name}.expect.{e.kind}.{e.rule}"
        w.result(TestResult(
            uuid=str(uuid.uuid4()), name=f"{s.name}: expect {e.kind} {e.rule}", fullName=f"draguard.{ident}",
            historyId=ident, testCaseId=ident, description=f"expect {e.kind}: {e.rule}",
            status=AllureStatus.PASSED if e.met else AllureStatus.FAILED,
            statusDetails=StatusDetails(message=("" if e.met else "not met: ") + (e.detail or e.rule)),
            labels=_labels(s.name, "expectations", s.environment), start=_ms(started, 0), stop=stop,
        ))
    steps = []
    for st in s.steps:
        ok = st.ok and st.status == "ok"
        steps.append(TestStepResult(
            name=f"{st.name} ({st.fault})", status=AllureStatus.PASSED if ok else AllureStatus.SKIPPED if st.optional else AllureStatus.FAILED,
            statusDetails=StatusDetails(message=f"{st.status}: {st.detail}" if not ok else st.detail or None),
            start=_ms(started, st.ran if st.ran is not None else st.t), stop=_ms(started, st.finished if st.finished is not None else st.t),
            parameters=[Parameter("due", str(st.due)), Parameter("fired", str(st.fired))]
            + ([Parameter("load", st.load.headline)] if st.load is not None else []),
            attachments=[w.attach(f"load of {st.name}", st.load.as_dict())] if st.load is not None else [],
        ))
    attachments = []
    if s.timeline is not None:
        attachments.append(w.attach("timeline", list(s.timeline.events())))
    attachments.append(w.attach("environment", s.environment))
    failed = s.error is not None or any(not (st.ok and st.status == "ok") and not st.optional for st in s.steps)
    w.result(TestResult(
        uuid=str(uuid.uuid4()), name=f"{s.name}: run", fullName=f"draguard.scenario.{s.name}.run",
        historyId=f"scenario.{s.name}.run", testCaseId=f"scenario.{s.name}.run",
        description=f"{s.source}: chaos steps and timeline",
        status=(AllureStatus.SKIPPED if s.not_applicable is not None else AllureStatus.BROKEN if s.error is not None
                else AllureStatus.FAILED if failed else AllureStatus.PASSED),
        statusDetails=StatusDetails(message=s.not_applicable or s.error) if (s.not_applicable or s.error) else None,
        labels=_labels(s.name, "run", s.environment), steps=steps, attachments=attachments, start=_ms(started, 0), stop=stop,
    ))


def _check(w: _Writer, c: CheckResult, started: float) -> None:
    status = {"passed": AllureStatus.PASSED, "failed": AllureStatus.FAILED, "skipped": AllureStatus.SKIPPED,
              "not-applicable": AllureStatus.SKIPPED, "error": AllureStatus.BROKEN}[c.status]
    w.result(TestResult(
        uuid=str(uuid.uuid4()), name=c.id, fullName=f"draguard.check.{c.id}", historyId=f"check.{c.id}", testCaseId=f"check.{c.id}",
        description=f"{c.rule}\n\nsource: {c.source}", status=status, statusDetails=StatusDetails(message=c.reason or None),
        labels=_labels("checks", c.id.split(".")[0], {}), start=_ms(started, 0), stop=_ms(started, c.duration),
        attachments=[w.attach("evidence", _evidence(c.evidence))] if c.evidence else [],
    ))


def _properties(env: dict[str, Any], prefix: str = "") -> list[str]:
    lines = []
    for key, value in sorted(env.items()):
        if isinstance(value, dict):
            lines += _properties(value, f"{prefix}{key}.")
        else:
            lines.append(f"{prefix}{key}={value}")
    return lines


@REPORTS.register("allure", summary="allure-results/ for Allure (render with: npx allure generate allure-results)")
def render(result: RunResult, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{DIR}.", dir=out))
    try:
        w = _Writer(staging)
        started = float(result.environment.get("started") or 0.0)
        for s in result.scenarios:
            _scenario(w, s, started)
        for c in result.checks:
            _check(w, c, started)
        env = dict(result.environment)
        if result.scenarios:
            env["scenario"] = result.scenarios[0].environment
        (staging / "environment.properties").write_text("\n".join(_properties(env)) + "\n")
        replace_dir(staging, out / DIR)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [out / DIR]
