"""The result model of a run: per scenario, per invariant, with evidence. Reports read only this.

Every renderer (``draguard.reports``: terminal, JSON, JUnit, Allure, HTML) reads a :class:`RunResult`
and nothing else; the runner returns one and writes no files. ``verdict.json`` is
:meth:`RunResult.as_dict` and :meth:`RunResult.from_dict` reads it back; its shape is stable (reports,
CI and tests rely on it)::

    {"schemaVersion": 1, "ok": bool, "exitCode": 0|1|2, "runId": str, "environment": {...},
     "checks": [{"id", "rule", "source", "status", "reason", "evidence": [...], "durationSeconds"}],
     "scenarios": [
        {"name", "source", "seed", "ok": bool|null, "outcome": "met"|"not-met"|"error"|"not-applicable",
         "notApplicable": "<reason>"|null, "error", "errorKind", "durationSeconds", "timeline": "<file>",
         "environment": {...},
         "expectations": {"hold": [...], "violate": [...], "ignore": [{"invariant", "reason"}]},
         "invariants": {"<name>": {"status": "held"|"violated"|"not-checked",
                                   "expected": "hold"|"violate"|"ignore", "required": bool,
                                   "met": bool, "violations": [{"message", "objects", "devices", "time"}],
                                   "reason": "<why the scenario ignores it>" (only for "ignore"),
                                   "note": "<how it was judged, or why not>" (only when set)}},
         "steps": [{"name", "fault", "t", "ok", "detail", "due", "ran", "finished", "fired", "optional", "status",
                    "load": {...} (only on a ``load`` step: see :meth:`LoadSummary.as_dict`)}],
         "expectationResults": [{"kind": "progress"|"evidence", "rule", "met", "detail"}]}]}

Every violation counts (:func:`expectation_of`): an invariant the run judged must hold unless the
scenario expects it violated (``expect.violate``) or excuses it with a reason (``expect.ignore``); an
invariant that ``expect.hold`` leaves out still fails the scenario when it is violated. ``required``
says whether the scenario named it in ``hold`` or ``violate`` (or left ``hold`` out, which names
every invariant the run can judge): a required invariant that ends ``not-checked`` is not met.
A verdict written before ``required`` existed reads an ``expected`` of null as an unnamed ``hold``.

A scenario not applicable on the driver ``draguard run --driver`` names (``notApplicable``: the
reason) was not run: ``ok`` is null, it fails nothing, and a run in which no scenario was applicable
exits 2 (nothing was checked).

A step fails the scenario when its status is not ``ok`` and it is not ``optional``; so does an
``expect.progress`` or ``expect.evidence`` entry that was not met. A ``load`` step (claim churn
during the chaos) carries what its load measured (:class:`LoadSummary`: per operation kind the
count, errors and p50/p90/p99/max of each phase, the target and achieved rate); a load that fell
behind its target rate or could not run is an ``error`` step with the reason in its detail.

The timeline of a scenario is not part of the verdict: :attr:`ScenarioResult.timeline` refers to it
(a :class:`TimelineSource`, in memory during a run or a file when a finished run is read back), and
the ``json`` report writes it beside the verdict as ``<scenario>/timeline.json``.

Nor is what the run recorded besides (:attr:`ScenarioResult.record`, a :class:`RunRecord`): the gRPC
interposer's calls, each fake node's device truth at the end, a ``load`` step's files. The run writes
them into a folder of its own under the state directory, never into the report directory; when the
result is rendered, ``draguard.reports`` places each :class:`RecordedFile` at its ``name`` under
``<report-dir>/<scenario>/`` and discards the record.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from draguard.harness.core import errors

__all__ = [
    "SCHEMA_VERSION",
    "Evidence",
    "InvariantResult",
    "StepResult",
    "LoadPhase",
    "LoadKind",
    "LoadSummary",
    "ExpectationResult",
    "CheckResult",
    "ScenarioResult",
    "RunResult",
    "TimelineSource",
    "TimelineEvents",
    "TimelineFile",
    "RecordedFile",
    "RunRecord",
    "ResultFormatError",
    "Expected",
    "Expectation",
    "expectation_of",
    "exit_code_of",
]

SCHEMA_VERSION = 1
"""Version of the ``verdict.json`` shape; a report from another version is refused, not misread."""

Status = Literal["held", "violated", "not-checked"]
StepStatus = Literal["ok", "error", "late", "never-ran", "not-fired"]
CheckStatus = Literal["passed", "failed", "skipped", "not-applicable", "error"]
"""``not-applicable``: the driver does not declare what the check tests (sanity ``--capabilities``)."""
Expected = Literal["hold", "violate", "ignore"]


class ResultFormatError(errors.UsageError):
    """A verdict or timeline file cannot be read back: missing, partial or from another version."""


def exit_code_of(error_kind: str | None) -> int:
    """The exit code an error of class ``error_kind`` (a name in :mod:`draguard.harness.core.errors`) maps to.

    An unusable environment (``HarnessError``) or input (``UsageError``) is 2; an unknown or absent
    kind is a failed expectation, 1.
    """
    cls = getattr(errors, error_kind, None) if error_kind else None
    if isinstance(cls, type) and issubclass(cls, errors.DraguardError):
        return cls.exit_code
    return errors.EXIT_FAILED


@dataclass(frozen=True)
class Expectation:
    """What a scenario expects of one invariant."""

    expected: Expected
    required: bool
    """Named in ``hold`` or ``violate``: it must be judged (``not-checked`` is not met)."""
    reason: str = ""
    """Why the scenario ignores it (``expected == "ignore"``)."""

    def met(self, status: Status) -> bool:
        """Whether an invariant that ended ``status`` meets this expectation."""
        if self.expected == "ignore":
            return True
        if self.expected == "violate":
            return status == "violated"
        return status == "held" if self.required else status != "violated"


def expectation_of(name: str, *, hold: Collection[str], violate: Collection[str],
                   ignore: Mapping[str, str]) -> Expectation:
    """The expectation of invariant ``name`` under a scenario's ``expect`` lists (``ignore``: name -> reason).

    ``violate`` and ``ignore`` name it outright; otherwise it must hold, and be judged when ``hold``
    names it. Every violation counts: an invariant no list names must not be violated either.
    """
    if name in violate:
        return Expectation("violate", True)
    if name in ignore:
        return Expectation("ignore", False, ignore[name])
    return Expectation("hold", name in hold)


# -- timelines ------------------------------------------------------------------------------------
@runtime_checkable
class TimelineSource(Protocol):
    """Where a scenario's timeline events come from, in time order (dicts as in ``timeline.json``)."""

    def events(self) -> Iterator[dict[str, Any]]: ...


