"""``draguard explore``: a Hypothesis search for fault interleavings that break an invariant.

Starting from a scenario file, Hypothesis draws a *plan*: up to ``max_steps`` chaos steps, each a
fault kind applicable to the scenario's fleet (:func:`applicable_faults`), a moment (``at`` an offset,
``when`` a workload reaches a phase, or ``after`` an earlier step of the plan), a target (a node by
name, or a workload member and so the node it runs on; pods are removed a whole workload at a time)
and parameters bounded so that a correct driver recovers within the run (:data:`SEARCH`; the kinds
left out and why: :data:`LEFT_OUT`). Each plan becomes an ordinary scenario document,
the starting document with the plan appended to its timeline and the mutant under test in
``driver.mutant`` (:func:`plan_document`), which the scenario loader turns into the frozen
:class:`~draguard.harness.scenario.types.Scenario` that :class:`~draguard.harness.runner.runner.Runner`
runs, with the kubeconfig backend, against one local control plane started once for the whole
search. Each run labels what it creates with its run id and removes it at its end; before the next
example the search checks that nothing labelled with that id is left (:func:`_leftovers`).

Every invariant the run judges is looked at: one that ended violated and is not excused by the
scenario's ``violate`` or ``ignore`` fails the example. Hypothesis then shrinks it (fewer steps,
earlier fault kinds, smaller numbers), each candidate being another run, and the smallest failing
plan is written out through :mod:`draguard.harness.scenario.write` as a scenario file whose
``expect`` is the starting scenario's, so that ``draguard run FILE`` fails on the same invariant;
the search replays the file once to say whether it does.

Why a strategy over plans and not a ``RuleBasedStateMachine``: the runner plays a whole timeline in
one run (a step fires ``at``, ``when`` or ``after`` something, inside the run), and its public API takes
a whole scenario. Rules of a state machine would each run against a live system between checks; here
they could only append to a plan that runs at the end, a state machine without state. A plan drawn
by one composite strategy shrinks the same way (steps dropped, choices simplified), is a plain value
that becomes a file, and lets the search cache each distinct plan's outcome, so that Hypothesis
asking for the same plan again (a shrink candidate that changes nothing, the final replay) costs no
run and cannot turn flaky.

What goes into the output folder (``out``): the scenario files found, written here through
:mod:`draguard.harness.scenario.write` (a scenario document is explore's product, the input of later
runs, not a run's evidence), and the reports of failing examples and of those in error
(``examples/<n>/``) and of the replays (``replays/<name>/``), rendered by the ``report`` callable the caller passes (the CLI passes
``draguard.reports``'s ``json`` format); the runs themselves write nothing there. Without ``report``, and
for every example that held, what a run recorded is discarded with its run.

The budget is wall-clock time from the control plane being up. A run is started only while the
budget has at least the mean run time left, and Hypothesis is stopped (not left to shrink further)
when it is spent; the smallest failing plan so far is then written. Each example takes one run
(about 15-20 s for a two-node gang on a loaded two-core machine), so ``max_examples`` is only an
upper bound derived from the budget. The search is seeded (``hypothesis.seed``, no example
database): the same scenario, mutant, seed and budget draw the same plans.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException

from draguard.harness.cluster.local import DEFAULT_CLIENT_BURST, DEFAULT_CLIENT_QPS, ClusterConfig, LocalCluster
from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.core.fsio import atomic_write
from draguard.harness.core.registry import FAULTS
from draguard.harness.devices.truth import APPLICATION_XIDS
from draguard.harness.driver.fault_control import CRASH_POINTS
from draguard.harness.driver.mutants import MUTANTS
from draguard.harness.kube import RUN_LABEL, Kube
from draguard.harness.result import RunResult, ScenarioResult
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario, parse_scenario, problems_of
from draguard.harness.scenario.format import ScenarioDocument, parse_duration
from draguard.harness.scenario.types import Scenario
from draguard.harness.scenario.write import dump_document

__all__ = [
    "SEARCH",
    "LEFT_OUT",
    "Explorer",
    "ExploreResult",
    "Found",
    "applicable_faults",
    "parse_budget",
    "plan_document",
    "plans",
    "explore",
]

Scope = Literal["node", "gang"]
"""What a fault's step targets: ``node`` (a node by name, or a workload member's node), ``gang`` (every
member of a workload: removing some members of a gang leaves it partial, which no driver can help)."""

_STEP_TIMEOUT = "30s"
"""How long a generated ``when``/``after`` step waits for its condition (the default two minutes
would make every plan whose earlier step removed the pods it waits for four times slower)."""


def _count(low: int, high: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"count": st.integers(low, high)})


def _seconds(low: int, high: int) -> st.SearchStrategy[str]:
    return st.integers(low, high).map(lambda s: f"{s}s")


SEARCH: Mapping[str, tuple[Scope, st.SearchStrategy[dict[str, Any]]]] = {
    "driver-crash": ("node", st.fixed_dictionaries({"point": st.sampled_from(CRASH_POINTS), "down": _seconds(1, 4)})),
    "driver-down": ("node", st.fixed_dictionaries({"duration": _seconds(2, 8)})),
    "driver-restart": ("node", st.fixed_dictionaries({"kill": st.booleans()})),
    "driver-rolling-update": ("node", st.fixed_dictionaries({"overlap": _seconds(1, 3)})),
    "evict": ("gang", st.just({})),
    "force-delete": ("gang", st.just({})),
    "node-loss": ("node", st.fixed_dictionaries({"duration": _seconds(3, 15)})),
    "node-restart": ("node", st.fixed_dictionaries({"kill": st.booleans()})),
    "node-reboot": ("node", st.just({})),
    "checkpoint-corrupt": ("node", st.fixed_dictionaries({"mode": st.sampled_from(("truncated", "garbled"))})),
    # Only an application's Xid: the GPU keeps working, so a correct driver has nothing to recover from
    # (a failure that breaks the GPU while the gang is placed races the health report: see LEFT_OUT).
    "device-failure": ("node", st.fixed_dictionaries({"device": st.just("gpu-0"), "kind": st.just("xid"),
                                                      "xid": st.sampled_from(sorted(APPLICATION_XIDS))})),
    "prepare-failure": ("node", _count(1, 3)),
    "prepare-hang": ("node", st.fixed_dictionaries({"seconds": st.integers(1, 5), "count": st.just(1)})),
    "reset-failure": ("node", _count(1, 2)),
    "reset-slow": ("node", st.fixed_dictionaries({"seconds": st.integers(1, 5), "count": st.integers(1, 2)})),
    "unprepare-failure": ("node", _count(1, 3)),
}
"""Fault kind -> what its steps target and how its params are drawn. Every bound keeps the fault one
that a correct driver recovers from within the run: failures and hangs are counted, outages end by
themselves, pods are removed a whole workload at a time, so that a violation is the driver's and not
the plan's."""

