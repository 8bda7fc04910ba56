"""The runner: one scenario, end to end, on a real control plane; a sequencer of phases.

Phases, each on the timeline:

1. **set up** (``setup.py``): start a local control plane with the scenario's feature gates, or
   connect to one; the run's namespace, journal and watches (the :class:`~draguard.harness.judge.Judge`
   says what it watches);
2. **fleet**: who runs the nodes and drivers, registered in :data:`~draguard.harness.fleet.FLEETS`
   (``fake``, ``kubelet``, ``external``, ``installed``), picked by :func:`~draguard.harness.fleet.fleet_for`;
3. **deploy** (``deploy.py``): DeviceClasses, PriorityClasses, claims/templates, PodGroups, then the
   pods (interleaved where the scenario says);
4. **timeline**: every chaos step on its own thread, at its time, condition or after another step
   (``timeline.py``), each journaled first; meanwhile the judge judges the invariants registered
   ``judged="continuously"`` every :data:`JUDGE_INTERVAL` and watches for the expected progress;
5. **settle** (``settle.py``): until nothing changed for :data:`SETTLE_QUIET` (:data:`RETRY_QUIET`
   while a pod is not running: the scheduler's and kubelet's back-offs) or the settle timeout; then
   every invariant but the after-cleanup ones is judged with gangs settled;
6. **cleanup** (``cleanup.py``): faults meant to last "until cleanup" are undone first (a driver left
   down comes back), then the workloads are deleted; once consumers are gone and no driver has a call
   in flight (or the cleanup timeout passed) the ``after-cleanup`` invariants are judged;
7. **teardown** (``cleanup.py``): the other faults undone, every object with the run label deleted,
   the fleet stopped, cluster down; the judge writes what it found into the :class:`ScenarioResult`.

The runner writes no report files. What the run records besides its result (the interposer's calls,
the nodes' device truth, a ``load`` step's files) goes into the run's own folder under the state
directory (:func:`~draguard.harness.core.paths.run_dir`), listed on the result
(:attr:`ScenarioResult.record`); ``draguard.reports`` places it into the report directory when it
renders the result. The run removes the rest of its folder at its end, and the folder itself when it
recorded nothing; each run first prunes the records of old runs that no render took
(:func:`~draguard.harness.runner.cleanup.prune_records`).

A step that errs, starts later than its tolerance, never runs, or whose fault never fired fails
the scenario unless it is ``optional``; so does an unmet ``expect.progress`` or ``expect.evidence``.

Talks to: the cluster backend, the fleet, the judge, the fault registry (filled by ``draguard.chaos``,
which the CLI imports), the journal.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cluster.local import LocalCluster
from draguard.harness.core.errors import DraguardError
from ..kube import Kube, Obj
from draguard.harness.core.paths import run_dir
from draguard.harness.core.registry import FAULTS
from ..result import RunRecord, ScenarioResult, StepResult, StepStatus, TimelineEvents
from ..scenario.types import Scenario, Step
from ..fleet import FLEETS, FleetRun, fleet_for
from ..fleet.fake import topology_file
from ..judge import JUDGE_INTERVAL, Judge, record_breaches
from ..judge.judge import evidence_matches
from ..judge.observe import Observer, Timeline
from . import cleanup, setup
from .context import RunHandles, StepContext
from .deploy import Deployment
from .journal import RUN_LABEL, Journal, UndoAction
from .settle import RETRY_QUIET, SETTLE_QUIET, quiet_needed, settle
from .timeline import StepRun, TimelinePlayer

__all__ = ["Runner", "RunOptions", "JUDGE_INTERVAL", "SETTLE_QUIET", "RETRY_QUIET", "quiet_needed", "step_status",
           "evidence_matches", "record_breaches", "topology_file"]


@dataclass(frozen=True)
class RunOptions:
    backend: str | None = None
    """Override of the scenario's backend (``local`` | ``kubeconfig`` | ``kind``)."""
    kubeconfig: str | None = None
    context: str | None = None
    bin_dir: str | None = None
    seed: int | None = None
    progress: Callable[[str], None] = lambda message: None