@dataclass(frozen=True)
class TimelineEvents:
    """A timeline held in memory (tests, or a run's events once it stopped)."""

    items: tuple[dict[str, Any], ...] = ()

    def events(self) -> Iterator[dict[str, Any]]:
        return iter(self.items)


@dataclass(frozen=True)
class TimelineFile:
    """A timeline on disk: a JSON array (``timeline.json``) or one JSON object per line (``.jsonl``)."""

    path: Path

    def events(self) -> Iterator[dict[str, Any]]:
        try:
            text = self.path.read_text()
        except OSError as exc:
            raise ResultFormatError(f"{self.path}: cannot read the timeline: {exc.strerror or exc}") from exc
        try:
            if self.path.suffix == ".jsonl":
                items = [json.loads(line) for line in text.splitlines() if line.strip()]
            else:
                items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ResultFormatError(f"{self.path}: not a complete timeline (line {exc.lineno}: {exc.msg})") from exc
        if not isinstance(items, list) or not all(isinstance(e, dict) and "t" in e for e in items):
            raise ResultFormatError(f"{self.path}: not a timeline: expected a list of events with a time 't'")
        return iter(items)


# -- what a run recorded besides --------------------------------------------------------------------
@dataclass(frozen=True)
class RecordedFile:
    """A file (or a folder of files) a run recorded as evidence, and where it goes in the report."""

    path: Path
    """Where the run wrote it: in its record folder (:attr:`RunRecord.root`)."""
    name: str
    """Its place in the report, relative to ``<report-dir>/<scenario>/``: ``grpc-calls.jsonl``,
    ``devices/<node>.json``, ``load-<step>``."""
    about: str
    """What it is, in one line."""