_PARTIAL = ("it removes some members of a gang, and nothing recreates them: the gang stays partial "
            "(gang-atomic) whatever the driver")
LEFT_OUT: Mapping[str, str] = {
    "drain-node": _PARTIAL + " (the members on one node)",
    "device-taint": _PARTIAL + " (NoExecute: the members using one device; NoSchedule changes nothing that runs)",
    "arrive": "it creates a workload the scenario holds back; explore does not add workloads",
    "preempt": "it needs a higher-priority workload the scenario holds back; explore does not add workloads",
    "load": "a claim churn of its own (a locust run of tens of seconds), not a fault of the scenario's workloads",
    "scheduler-restart": "it restarts a component of a control plane the run started itself; explore reuses one "
                         "control plane through the kubeconfig backend",
    "controller-manager-restart": "it restarts a component of a control plane the run started itself; explore "
                                  "reuses one control plane through the kubeconfig backend",
    "apiserver-restart": "it restarts a component of a control plane the run started itself; explore reuses one "
                         "control plane through the kubeconfig backend",
}
"""Registered fault kinds that explore never draws, and why."""


def parse_budget(text: str) -> float:
    """``30s``, ``10m``, ``1h``, ``1h30m`` -> seconds; UsageError for anything else or zero."""
    try:
        seconds = parse_duration(text).total_seconds()
    except ValueError:
        raise UsageError(f"--budget {text!r}: expected a duration like 30s, 10m or 1h") from None
    if seconds <= 0:
        raise UsageError(f"--budget {text!r}: must be more than zero")
    return seconds