class Runner:
    def __init__(self, scenario: Scenario, options: RunOptions) -> None:
        self.scenario = scenario
        self.options = options
        self.run_id = uuid.uuid4().hex[:8]
        self.seed = options.seed if options.seed is not None else scenario.seed
        self.timeline = Timeline()
        self._spool = run_dir(self.run_id) / "timeline.spool.jsonl"
        self.timeline.spool_to(self._spool)  # bounded memory while a big run goes on
        self.result = ScenarioResult(scenario.name, str(scenario.source) if scenario.source else None, self.seed,
                                     hold=scenario.expect.hold, violate=scenario.expect.violate,
                                     record=RunRecord(run_dir(self.run_id) / "record"))
        self.judge = Judge(scenario, self.timeline, options.backend or scenario.cluster.backend)
        """Watches the run, judges its invariants and expectations."""
        self._handles: RunHandles | None = None
        self._deployment: Deployment | None = None
        self._player: TimelinePlayer | None = None
        self._contexts: dict[str, StepContext] = {}
        self._fired: dict[str, int] = {}

    def log(self, message: str) -> None:
        self.timeline.add("phase", "Run", self.scenario.name, "phase", message)
        self.options.progress(message)

    # -- the whole run ---------------------------------------------------------------------------
    def run(self) -> ScenarioResult:
        started = time.monotonic()
        cleanup.prune_records()
        journal = Journal(self.run_id)
        cluster: LocalCluster | None = None
        try:
            backend = self.options.backend or self.scenario.cluster.backend
            kubeconfig = setup.kubeconfig_of(self.scenario, backend, self.options.kubeconfig) if backend != "local" else None
            kube, cluster, environment = setup.start_cluster(
                self.scenario, backend, self.run_id, kubeconfig=kubeconfig, context=self.options.context,
                bin_dir=self.options.bin_dir, seed=self.seed, log=self.log, progress=self.options.progress)
            self.result.environment.update(environment)
            namespace = f"dg-{self.scenario.name[:40]}-{self.run_id}".replace("--", "-")
            journal.run_started(str(cluster.kubeconfig) if cluster else kubeconfig, namespace,
                                self.run_id, str(cluster.dir) if cluster else None)
            for sup in (cluster.components.values() if cluster else []):
                if sup.pid:
                    journal.process(sup.pid, sup.name)
            # A fresh controller manager takes seconds to make the namespace's ServiceAccount: start
            # the fleet meanwhile and wait for it just before the pods are created.
            kube.create_namespace(namespace, {RUN_LABEL: self.run_id}, wait=False)
            observer = Observer(kube, self.timeline)
            self._handles = h = RunHandles(self.run_id, self.scenario, kube, namespace, journal, self.timeline,
                                           observer, setup.node_root(self.scenario, self.run_id), cluster)
            self._deployment = Deployment(kube, self.scenario, namespace, self.run_id, self.judge.created)
            h.create_workload = self._deployment.create_workload
            h.kubeconfig = str(cluster.kubeconfig) if cluster else kubeconfig
            h.record = self.result.record
            self.judge.attach(h, f"{RUN_LABEL}={self.run_id}")
            self._start_fleet()
            self.judge.remember_published()  # before any step can take a node's slices away
            # Judged from the first pod on: with thousands of pods, creating them takes a minute, and a
            # violation while they are scheduled (two gangs deadlocked, a device allocated twice, even
            # one gone again) must not wait for, or be missed before, the end of the deployment.
            checker = threading.Thread(target=self.judge.check_continuously, name="invariants", daemon=True)
            checker.start()
            self._deploy()
            progress = threading.Thread(target=self.judge.watch_progress, name="progress", daemon=True)
            progress.start()
            self._play_timeline()
            settle(h, self.scenario, self.judge, self.log)
            self.judge.stop.set()
            checker.join(timeout=10)
            self._cleanup_phase()
        except DraguardError as exc:
            self.result.error = str(exc)
            self.result.error_kind = type(exc).__name__
            self.log(f"error: {exc}")
        finally:
            self.judge.stop.set()
            if self._handles is not None:
                self._handles.stop.set()
            if self._player is not None:
                self._player.join(timeout=30)
            try:
                self._count_fired()
            except (DraguardError, OSError):
                pass
            try:
                cleanup.teardown(self._handles, cluster, self.result, self.log)
                journal.close()
            except DraguardError as exc:  # the journal stays: `draguard cleanup` finishes the job
                if self.result.error is None:
                    self.result.error, self.result.error_kind = f"teardown: {exc}", type(exc).__name__
            self.result.duration = time.monotonic() - started
            self._finish()
        return self.result

    # -- phases ----------------------------------------------------------------------------------
    def _start_fleet(self) -> None:
        """Start who runs the nodes and drivers (``fleet_for``); the devices it published are the inventory."""
        h = self._h()
        name = fleet_for(self.scenario, own_cluster=h.cluster is not None)
        h.fleet = FLEETS.get(name).target()
        h.fleet.start(FleetRun(
            self.run_id, self.scenario, h.kube, h.cluster,
            h.cluster.kubeconfig if h.cluster else Path(h.kubeconfig or ""), h.node_root,
            self.options.bin_dir, self._record, h.journal.process,
            self._dep().create, lambda: h.observer.objects("ResourceSlice"), h.observer.wait_for, self.log,
            self.options.progress, self._journal_fleet_change))
        self.judge.inventory = h.fleet.inventory

    def _journal_fleet_change(self, kind: str, args: dict[str, Any]) -> None:
        """Journal how to undo a change the fleet is about to make to the cluster (``draguard cleanup``)."""
        self._h().journal.fault("fleet", "fleet", UndoAction(kind, args))

    def _deploy(self) -> None:
        self._dep().deploy(self.log)

    def _cleanup_phase(self) -> None:
        h = self._h()
        h.stop.set()  # steps still waiting or sleeping through a duration end now
        if self._player is not None:
            self._player.join(timeout=60)
        self._count_fired()
        cleanup.undo(h, True, self.log)
        self.log("cleanup: faults that lasted until now are undone; deleting the workloads")
        cleanup.cleanup(h, self.judge, self.scenario.settle.cleanup.total_seconds(), self.result, self.log)

    def _play_timeline(self) -> None:
        """Every step on its own thread; returns when all of them finished or gave up."""
        h = self._h()
        if not self.scenario.timeline:
            return
        self._player = TimelinePlayer(
            self.scenario.timeline,
            clock=self.timeline.now,
            condition=self.judge.condition,
            wait_for=h.observer.wait_for,
            execute=self._run_step,
            stop=h.stop,
        )
        self._player.start()
        longest = max((s.at.total_seconds() if s.at else 0.0) + s.timeout.total_seconds() for s in self.scenario.timeline)
        if not self._player.join(timeout=longest + 600):
            self.log("some steps are still running; moving on")

    def _run_step(self, step: Step) -> tuple[bool, str]:
        h = self._h()
        entry = FAULTS.get(step.fault)
        ctx = StepContext(h, step, random.Random(f"{self.seed}:{step.index}"))
        self._contexts[step.name] = ctx
        h.timeline.add("fault", step.fault, step.name, "start", f"target={step.target}")
        self.log(f"step {step.name}: {entry.summary}")
        try:
            entry.target(ctx, step.params)
            ok, detail = True, "; ".join(ctx.notes)
        except DraguardError as exc:
            ok, detail = False, str(exc)
        h.timeline.add("fault", step.fault, step.name, "done" if ok else "failed", detail)
        return ok, detail

    def _count_fired(self) -> None:
        """Read how often each step's fault fired so far (kept at its highest: undo may reset counters)."""
        for name, ctx in list(self._contexts.items()):
            n = ctx.fired_count()
            if n is not None:
                self._fired[name] = max(n, self._fired.get(name, 0))

    # -- results ---------------------------------------------------------------------------------
    def _finish(self) -> None:
        self._finish_steps()
        self.judge.finish(self.result, self._player.runs if self._player is not None else {})
        if self.result.timeline is None:  # stopped before the fleet: what the timeline has so far
            self.result.timeline = TimelineEvents(tuple(self.timeline.events()))
        # The runner writes no report files: renderers (draguard.reports) take the result and its record from here.
        self._spool.unlink(missing_ok=True)
        record = self.result.record
        if record is not None and not record.existing():
            record.discard()  # nothing to place: the run's folder goes now
            self.result.record = None

    def _record(self, name: str, about: str) -> Path:
        assert self.result.record is not None
        return self.result.record.path(name, about)

    def _finish_steps(self) -> None:
        runs = self._player.runs if self._player is not None else {}
        for step in self.scenario.timeline:
            run = runs.get(step.name) or StepRun(step, detail="the run ended before the timeline started")
            fired = self._fired.get(step.name)
            status = step_status(run, fired)
            detail = run.detail
            if status == "late":
                detail = f"started {run.late:.1f}s after it was due (tolerance {step.tolerance.total_seconds():g}s); {detail}"
            elif status == "not-fired":
                detail = f"its fault never fired; {detail}"
            ctx = self._contexts.get(step.name)
            self.result.steps.append(StepResult(
                step.name, step.fault, run.ran if run.ran is not None else (run.due or 0.0), status == "ok", detail,
                due=run.due, ran=run.ran, finished=run.finished, fired=fired, optional=step.optional, status=status,
                load=ctx.load if ctx is not None else None))

    def live_kube(self) -> Kube | None:
        """The run's API client once its cluster is up and until teardown (samplers such as the benchmarks use it)."""
        h = self._handles
        return h.kube if h is not None else None

    def live_kubeconfig(self) -> str | None:
        """The kubeconfig of the run's cluster while it is up (benchmarks' helper processes use it)."""
        h = self._handles
        return h.kubeconfig if h is not None else None

    def live_objects(self, kind: str) -> list[Obj]:
        """What the run's watch of ``kind`` holds now (the run's namespace for namespaced kinds; [] before
        its cluster is up). Shared with the run: read, never change."""
        h = self._handles
        return h.observer.objects(kind) if h is not None else []

    def live_namespace(self) -> str:
        """The run's namespace once its cluster is up and until teardown ("" otherwise)."""
        return self._namespace()

    def _namespace(self) -> str:
        return self._handles.namespace if self._handles is not None else ""

    def _h(self) -> RunHandles:
        assert self._handles is not None
        return self._handles

    def _dep(self) -> Deployment:
        assert self._deployment is not None
        return self._deployment


def step_status(run: StepRun, fired: int | None) -> StepStatus:
    """What became of a step: never ran, errored, ran late, never fired, or ok."""
    if run.ran is None:
        return "never-ran"
    if not run.ok:
        return "error"
    if run.late > run.step.tolerance.total_seconds():
        return "late"
    if fired == 0:
        return "not-fired"
    return "ok"