@dataclass
class RunRecord:
    """What one run recorded besides its result, in the run's own folder (``<state>/runs/<id>/record``)
    until the reports place it into the report directory (:meth:`discard` then removes the folder)."""

    root: Path
    files: list[RecordedFile] = field(default_factory=list)
    """Everything the run asked a path for, in that order (a file it never wrote is not placed)."""

    def path(self, name: str, about: str) -> Path:
        """Where to record ``name`` (a file, or a folder the caller makes), listed from now on; its parent
        folder exists. ``name`` is relative and stays inside the record (``ValueError`` otherwise)."""
        rel = Path(name)
        if rel.is_absolute() or not rel.parts or ".." in rel.parts:
            raise ValueError(f"recorded file {name!r}: expected a relative name inside the record")
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        self.files.append(RecordedFile(path, rel.as_posix(), about))
        return path

    def existing(self) -> list[RecordedFile]:
        """The files the run did write, each name once (the last path asked for it)."""
        return [f for f in {f.name: f for f in self.files}.values() if f.path.exists()]

    def discard(self) -> None:
        """Remove the record's folder, and the run's folder above it once nothing else is left there."""
        shutil.rmtree(self.root, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.root.parent.rmdir()


# -- cases ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Evidence:
    message: str
    objects: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    time: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"message": self.message, "objects": list(self.objects), "devices": list(self.devices), "time": self.time}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Evidence:
        return cls(str(d["message"]), tuple(d.get("objects") or ()), tuple(d.get("devices") or ()), d.get("time"))


@dataclass
class InvariantResult:
    name: str
    summary: str
    status: Status
    expected: Expected | None
    """``None`` is read as an unnamed ``hold`` (``required`` False), as verdicts before ``required`` wrote it."""
    violations: list[Evidence] = field(default_factory=list)
    note: str = ""
    """How it was judged when only part of what it reads was available, or why it was not checked."""
    required: bool = True
    """The scenario named it in ``hold`` or ``violate``: ``not-checked`` is not met. An invariant no
    list names (``False``) must still not be violated."""
    reason: str = ""
    """Why the scenario ignores it (``expect.ignore``); shown wherever it is."""

    def __post_init__(self) -> None:
        if self.expected is None:
            self.expected, self.required = "hold", False

    @property
    def expectation(self) -> Expectation:
        return Expectation(self.expected or "hold", self.required, self.reason)

    @property
    def met(self) -> bool:
        return self.expectation.met(self.status)

    @property
    def listed(self) -> bool:
        """Worth a place in a verdict's summary: named by the scenario, ignored by it, or judged."""
        return self.required or self.expected == "ignore" or self.status != "not-checked"

    @property
    def describe_expected(self) -> str:
        """``hold``, ``hold (not named)``, ``violate`` or ``ignore: <reason>``, for reports."""
        if self.expected == "ignore":
            return f"ignore: {self.reason}"
        expected = self.expected or "hold"
        return expected if self.required else f"{expected} (not named)"

    def as_dict(self) -> dict[str, Any]:
        out = {"status": self.status, "expected": self.expected, "required": self.required, "met": self.met,
               "summary": self.summary, "violations": [v.as_dict() for v in self.violations]}
        if self.expected == "ignore":
            out["reason"] = self.reason
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any]) -> InvariantResult:
        expected = d.get("expected")
        required = bool(d.get("required", expected is not None))
        return cls(name, str(d.get("summary", "")), d["status"], expected,
                   [Evidence.from_dict(v) for v in d.get("violations") or ()], str(d.get("note") or ""),
                   required, str(d.get("reason") or ""))


@dataclass(frozen=True)
class LoadPhase:
    """The times of one phase of one operation kind of a load, in milliseconds: ``allocated``,
    ``prepared`` and ``running`` since the operation's objects were created, ``released`` since
    they were deleted (until every pod and claim of it is gone)."""

    phase: str
    count: int
    """Operations that reached this phase or failed to in time."""
    failures: int
    """Operations that did not reach it in time (or whose API request failed)."""
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float

    def as_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "count": self.count, "failures": self.failures, "p50Ms": self.p50_ms,
                "p90Ms": self.p90_ms, "p99Ms": self.p99_ms, "maxMs": self.max_ms}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LoadPhase:
        return cls(str(d["phase"]), int(d["count"]), int(d["failures"]), float(d["p50Ms"]), float(d["p90Ms"]),
                   float(d["p99Ms"]), float(d["maxMs"]))


@dataclass(frozen=True)
class LoadKind:
    """One operation kind of a load (``gang``, ``template``, ``shared``)."""

    kind: str
    operations: int
    """Operations of this kind started (their objects created)."""
    errors: int
    """Failed requests of these operations, every phase together (creation included)."""
    phases: tuple[LoadPhase, ...] = ()

    def phase(self, name: str) -> LoadPhase | None:
        return next((p for p in self.phases if p.phase == name), None)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "operations": self.operations, "errors": self.errors,
                "phases": [p.as_dict() for p in self.phases]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LoadKind:
        return cls(str(d["kind"]), int(d["operations"]), int(d["errors"]),
                   tuple(LoadPhase.from_dict(p) for p in d.get("phases") or ()))