def _lacks(scenario: Scenario, needs: Sequence[str]) -> str | None:
    for need in needs:
        if need == "local-backend":
            return "it needs a control plane of the run's own; explore reuses one through the kubeconfig backend"
        if need == "fake-driver" and scenario.driver.kind != "fake":
            return "it needs draguard's fake driver"
        if need == "fake-nodes" and any(n.agent != "fake" for n in scenario.nodes):
            return "it needs draguard's fake node agents"
        if need == "interposer" and not scenario.driver.interpose:
            return "it needs the gRPC interposer (driver.interpose: true)"
    return None


def applicable_faults(scenario: Scenario, only: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
    """(fault kinds explore draws for ``scenario``, fault kind -> why it is left out), over every
    registered kind (``only``: just these; UsageError for an unknown one)."""
    unknown = [f for f in only if f not in FAULTS]
    if unknown:
        raise UsageError(f"--fault {', '.join(unknown)}: no such fault kind; known: {', '.join(FAULTS.names())}")
    chosen: list[str] = []
    left: dict[str, str] = {}
    for entry in FAULTS:
        if only and entry.name not in only:
            continue
        why = LEFT_OUT.get(entry.name) or (None if entry.name in SEARCH else
                                           "no search space is declared for it in draguard.harness.campaign.explore")
        why = why or _lacks(scenario, tuple(entry.meta.get("needs", ())))
        if why is None:
            chosen.append(entry.name)
        else:
            left[entry.name] = why
    return chosen, left


@dataclass(frozen=True)
class _Space:
    faults: tuple[str, ...]
    nodes: tuple[str, ...]
    workloads: tuple[tuple[str, int], ...]
    """(name, replicas) of each workload."""
    max_steps: int


@st.composite
def _target(draw: st.DrawFn, space: _Space, scope: Scope) -> dict[str, Any]:
    if scope == "node" and draw(st.booleans()):
        return {"node": draw(st.sampled_from(space.nodes))}
    workload, replicas = draw(st.sampled_from(space.workloads))
    return {"workload": workload, "member": "all" if scope == "gang" else draw(st.integers(0, replicas - 1))}


@st.composite
def _moment(draw: st.DrawFn, space: _Space, earlier: Sequence[str]) -> dict[str, Any]:
    # Hypothesis shrinks a choice towards the first one: moments tied to the workloads' state come first,
    # so that the smallest failing plan is the one least tied to timing (an offset that shrinks to the
    # earliest one that still fails sits on a race: the member it targets may or may not be placed yet).
    how = draw(st.sampled_from(("when", "after", "at") if earlier else ("when", "at")))
    if how == "at":
        return {"at": draw(_seconds(0, 15))}
    if how == "when":
        workload, replicas = draw(st.sampled_from(space.workloads))
        return {"when": {"workload": workload, "phase": draw(st.sampled_from(("Running", "Scheduled"))),
                         "count": draw(st.integers(1, replicas))}, "timeout": _STEP_TIMEOUT}
    return {"after": {"step": draw(st.sampled_from(earlier)), "delay": draw(_seconds(0, 5))}, "timeout": _STEP_TIMEOUT}


@st.composite
def _plan(draw: st.DrawFn, space: _Space) -> tuple[dict[str, Any], ...]:
    steps: list[dict[str, Any]] = []
    for i in range(draw(st.integers(0, space.max_steps))):
        fault = draw(st.sampled_from(space.faults))
        scope, params = SEARCH[fault]
        step: dict[str, Any] = {"name": f"x{i}-{fault}"[:63], **draw(_moment(space, [s["name"] for s in steps])),
                                "fault": fault}
        step["target"] = draw(_target(space, scope))
        drawn = draw(params)
        if drawn:
            step["params"] = drawn
        step["optional"] = True  # the search judges invariants, not whether each drawn step could fire
        steps.append(step)
    return tuple(steps)


def plans(scenario: Scenario, faults: Sequence[str], max_steps: int = 3) -> st.SearchStrategy[tuple[dict[str, Any], ...]]:
    """Plans for ``scenario``: 0 to ``max_steps`` timeline steps in the file's spelling (``StepSpec``
    shaped dicts) over ``faults``; zero steps is the starting scenario itself."""
    space = _Space(tuple(faults), tuple(n.name for n in scenario.nodes),
                   tuple((w.name, w.replicas) for w in scenario.workloads), max_steps)
    return _plan(space)


def plan_document(start: ScenarioDocument, plan: Sequence[Mapping[str, Any]], mutant: str | None, *,
                  name: str | None = None, description: str | None = None) -> ScenarioDocument:
    """``start`` with ``plan`` appended to its timeline and its fake driver set to ``mutant`` (None: as
    ``start`` has it), validated as the loader validates a file (a plan that does not validate is a bug
    of the search: ValueError)."""
    data = start.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data = {"apiVersion": start.api_version, "kind": start.kind, **data}
    spec = data.setdefault("spec", {})
    spec["timeline"] = [*spec.get("timeline", []), *plan]
    if mutant is not None:
        spec.setdefault("driver", {})["mutant"] = mutant
    if name is not None:
        data["metadata"]["name"] = name
    if description is not None:
        data["metadata"]["description"] = description
    problems, document = problems_of(dump_document(ScenarioDocument.model_validate(data)), "<plan>")
    if problems or document is None:
        raise ValueError("a drawn plan does not validate: " + "; ".join(str(p) for p in problems[:3]))
    return document


def describe_plan(plan: Sequence[Mapping[str, Any]]) -> str:
    """One line: each step's fault, moment and target."""
    if not plan:
        return "no added fault"
    parts = []
    for s in plan:
        moment = (f"at {s['at']}" if "at" in s else
                  f"when {s['when']['count']} {s['when']['workload']} {s['when']['phase']}" if "when" in s else
                  f"{s['after']['delay']} after {s['after']['step']}")
        target = s.get("target", {})
        on = target.get("node") or f"{target.get('workload')}[{target.get('member')}]"
        params = ",".join(f"{k}={v}" for k, v in s.get("params", {}).items())
        parts.append(f"{s['fault']}{'(' + params + ')' if params else ''} {moment} on {on}")
    return "; ".join(parts)


@dataclass
class Found:
    """A failing interleaving: the smallest plan that violated ``invariant``, written to ``file``."""

    invariant: str
    plan: tuple[dict[str, Any], ...]
    evidence: str
    first_example: int
    """The example (1-based) that first violated it."""
    first_seconds: float
    """Seconds into the budget when that example ended."""
    file: Path | None = None
    replay: str = "not replayed"
    """``violated again``, ``held on replay`` or the replay's error."""


@dataclass
class ExploreResult:
    scenario: str
    source: str | None
    mutant: str | None
    seed: int
    budget: float
    faults: tuple[str, ...]
    left_out: dict[str, str]
    examples: int = 0
    """Runs done (distinct plans; a plan Hypothesis drew again is not run again)."""
    errors: int = 0
    """Runs that ended in an error and so judged nothing (left out of the search)."""
    elapsed: float = 0.0
    stopped: str = ""
    found: list[Found] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.found else 0


class _BudgetSpent(BaseException):
    """Raised through Hypothesis (which lets a BaseException pass) to stop the search at once."""


class _Abort(BaseException):
    """Stops the search at once with ``error`` (the shared control plane cannot be used any more)."""

    def __init__(self, error: HarnessError) -> None:
        super().__init__(str(error))
        self.error = error


class _Violated(Exception):
    """An example violated an invariant; a subclass per invariant so that Hypothesis keeps each apart."""


_VIOLATIONS: dict[str, type[_Violated]] = {}


def _violation(invariant: str) -> type[_Violated]:
    if invariant not in _VIOLATIONS:
        _VIOLATIONS[invariant] = type(f"Violated[{invariant}]", (_Violated,), {})
    return _VIOLATIONS[invariant]


@dataclass(frozen=True)
class _Outcome:
    violated: tuple[str, ...] = ()
    evidence: str = ""
    error: str | None = None


def violated(result: ScenarioResult) -> list[str]:
    """Invariants ``result`` saw violated that its scenario does not expect or excuse."""
    return sorted(n for n, r in result.invariants.items() if r.status == "violated" and not r.met)


def _evidence(result: ScenarioResult, invariant: str) -> str:
    r = result.invariants[invariant]
    return "; ".join(v.message for v in r.violations[:2]) or r.summary


_CLUSTER_KINDS = ("Node", "DeviceClass", "ResourceSlice", "DeviceTaintRule", "PriorityClass")


def _leftovers(kube: Kube, run_id: str, wait: float = 30.0) -> list[str]:
    """Cluster-scoped objects labelled with ``run_id`` still there after ``wait`` seconds (the next
    example creates the same node and DeviceClass names)."""
    deadline = time.monotonic() + wait
    while True:
        left = [f"{kind} {o['metadata']['name']}" for kind in _CLUSTER_KINDS
                for o in kube.items(kind, label_selector=f"{RUN_LABEL}={run_id}")]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(1.0)


class Explorer:
    """One search: its control plane, its clock, the outcome of every plan it ran."""

    def __init__(self, source: Path, *, mutant: str | None, budget: float, seed: int = 0, max_steps: int = 3,
                 faults: Sequence[str] = (), out: Path = Path("draguard-report/explore"),
                 bin_dir: str | None = None, progress: Callable[[str], None] = lambda m: None,
                 report: Callable[[RunResult, Path], object] | None = None) -> None:
        if mutant is not None and mutant not in MUTANTS:
            raise UsageError(f"--mutant {mutant!r}: no such mutant; known: {', '.join(sorted(MUTANTS))}")
        if budget <= 0:
            raise UsageError("--budget must be more than zero")
        if not 1 <= max_steps <= 16:
            raise UsageError(f"--max-steps {max_steps}: expected 1 to 16")
        self.source = source
        self.start = load_scenario(source)
        problems, document = problems_of(source.read_text(encoding="utf-8-sig"), str(source))
        assert document is not None and not problems  # load_scenario just validated the same text
        self.document = document
        sc = self.start
        if sc.driver.kind != "fake":
            raise UsageError(f"{source}: driver kind {sc.driver.kind} (an installed driver): explore needs draguard's "
                             "fake driver, whose faults and mutants it draws")
        kubelets = [n.name for n in sc.nodes if n.agent != "fake"]
        if kubelets:
            raise UsageError(f"{source}: nodes {', '.join(kubelets[:3])} run hollow kubelets (agent: kubelet); explore "
                             "runs every example on fake node agents against one reused control plane")
        self.mutant = mutant
        self.faults, self.left_out = applicable_faults(sc, faults)
        if not self.faults:
            why = "; ".join(f"{k}: {v}" for k, v in sorted(self.left_out.items()))
            raise UsageError(f"{source}: no fault kind can be explored on this scenario ({why})")
        self.budget = budget
        self.seed = seed
        self.max_steps = max_steps
        self.out = out
        self.bin_dir = bin_dir
        self.progress = progress
        self.report = report
        """Renders a failing example's or a replay's result into the folder given (None: nothing kept)."""
        self.result = ExploreResult(sc.name, str(source), mutant, seed, budget, tuple(self.faults), dict(self.left_out))
        self._outcomes: dict[str, _Outcome] = {}
        self._best: dict[str, tuple[tuple[dict[str, Any], ...], _Outcome]] = {}
        self._durations: list[float] = []
        self._errors_in_row = 0
        self._t0 = 0.0
        self._cluster: LocalCluster | None = None

    # -- the search ------------------------------------------------------------------------------
    def run(self) -> ExploreResult:
        """Start the control plane, search until the budget is spent or Hypothesis is done, write and
        replay what was found, stop the control plane."""
        sc = self.start
        spec = sc.cluster
        config = ClusterConfig(feature_gates=dict(spec.feature_gates),
                               runtime_config={k: "true" if v else "false" for k, v in spec.runtime_config.items()},
                               client_qps=spec.client_qps or DEFAULT_CLIENT_QPS,
                               client_burst=spec.client_burst or DEFAULT_CLIENT_BURST,
                               max_requests_inflight=spec.max_requests_inflight)
        cluster = LocalCluster(f"explore-{uuid.uuid4().hex[:8]}", config, bin_dir=self.bin_dir,
                               progress=lambda m: None)
        try:
            t = time.monotonic()
            cluster.up()
            self._cluster = cluster
            self.progress(f"local control plane up in {time.monotonic() - t:.1f}s; exploring {len(self.faults)} "
                          f"fault kind(s) for {self.budget:.0f}s")
            self._t0 = time.monotonic()
            self._search()
            self.result.elapsed = time.monotonic() - self._t0
            self._write_found()
        finally:
            self._cluster = None
            cluster.down(remove=True)
        return self.result

    def _search(self) -> None:
        max_examples = max(1, min(100_000, math.ceil(self.budget / 5)))  # no run takes under 5 s

        @settings(max_examples=max_examples, deadline=None, database=None, derandomize=False,
                  phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck),
                  report_multiple_bugs=False, verbosity=Verbosity.quiet, print_blob=False)
        @seed(self.seed)
        @given(plans(self.start, self.faults, self.max_steps))
        def example(plan: tuple[dict[str, Any], ...]) -> None:
            self._example(plan)

        try:
            example()
            self.result.stopped = f"Hypothesis ran out of new plans within {max_examples} examples"
        except _BudgetSpent:
            self.result.stopped = "the budget was spent"
        except _Abort as stop:
            raise stop.error from None
        except _Violated:  # Hypothesis re-raises the failure it shrank: recorded already
            self.result.stopped = "the smallest failing plan was found (shrinking done)"
        except HypothesisException as exc:  # never expected: each plan's outcome is cached, so none is flaky
            self.result.stopped = f"Hypothesis stopped: {type(exc).__name__}: {str(exc).splitlines()[0]}"

    def _spent(self) -> bool:
        elapsed = time.monotonic() - self._t0
        mean = sum(self._durations) / len(self._durations) if self._durations else 0.0
        return elapsed + mean > self.budget

    def _example(self, plan: tuple[dict[str, Any], ...]) -> None:
        key = json.dumps(plan, sort_keys=True)
        outcome = self._outcomes.get(key)
        if outcome is None:
            if self._spent():
                raise _BudgetSpent
            try:
                outcome = self._run(plan)
            except HarnessError as exc:
                raise _Abort(exc) from exc
            except Exception as exc:  # a run that broke outside the runner's own error handling
                self.result.errors += 1
                self.progress(f"[{self.result.examples}] error: {type(exc).__name__}: {exc} ({describe_plan(plan)})")
                outcome = _Outcome(error=f"{type(exc).__name__}: {exc}")
            self._outcomes[key] = outcome
            self._errors_in_row = self._errors_in_row + 1 if outcome.error is not None else 0
            if self._errors_in_row >= 3:
                raise _Abort(HarnessError(f"three runs in a row ended in an error, the last: {outcome.error}"))
        if outcome.error is not None:
            reject()
        if outcome.violated:
            invariant = outcome.violated[0]
            if invariant not in self._best:
                self.result.found.append(Found(invariant, plan, outcome.evidence, self.result.examples,
                                               time.monotonic() - self._t0))
            self._best[invariant] = (plan, outcome)  # Hypothesis only tries plans simpler than its best
            raise _violation(invariant)(f"{invariant} violated: {outcome.evidence}")

    def _run(self, plan: tuple[dict[str, Any], ...]) -> _Outcome:
        assert self._cluster is not None
        self.result.examples += 1
        k = self.result.examples
        scenario = parse_scenario(dump_document(plan_document(self.document, plan, self.mutant)),
                                  f"<example {k}>", source=self.source)
        runner = Runner(scenario, RunOptions(backend="kubeconfig", kubeconfig=str(self._cluster.kubeconfig),
                                             bin_dir=self.bin_dir))
        result = runner.run()
        self._durations.append(result.duration)
        left = _leftovers(self._cluster.kube(), runner.run_id)
        if left:
            raise HarnessError(f"example {k} (run {runner.run_id}) left {', '.join(left[:5])} behind on the "
                               "shared control plane; the search cannot go on")
        if result.error is not None:
            self._keep(runner.run_id, result, self.out / "examples" / str(k))
            self.result.errors += 1
            self.progress(f"[{k}] {result.duration:.0f}s error: {result.error} ({describe_plan(plan)})")
            return _Outcome(error=result.error)
        bad = violated(result)
        self._keep(runner.run_id, result, self.out / "examples" / str(k) if bad else None)  # not the ones that held
        verdict = f"VIOLATED {', '.join(bad)}" if bad else "held"
        self.progress(f"[{k}] {result.duration:.0f}s {verdict}: {describe_plan(plan)}")
        return _Outcome(tuple(bad), _evidence(result, bad[0]) if bad else "")

    # -- what was found --------------------------------------------------------------------------
    def _write_found(self) -> None:
        assert self._cluster is not None
        self.out.mkdir(parents=True, exist_ok=True)
        for found in self.result.found:
            plan, outcome = self._best[found.invariant]
            found.plan, found.evidence = plan, outcome.evidence
            found.file = self.write(found)
            self.progress(f"wrote {found.file} ({len(plan)} step(s)); replaying it")
            try:
                runner = Runner(load_scenario(found.file), RunOptions(
                    backend="kubeconfig", kubeconfig=str(self._cluster.kubeconfig), bin_dir=self.bin_dir))
                result = runner.run()
                self._keep(runner.run_id, result, self.out / "replays" / found.file.stem)
            except Exception as exc:  # a replay that broke outside the runner's own error handling
                found.replay = f"error: {type(exc).__name__}: {exc}"
                self.progress(f"replay of {found.file.name}: {found.replay}")
                continue
            if result.error is not None:
                found.replay = f"error: {result.error}"
            elif found.invariant in violated(result):
                found.replay = "violated again"
            else:
                found.replay = "held on replay (a race the plan does not pin down)"
            self.progress(f"replay of {found.file.name}: {found.invariant} {found.replay}")

    def _keep(self, run_id: str, result: ScenarioResult, folder: Path | None) -> None:
        """Have ``report`` render ``result`` into ``folder`` (which places what the run recorded); without
        a folder or a ``report``, discard what the run recorded."""
        if folder is not None and self.report is not None:
            self.report(RunResult(run_id, [result]), folder)
        elif result.record is not None:
            result.record.discard()
            result.record = None

    def write(self, found: Found) -> Path:
        """Write ``found``'s plan as a scenario file into the output folder (whole or not at all); its path."""
        driver = self.mutant or self.start.driver.mutant or "correct-driver"
        name = f"{self.start.name[:30]}-{found.invariant}".strip("-")[:63].rstrip("-")
        what = f"the {driver} mutant" if driver != "correct-driver" else "the correct driver"
        description = (f"Found by draguard explore from {self.start.name} against {what} (seed {self.seed}): "
                       f"{describe_plan(found.plan)} violates {found.invariant}.")
        document = plan_document(self.document, found.plan, self.mutant, name=name, description=description)
        header = (f"Found by `draguard explore {self.source}{' --mutant ' + self.mutant if self.mutant else ''} "
                  f"--seed {self.seed}`: the smallest plan Hypothesis reached that violates {found.invariant}.\n"
                  f"Evidence seen: {found.evidence}\n"
                  f"Replay: draguard run <this file> (fails on {found.invariant}; add it to expect.violate to keep "
                  "the file as an incident reproduction).")
        path = self.out / f"{name}.yaml"
        atomic_write(path, dump_document(document, header).encode("utf-8"), sync="none")
        return path


def explore(source: Path, *, mutant: str | None, budget: float, seed: int = 0, max_steps: int = 3,
            faults: Sequence[str] = (), out: Path = Path("draguard-report/explore"), bin_dir: str | None = None,
            progress: Callable[[str], None] = lambda m: None,
            report: Callable[[RunResult, Path], object] | None = None) -> ExploreResult:
    """Search ``source``'s interleavings (see the module docstring); UsageError for bad input before
    anything starts."""
    return Explorer(source, mutant=mutant, budget=budget, seed=seed, max_steps=max_steps, faults=faults,
                    out=out, bin_dir=bin_dir, progress=progress, report=report).run()

