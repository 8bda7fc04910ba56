"""The result model of a run: per scenario, per invariant, with evidence. Reports read only this.

``verdict.json`` is :meth:`RunResult.as_dict`; its shape is stable (reports, CI and tests rely on it)::

    {"ok": bool, "runId": str, "scenarios": [
        {"name", "source", "seed", "ok", "error", "durationSeconds", "timeline": "<file>",
         "expectations": {"hold": [...], "violate": [...]},
         "invariants": {"<name>": {"status": "held"|"violated"|"not-checked", "expected": "hold"|"violate"|null,
                                   "met": bool, "violations": [{"message", "objects", "devices", "time"}]}},
         "steps": [{"name", "fault", "t", "ok", "detail"}]}]}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Evidence", "InvariantResult", "StepResult", "ScenarioResult", "RunResult"]

Status = Literal["held", "violated", "not-checked"]


@dataclass(frozen=True)
class Evidence:
    message: str
    objects: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    time: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"message": self.message, "objects": list(self.objects), "devices": list(self.devices), "time": self.time}


@dataclass
class InvariantResult:
    name: str
    summary: str
    status: Status
    expected: Literal["hold", "violate"] | None
    violations: list[Evidence] = field(default_factory=list)

    @property
    def met(self) -> bool:
        if self.expected == "hold":
            return self.status == "held"
        if self.expected == "violate":
            return self.status == "violated"
        return True

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "expected": self.expected, "met": self.met, "summary": self.summary,
                "violations": [v.as_dict() for v in self.violations]}


@dataclass
class StepResult:
    name: str
    fault: str
    t: float
    ok: bool
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fault": self.fault, "t": round(self.t, 3), "ok": self.ok, "detail": self.detail}


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
    hold: tuple[str, ...] = ()
    violate: tuple[str, ...] = ()
    node_agents: dict[str, str] = field(default_factory=dict)
    """Node name -> the agent that ran it (``fake`` or ``kubelet``)."""

    @property
    def ok(self) -> bool:
        return self.error is None and all(r.met for r in self.invariants.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "source": self.source, "seed": self.seed, "ok": self.ok, "error": self.error,
            "durationSeconds": round(self.duration, 2), "timeline": self.timeline_file,
            "expectations": {"hold": list(self.hold), "violate": list(self.violate)},
            "invariants": {n: r.as_dict() for n, r in self.invariants.items()},
            "steps": [s.as_dict() for s in self.steps],
            "environment": {"nodeAgents": dict(self.node_agents)},
        }


@dataclass
class RunResult:
    run_id: str
    scenarios: list[ScenarioResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.scenarios) and all(s.ok for s in self.scenarios)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "runId": self.run_id, "scenarios": [s.as_dict() for s in self.scenarios]}