@dataclass(frozen=True)
class LoadSummary:
    """What the claim churn of a ``load`` step measured (``draguard load``'s engine, inside a scenario)."""

    target_rate: float
    """Operations per second the step asked for, all kinds together."""
    achieved_rate: float
    """Operations started per second of the load's duration."""
    fell_behind: bool
    """The achieved rate stayed under ``behind_ratio`` of the target: the load did not happen as declared."""
    behind_ratio: float
    """The share of the target rate the load must reach (the engine's tolerance)."""
    duration: float
    """Seconds during which operations were started."""
    operations_started: int
    operations_finished: int
    """Operations whose objects were all gone again in time (released)."""
    users: int = 0
    """Concurrent load users (each runs one operation at a time)."""
    kinds: tuple[LoadKind, ...] = ()
    violations: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Invariant -> what the load's own judging saw broken (the run's invariants judge the same objects)."""
    errors: tuple[str, ...] = ()
    """The distinct failures of its operations, most frequent first (``kind phase: message (×n)``)."""
    error: str | None = None
    """Why the load could not run to its end (its process failed or hung); None when it did."""
    files: str | None = None
    """Its folder (locust's CSV files, ``summary.json``), relative to the report directory."""

    @property
    def headline(self) -> str:
        """One line: target and achieved rate, whether it kept up, operations started and finished."""
        pace = (f"FELL BEHIND (under {self.behind_ratio:.0%} of the target)" if self.fell_behind
                else "kept up")  # fmt: skip
        return (f"target {self.target_rate:g}/s, achieved {self.achieved_rate:g}/s: {pace}; "
                f"{self.operations_started} operations started, {self.operations_finished} finished in "
                f"{self.duration:g}s with {self.users} users")  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {"targetRate": self.target_rate, "achievedRate": self.achieved_rate, "fellBehind": self.fell_behind,
                "behindRatio": self.behind_ratio, "durationSeconds": self.duration,
                "operationsStarted": self.operations_started, "operationsFinished": self.operations_finished,
                "users": self.users, "kinds": [k.as_dict() for k in self.kinds],
                "violations": {n: list(v) for n, v in self.violations.items()}, "errors": list(self.errors),
                "error": self.error, "files": self.files}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LoadSummary:
        return cls(float(d["targetRate"]), float(d["achievedRate"]), bool(d["fellBehind"]), float(d["behindRatio"]),
                   float(d["durationSeconds"]), int(d["operationsStarted"]), int(d["operationsFinished"]),
                   int(d.get("users") or 0), tuple(LoadKind.from_dict(k) for k in d.get("kinds") or ()),
                   {str(n): tuple(v) for n, v in (d.get("violations") or {}).items()}, tuple(d.get("errors") or ()),
                   d.get("error"), d.get("files"))


@dataclass
class StepResult:
    name: str
    fault: str
    t: float
    ok: bool
    detail: str = ""
    due: float | None = None
    """Seconds since the run start when the scenario said it was due (None: a when-condition)."""
    ran: float | None = None
    """When it actually started."""
    finished: float | None = None
    """When it returned."""
    fired: int | None = None
    """How often its fault fired (driver/interposer counters); None when not countable."""
    optional: bool = False
    status: StepStatus = "ok"
    load: LoadSummary | None = None
    """What the claim churn of a ``load`` step measured; None for every other step."""

    def as_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "fault": self.fault, "t": round(self.t, 3), "ok": self.ok, "detail": self.detail,
               "due": _round(self.due), "ran": _round(self.ran), "finished": _round(self.finished),
               "fired": self.fired, "optional": self.optional, "status": self.status}
        if self.load is not None:
            out["load"] = self.load.as_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepResult:
        return cls(str(d["name"]), str(d["fault"]), float(d["t"]), bool(d["ok"]), str(d.get("detail", "")),
                   d.get("due"), d.get("ran"), d.get("finished"), d.get("fired"), bool(d.get("optional", False)),
                   d.get("status", "ok" if d["ok"] else "error"),
                   LoadSummary.from_dict(d["load"]) if d.get("load") else None)


@dataclass
class ExpectationResult:
    """One ``expect`` entry beyond hold/violate: progress that must happen, an Event that must come (or
    not), evidence a violation must carry; or, with ``draguard run --baseline``, a wall time within the
    baseline run's (:mod:`draguard.harness.judge.baseline`)."""

    kind: Literal["progress", "event", "evidence", "baseline"]
    rule: str
    met: bool
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "rule": self.rule, "met": self.met, "detail": self.detail}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExpectationResult:
        return cls(d["kind"], str(d["rule"]), bool(d["met"]), str(d.get("detail", "")))


@dataclass
class CheckResult:
    """One sanity or conformance check of a driver."""

    id: str
    """Stable dotted id, e.g. ``sanity.unprepare.unknown-claim``."""
    rule: str
    """The rule, in one sentence."""
    source: str
    """Where the rule comes from (a guardrail, a KEP, a kubelet file)."""
    status: CheckStatus
    reason: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    duration: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "rule": self.rule, "source": self.source, "status": self.status, "reason": self.reason,
                "evidence": [e.as_dict() for e in self.evidence], "durationSeconds": round(self.duration, 3)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CheckResult:
        return cls(str(d["id"]), str(d.get("rule", "")), str(d.get("source", "")), d["status"], str(d.get("reason", "")),
                   [Evidence.from_dict(e) for e in d.get("evidence") or ()], float(d.get("durationSeconds", 0.0)))


@dataclass
class ScenarioResult:
    name: str
    source: str | None
    seed: int
    invariants: dict[str, InvariantResult] = field(default_factory=dict)
    steps: list[StepResult] = field(default_factory=list)
    error: str | None = None
    duration: float = 0.0
    timeline_file: str | None = None
    """Where the timeline was written, relative to the report directory (set by the ``json`` report)."""
    hold: tuple[str, ...] = ()
    violate: tuple[str, ...] = ()
    ignore: Mapping[str, str] = field(default_factory=dict)
    """``expect.ignore``: invariant -> why the scenario excuses it."""
    environment: dict[str, Any] = field(default_factory=dict)
    """Driver, mutant, node agent, node count, Kubernetes version and feature gates of this scenario's cluster."""
    error_kind: str | None = None
    """Class name of the error that stopped the run (``HarnessError``...): decides exit code 2 vs 1."""
    timeline: TimelineSource | None = field(default=None, repr=False, compare=False)
    """The scenario's timeline events (not serialised into the verdict)."""
    expectation_results: list[ExpectationResult] = field(default_factory=list)
    """``expect.progress`` and ``expect.evidence``, each met or not."""
    not_applicable: str | None = None
    """Why the scenario was not run on this driver (``draguard run --driver``); None when it was run.
    A scenario that is not applicable is neither met nor failed: ``ok`` is False, ``exit_code`` 0."""
    record: RunRecord | None = field(default=None, repr=False, compare=False)
    """What the run recorded besides (not serialised into the verdict): placed into the report directory
    when the result is rendered; None once placed, or for a result read back from a verdict."""

    def expectation(self, invariant: str) -> Expectation:
        """What this scenario expects of ``invariant`` (:func:`expectation_of` over its expect lists)."""
        return expectation_of(invariant, hold=self.hold, violate=self.violate, ignore=self.ignore)

    @property
    def outcome(self) -> Literal["met", "not-met", "error", "not-applicable"]:
        if self.not_applicable is not None:
            return "not-applicable"
        if self.error is not None:
            return "error"
        return "met" if self.ok else "not-met"

    @property
    def ok(self) -> bool:
        """No error, every invariant as expected, every step ok (or optional), every expectation met."""
        return (self.not_applicable is None and self.error is None and all(r.met for r in self.invariants.values())
                and all(s.status == "ok" or s.optional for s in self.steps)
                and all(e.met for e in self.expectation_results))

    @property
    def shortfalls(self) -> list[str]:
        """What kept this scenario from ``ok``, one line each (empty when ok)."""
        out = [f"not applicable: {self.not_applicable}"] if self.not_applicable is not None else []
        if self.error is not None:
            out.append(f"error: {self.error}")
        out += [f"{n}: {r.status}, expected {r.describe_expected} ({r.summary})" for n, r in self.invariants.items()
                if not r.met]
        out += [f"step {s.name} ({s.fault}): {s.status} {s.detail}".rstrip() for s in self.steps
                if not (s.status == "ok" or s.optional)]
        out += [f"{e.kind} {e.rule}: not met {e.detail}".rstrip() for e in self.expectation_results if not e.met]
        return out

    @property
    def exit_code(self) -> int:
        if self.not_applicable is not None:
            return errors.EXIT_OK  # it did not fail; RunResult.exit_code is 2 when nothing at all was applicable
        if self.error is not None:
            return max(exit_code_of(self.error_kind), errors.EXIT_FAILED)
        return errors.EXIT_OK if self.ok else errors.EXIT_FAILED

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "source": self.source, "seed": self.seed,
            "ok": None if self.not_applicable is not None else self.ok, "outcome": self.outcome,
            "notApplicable": self.not_applicable, "error": self.error,
            "errorKind": self.error_kind,
            "durationSeconds": round(self.duration, 2), "timeline": self.timeline_file,
            "environment": self.environment,
            "expectations": {"hold": list(self.hold), "violate": list(self.violate),
                             "ignore": [{"invariant": n, "reason": r} for n, r in self.ignore.items()]},
            "invariants": {n: r.as_dict() for n, r in self.invariants.items()},
            "steps": [s.as_dict() for s in self.steps],
            "expectationResults": [e.as_dict() for e in self.expectation_results],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScenarioResult:
        exp = d.get("expectations") or {}
        return cls(
            str(d["name"]), d.get("source"), int(d["seed"]),
            invariants={n: InvariantResult.from_dict(n, r) for n, r in (d.get("invariants") or {}).items()},
            steps=[StepResult.from_dict(s) for s in d.get("steps") or ()],
            error=d.get("error"), duration=float(d.get("durationSeconds", 0.0)), timeline_file=d.get("timeline"),
            hold=tuple(exp.get("hold") or ()), violate=tuple(exp.get("violate") or ()),
            ignore={str(i["invariant"]): str(i["reason"]) for i in exp.get("ignore") or ()},
            environment=dict(d.get("environment") or {}), error_kind=d.get("errorKind"),
            expectation_results=[ExpectationResult.from_dict(e) for e in d.get("expectationResults") or ()],
            not_applicable=d.get("notApplicable"),
        )


@dataclass
class RunResult:
    run_id: str
    scenarios: list[ScenarioResult] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    """draguard version, machine, seed override, start and end of the whole run."""

    @property
    def ok(self) -> bool:
        run = [s for s in self.scenarios if s.not_applicable is None]
        if not run and not self.checks:
            return False
        return all(s.ok for s in run) and not any(c.status in ("failed", "error") for c in self.checks)

    @property
    def exit_code(self) -> int:
        """0 all passed, 1 something failed, 2 the input or the environment was unusable somewhere."""
        codes = [s.exit_code for s in self.scenarios]
        statuses = {c.status for c in self.checks}
        if "failed" in statuses:
            codes.append(errors.EXIT_FAILED)
        elif "error" in statuses:  # a check that could not run: the environment, unless another check failed
            codes.append(errors.EXIT_USAGE)
        if not self.checks and all(s.not_applicable is not None for s in self.scenarios):
            codes.append(errors.EXIT_USAGE)  # nothing was run: no scenario, or none applicable on the driver
        return max(codes, default=errors.EXIT_OK)

    def as_dict(self) -> dict[str, Any]:
        return {"schemaVersion": SCHEMA_VERSION, "ok": self.ok, "exitCode": self.exit_code, "runId": self.run_id,
                "environment": self.environment, "checks": [c.as_dict() for c in self.checks],
                "scenarios": [s.as_dict() for s in self.scenarios]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str = "verdict") -> RunResult:
        """Read a verdict back; :class:`ResultFormatError` naming ``where`` and what is wrong otherwise."""
        if not isinstance(d, Mapping):
            raise ResultFormatError(f"{where}: not a draguard verdict (expected a JSON object)")
        version = d.get("schemaVersion")
        if version != SCHEMA_VERSION:
            raise ResultFormatError(
                f"{where}: written by another draguard version (schemaVersion {version!r}; this one reads "
                f"{SCHEMA_VERSION}); re-run the scenarios to get a verdict this version can read")
        missing = [k for k in ("runId", "scenarios") if k not in d]
        if missing:
            raise ResultFormatError(f"{where}: partial verdict: missing {', '.join(missing)}")
        try:
            return cls(str(d["runId"]), [ScenarioResult.from_dict(s) for s in d["scenarios"]],
                       [CheckResult.from_dict(c) for c in d.get("checks") or ()], dict(d.get("environment") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ResultFormatError(f"{where}: partial verdict: {type(exc).__name__} {exc}") from exc


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)
