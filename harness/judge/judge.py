"""The judge of one run: what the invariants see, when they are judged, and what they found.

:class:`Judge` owns the run's watches (which kinds the :class:`~draguard.harness.judge.observe.Observer`
keeps), assembles the :class:`~draguard.harness.invariants.Snapshot` an invariant reads (the watches'
objects, each node's driver books and device truth, read again only when their files changed, the
interposer's record of the driver's gRPC calls), and judges rounds:

- while the scenario runs, the invariants registered ``judged="continuously"``: everything every
  :data:`JUDGE_INTERVAL`, and the claims alone as soon as a claim changes (:data:`CLAIMS_ROUND_GAP`);
- once the run settled (``continuously`` and ``at-settle``), and after cleanup (``after-cleanup``).

A breach counts once it lasted its grace period (:func:`record_breaches`); every breach is kept with
the time it was first seen. The judge also watches for the progress ``expect.progress`` asks for, and
at the end turns what it found into the scenario's invariant and expectation results.

Talks to: the observer (watches), the fleet (driver books, device truth, interposer record), the
invariants registry. The runner asks it; it starts nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from draguard.harness.core.errors import DraguardError
from draguard.harness.core.fsio import StampedReads
from draguard.harness.core.registry import INVARIANTS
from draguard.harness.fleet.coverage import coverage

from ..cdi import resolvable
from ..devices.probe import FakeProbe
from ..devices.truth import DeviceTruth, NodeTruth
from ..driver.inflight import in_flight
from ..driver.state import checkpoint_path, read_checkpoint
from ..fleet.base import Fleet
from ..invariants import (
    DeviceId,
    DeviceState,
    DriverCall,
    Gang,
    GpuUsage,
    NodeDriverState,
    Snapshot,
    Violation,
    evaluate,
    judged,
)
from ..proxy.recorder import driver_call
from ..result import Evidence, ExpectationResult, InvariantResult, ScenarioResult, Status
from ..scenario.checks import lacking
from ..scenario.types import Condition, EventExpectation, EvidenceRule, Progress, Scenario
from .incremental import INCREMENTAL, Incremental
from .observe import Observer, Timeline

__all__ = ["Judge", "JudgedRun", "JUDGE_INTERVAL", "CLAIMS_ROUND_GAP", "record_breaches", "evidence_matches"]

JUDGE_INTERVAL = 0.5
"""Seconds between two rounds of the continuous invariants. A violation the cluster shows is reported
at most this long plus one round's evaluation later: the detection-latency goal is a p99 under 1 s, so
the interval leaves room for a round at 500 nodes (``draguard bench invariant-cost`` measures one;
docs/benchmarks.md has the figures)."""

CLAIMS_ROUND_GAP = 0.1
"""Seconds at least between two claims rounds (see ``Judge.check_continuously``): while thousands of
pods are scheduled claims change hundreds of times a second, and a claims round costs a few ms."""


class StepRun(Protocol):
    """A step as it ran (the runner's timeline player keeps one per step)."""

    @property
    def ran(self) -> float | None: ...


class JudgedRun(Protocol):
    """What the judge looks at in a run (the runner's handles are one)."""

    @property
    def observer(self) -> Observer: ...

    @property
    def fleet(self) -> Fleet: ...

    @property
    def namespace(self) -> str: ...

    @property
    def node_root(self) -> Path: ...

    @property
    def driver_name(self) -> str: ...


class Judge:
    """Judges one run of ``scenario`` (on ``backend``), noting on ``timeline`` what it found."""

    def __init__(self, scenario: Scenario, timeline: Timeline, backend: str) -> None:
        self.scenario = scenario
        self.timeline = timeline
        self.backend = backend
        self.violations: dict[str, dict[str, Evidence]] = {name: {} for name in INVARIANTS.names()}
        """Every breach found, by invariant and key."""
        self.checked: set[str] = set()
        """The invariants judged at least once."""
        self.inventory: frozenset[DeviceId] = frozenset()
        """Every device the driver published once the fleet was up (what no-leak compares with)."""
        self.settled = False
        self.created: set[str] = set()
        """Workloads whose pods have all been created (Gang.created)."""
        self.stop = threading.Event()
        """Set when the continuous rounds and the progress watch end."""
        self.progress_seen: dict[Progress, float] = {}
        """When each progress ``expect.progress`` asks for was reached."""
        self._run: JudgedRun | None = None
        self._members: dict[str, tuple[str, ...]] | None = None
        self._first_seen: dict[tuple[str, str], float] = {}
        self._published: dict[DeviceId, Mapping[str, Any]] = {}
        """Every device a snapshot saw published, as last published (see Snapshot.published_before).
        Replaced, never changed in place: snapshots share it (a claims round, many a second, copied
        5000 devices each time)."""
        self._published_from: object = None
        """The Snapshot.devices last added to ``_published`` (the same object while no slice changed)."""
        self._views: Snapshot | None = None
        """The last full snapshot: its indexes of unchanged objects are handed on (Snapshot.with_views_of)."""
        self._calls: list[DriverCall] = []
        """The interposer's records converted so far (see _driver_calls)."""
        self._calls_lock = threading.Lock()
        self._published_lock = threading.Lock()
        self._judge_lock = threading.Lock()
        self._driver_states: StampedReads[str, NodeDriverState] = StampedReads()
        """Each node's driver books, read again when its checkpoint or CDI folder changed (``driver_state``)."""
        self._truths: dict[tuple[Path, str], DeviceTruth] = {}
        """One reader per node's device truth, kept across snapshots: it parses the file again only when
        its bytes changed (a new reader each snapshot parsed every node's truth every second)."""
        self._truth_states: StampedReads[tuple[Path, str], NodeTruth] = StampedReads()
        """Each node's device truth, read again when its file changed (``_truth_now``)."""
        self._driver_paths: dict[str, tuple[object, Path, Path]] = {}
        """Each node's driver handle, its checkpoint and CDI folder (named once per handle: 500 nodes
        are looked at twice a second)."""

    def attach(self, run: JudgedRun, node_selector: str) -> None:
        """Look at ``run``: the watches the invariants read, started (the run's namespace for pods, claims
        and events; the driver's slices; the run's nodes when they are draguard's own)."""
        self._run = run
        observer, namespace, driver = run.observer, run.namespace, self.scenario.driver.name
        observer.watch("Pod", namespace)
        observer.watch("ResourceClaim", namespace)
        observer.watch("Event", namespace)
        observer.watch("ResourceSlice", keep=lambda s: s.get("spec", {}).get("driver") == driver)
        observer.watch("DeviceClass")
        observer.watch("Node", label_selector=node_selector if self.scenario.driver.kind == "fake" else None)
        observer.start()

    def _h(self) -> JudgedRun:
        assert self._run is not None
        return self._run

    def check_continuously(self) -> None:
        """Judge the continuous invariants: everything every ``JUDGE_INTERVAL``, and in between, as soon
        as a claim changes (at most every ``CLAIMS_ROUND_GAP``), the changed claims by the invariants
        that read claims, slices and classes alone (``INCREMENTAL``). A full round reads every node's
        driver books and device truth and costs tens of milliseconds at 500 nodes; a claims round a few,
        so a double allocation in the API is reported without waiting for the next full round."""
        names = judged("continuously")
        incremental = Incremental()
        claim_names = [n for n in names if n in INCREMENTAL]
        whole = [n for n in names if n not in INCREMENTAL]
        observer = self._h().observer
        seen = observer.changes("ResourceClaim")
        full_due = time.monotonic() + JUDGE_INTERVAL
        while not self.stop.is_set():
            try:
                left = full_due - time.monotonic()
                if left > 0:
                    now_seen = observer.wait_change("ResourceClaim", seen, min(left, 0.5))
                    if now_seen != seen and time.monotonic() < full_due:
                        seen = now_seen
                        self.judge(claim_names, incremental.reduce(self._claims_snapshot()), partial=True)
                        self.stop.wait(CLAIMS_ROUND_GAP)
                    continue
                seen = observer.changes("ResourceClaim")
                snapshot = self.snapshot(drivers_state=False)
                self.judge(claim_names, incremental.reduce(snapshot))
                self.judge(whole, snapshot)
                full_due = time.monotonic() + JUDGE_INTERVAL
            except DraguardError as exc:
                self.timeline.add("invariant", "*", self.scenario.name, "error", str(exc))
                full_due = time.monotonic() + JUDGE_INTERVAL
                self.stop.wait(JUDGE_INTERVAL)

    def watch_progress(self) -> None:
        """Watch, on every change, for the progress ``expect.progress`` asks for; note when it happened."""
        wanted = list(self.scenario.expect.progress)
        if not wanted:
            return
        h = self._h()

        def check() -> bool:
            for p in wanted:
                if p not in self.progress_seen and self._progress_reached(p):
                    self.progress_seen[p] = self.timeline.now()
                    self.timeline.add("expect", "progress", self.scenario.name, "reached", p.describe())
            return len(self.progress_seen) == len(wanted) or self.stop.is_set()

        while not self.stop.is_set():
            if h.observer.wait_for(check, 1.0):
                return

    def _progress_reached(self, p: Progress) -> bool:
        reached = [self.condition(Condition(w, p.phase, p.count or self.scenario.workload(w).replicas))
                   for w in p.workloads]
        return all(reached) if p.need == "all" else any(reached)

    def condition(self, cond: Condition) -> bool:
        tally = self._h().observer.tally(cond.workload)
        if cond.phase == "Deleted":
            return self.scenario.workload(cond.workload).replicas - tally["live"] >= cond.count
        return tally["scheduled" if cond.phase == "Scheduled" else f"phase:{cond.phase}"] >= cond.count

    def remember_published(self) -> None:
        """Note the devices published now (Snapshot.published_before is built from what was noted)."""
        devices = Snapshot(time=0.0, slices=tuple(self._h().observer.objects("ResourceSlice"))).devices
        with self._published_lock:
            self._published = {**self._published, **devices}

    def judge(self, names: list[str], snapshot: Snapshot | None = None, partial: bool = False) -> None:
        """Judge ``names`` now (over ``snapshot`` if given). A breach with a grace period counts once it
        lasted that long, seen in judgment after judgment; it is reported from the time it started.
        ``partial``: the snapshot holds only part of what the invariants read (a claims round), so a
        breach missing from it has not ended."""
        names = [n for n in names if not self._judgeable(n)]
        with self._judge_lock:
            snap = snapshot or self.snapshot()
            for name, violations in evaluate(snap, names).items():
                self.checked.add(name)
                for key, evidence in record_breaches(name, violations, snap.time, self._first_seen,
                                                     self.violations[name], prune=not partial):
                    self.timeline.add("invariant", name, self.scenario.name, "violated", evidence.message)

    def _claims_snapshot(self) -> Snapshot:
        """What a claims round judges: the claims, slices and classes the watches hold now (a full
        round's :meth:`snapshot` adds the rest)."""
        h = self._h()
        with self._published_lock:
            published_before = self._published
        snap = Snapshot(time=self.timeline.now(), claims=h.observer.frozen("ResourceClaim"),
                        slices=h.observer.frozen("ResourceSlice"), device_classes=h.observer.frozen("DeviceClass"),
                        initial_inventory=self.inventory, published_before=published_before)  # fmt: skip
        return snap.with_views_of(self._views)

    def snapshot(self, drivers_state: bool = True) -> Snapshot:
        """What the invariants judge. The drivers' books are always there (no-double-allocation reads
        them while the run goes on: a device prepared for two claims may last only seconds; each node
        is read again only when its files changed); ``drivers_state=False`` skips the GPU probe."""
        h = self._h()
        grace = self.scenario.timing.gang_grace.total_seconds()
        if self._members is None:  # named once: 5000 names twice a second cost the judging round
            self._members = {w.name: w.pod_names() for w in self.scenario.workloads}
        gangs = tuple(
            Gang(w.name, h.namespace, self._members[w.name], len(w.claims), self.settled,
                 min_count=w.min_count, grace=grace, created=w.name in self.created)
            for w in self.scenario.workloads
        )
        drivers = tuple(self.driver_state(n) for n in h.fleet.drivers) + h.fleet.external_states()
        truth = tuple(self._truth_now(h.node_root, n) for n in h.fleet.drivers) + h.fleet.node_truths()
        usage = self._gpu_usage(h) if drivers_state else {}
        snap = self._claims_snapshot().replace(
            pods=h.observer.frozen("Pod"), drivers=drivers, gangs=gangs, gpu_usage=usage or None, device_truth=truth,
            driver_calls=self._driver_calls(h))
        devices = snap.devices
        with self._published_lock:
            if devices is not self._published_from:  # computed again: a slice changed
                self._published = {**self._published, **devices}
                self._published_from = devices
        self._views = snap
        return snap

    def driver_state(self, node: str) -> NodeDriverState:
        """One node's driver books and CDI specs; read again only when the checkpoint or the CDI
        folder changed on disk (judged every second, at 500 nodes)."""
        h = self._h()
        handle = h.fleet.drivers[node]
        named = self._driver_paths.get(node)
        if named is None or named[0] is not handle:
            named = (handle, checkpoint_path(handle.root, node, h.driver_name), handle.node_root / node / "cdi")
            self._driver_paths[node] = named
        return self._driver_states.get(node, named[1:], lambda: self._read_driver_state(node))

    def _read_driver_state(self, node: str) -> NodeDriverState:
        h = self._h()
        root = h.fleet.drivers[node].root
        cp = read_checkpoint(root, node, h.driver_name)
        prepared = {
            uid: tuple(DeviceId(h.driver_name, d.pool, d.device) for d in rec.devices)
            for uid, rec in cp.claims.items()
        }
        devices = {name: DeviceState(rec.state.value, (rec.claim,) if rec.claim else ()) for name, rec in cp.devices.items()}
        cdi_dir = h.fleet.drivers[node].node_root / node / "cdi"
        prefix = f"{h.driver_name}-"
        specs = frozenset(p.name[len(prefix):-len(".json")] for p in cdi_dir.glob(f"{prefix}*.json")) if cdi_dir.exists() else frozenset()
        try:
            booted: float | None = float((cdi_dir.parent / "booted").read_text()) + self.timeline.now() - time.time()
        except (FileNotFoundError, ValueError):
            booted = None
        return NodeDriverState(node=node, driver=h.driver_name, prepared=prepared, devices=devices, cdi_specs=specs,
                               cdi_devices=resolvable(cdi_dir), booted=booted)

    def _gpu_usage(self, h: JudgedRun) -> dict[DeviceId, GpuUsage]:
        """What each node's probe sees: processes and memory per device, MIG devices on their own
        (a parent's memory counts its MIG devices', as NVML's does, so it is taken out here)."""
        out: dict[DeviceId, GpuUsage] = {}
        for node in h.fleet.drivers:
            for d in FakeProbe(self.truth(h.node_root, node)).probe().devices:
                own = d.memory_used - sum(m.memory_used for m in d.mig_devices)
                out[DeviceId(h.driver_name, node, d.name)] = GpuUsage(tuple(p.pid for p in d.processes), own)
                for m in d.mig_devices:
                    out[DeviceId(h.driver_name, node, m.name)] = GpuUsage(tuple(p.pid for p in m.processes), m.memory_used)
        return out

    def _truth_now(self, root: Path, node: str) -> NodeTruth:
        """One node's device truth, read again only when its file changed on disk (as ``_driver_state``)."""
        reader = self.truth(root, node)
        return self._truth_states.get((root, node), (reader.path,), reader.read)

    def truth(self, root: Path, node: str) -> DeviceTruth:
        reader = self._truths.get((root, node))
        if reader is None:
            reader = self._truths.setdefault((root, node), DeviceTruth(root, node))
        return reader

    def _driver_calls(self, h: JudgedRun) -> tuple[DriverCall, ...]:
        """The interposer's record so far, timed from the scenario's start (empty without an interposer).
        Each record is converted once, when a snapshot first sees it."""
        if h.fleet.interposer is None:
            return ()
        offset = self.timeline.now() - time.time()
        with self._calls_lock:  # snapshots are taken by the checker and by the final judgments
            self._calls.extend(driver_call(e, offset)
                               for e in h.fleet.interposer.recorder.recorded(since=len(self._calls)))
            return tuple(self._calls)

    def calls_in_flight(self) -> bool:
        return any(in_flight(p.plugin_dir) for p in self._h().fleet.drivers.values())

    # -- results ---------------------------------------------------------------------------------
    def finish(self, result: ScenarioResult, runs: Mapping[str, StepRun]) -> None:
        """Write what the run found into ``result``: each invariant's status, expectation and evidence,
        and whether each ``expect.progress`` and ``expect.evidence`` was met (``runs``: the steps as
        they ran, for progress timed from a step)."""
        exp = self.scenario.expect
        result.ignore = exp.ignored
        for entry in INVARIANTS:
            want = result.expectation(entry.name)  # every violation counts unless violate/ignore names it
            found = list(self.violations.get(entry.name, {}).values())
            status: Status = "violated" if found else "held" if entry.name in self.checked else "not-checked"
            note = self._judgeable(entry.name)
            if self.scenario.driver.kind == "external":  # an installed driver: no books, no device truth
                fleet = self._run.fleet if self._run is not None else None
                partial, not_judged = coverage(fleet is not None and fleet.real_nodes,
                                               fleet is not None and fleet.reads_node_files,
                                               fleet is not None and fleet.reads_books)
                if entry.name in not_judged and not found:
                    status, note = "not-checked", f"not checked on an installed driver: {not_judged[entry.name]}"
                elif entry.name in not_judged:  # what was seen counts, though the rest could not be judged
                    note = f"judged in part on an installed driver (it {not_judged[entry.name]})"
                elif entry.name in partial and status != "not-checked":
                    note = partial[entry.name]
            result.invariants[entry.name] = InvariantResult(entry.name, entry.summary, status, want.expected, found,
                                                            note, want.required, want.reason)
        for name in (*exp.hold, *exp.violate):
            if result.invariants[name].status == "not-checked" and result.error is None:
                result.error = f"invariant {name} could not be judged (the run stopped early)"
        for p in exp.progress:
            result.expectation_results.append(self._progress_result(p, runs))
        for event in exp.events:
            result.expectation_results.append(self._event_result(event))
        for rule in exp.evidence:
            found = result.invariants[rule.invariant].violations
            match = next((v for v in found if evidence_matches(rule, v, self._namespace())), None)
            result.expectation_results.append(ExpectationResult(
                "evidence", rule.describe(), match is not None,
                f"carried by: {match.message}" if match is not None
                else f"none of its {len(found)} violation(s) names it"))

    def _event_result(self, want: EventExpectation) -> ExpectationResult:
        """Whether an Event ``want`` describes came in the run's namespace (the first one, when it must)."""
        namespace = self._namespace()
        for e in self.timeline.events():
            if e.get("kind") != "Event" or e.get("namespace") != namespace:
                continue
            reason, _, message = str(e.get("summary", "")).partition(": ")
            if want.matches(str(e.get("name", "")).split(".")[0], reason, message):
                seen = f"{e['name']} at {float(e.get('t', 0.0)):.1f}s: {e.get('summary', '')}"
                return ExpectationResult("event", want.describe(), want.seen, f"seen: {seen}")
        return ExpectationResult("event", want.describe(), not want.seen, "never seen during the run")

    def _progress_result(self, p: Progress, runs: Mapping[str, StepRun]) -> ExpectationResult:
        """Whether progress ``p`` came, and in time when it names a ``within``."""
        at = self.progress_seen.get(p)
        if at is None:
            return ExpectationResult("progress", p.describe(), False, "never reached during the run")
        if p.within is None:
            return ExpectationResult("progress", p.describe(), True, f"reached at {at:.1f}s")
        start = 0.0
        if p.after is not None:
            run = runs.get(p.after)
            if run is None or run.ran is None:
                return ExpectationResult("progress", p.describe(), False,
                                         f"reached at {at:.1f}s, but step {p.after} never ran to start the clock")
            start = run.ran
        took = at - start
        since = f"step {p.after} ran" if p.after else "the start"
        return ExpectationResult("progress", p.describe(), took <= p.within,
                                 f"reached {took:.1f}s after {since} (at {at:.1f}s); allowed {p.within:g}s")

    def _judgeable(self, name: str) -> str:
        """Why invariant ``name`` cannot be judged in this run ("" when it can)."""
        sc = self.scenario
        lacks = lacking(sc.driver.kind, self.backend, sc.driver.interpose)
        for need in INVARIANTS.get(name).meta.get("needs", ()):
            if need in lacks:
                return f"not checked: it needs {need}, but {lacks[need]}"
        return ""

    def _namespace(self) -> str:
        return self._run.namespace if self._run is not None else ""


def record_breaches(name: str, violations: list[Violation], now: float, first_seen: dict[tuple[str, str], float],
                    recorded: dict[str, Evidence], prune: bool = True) -> list[tuple[str, Evidence]]:
    """Fold one judgment of invariant ``name`` into ``recorded`` (key -> evidence); returns what is new.

    A breach counts once it has lasted its grace period, seen judgment after judgment (``first_seen``
    remembers when each started); it is recorded with the time it started. A breach gone from a
    judgment before its grace period ran out starts over, unless ``prune`` is False (a judgment over
    part of the cluster: what it did not see may go on)."""
    new: list[tuple[str, Evidence]] = []
    present = set()
    for v in violations:
        key = v.key or v.message
        present.add((name, key))
        started = first_seen.setdefault((name, key), v.time)
        if now - started < v.grace or key in recorded:
            continue
        recorded[key] = Evidence(v.message, tuple(v.objects), tuple(v.devices), round(started, 3))
        new.append((key, recorded[key]))
    for seen in [k for k in first_seen if k[0] == name and k not in present] if prune else ():
        del first_seen[seen]
    return new


def evidence_matches(rule: EvidenceRule, v: Evidence, namespace: str) -> bool:
    """Whether violation ``v`` names everything ``rule`` asks for."""
    pods = [o.split("/", 2)[2] for o in v.objects if o.startswith("Pod/") and o.count("/") >= 2]
    claims = [o.split("/", 2)[2] for o in v.objects if o.startswith("ResourceClaim/") and o.count("/") >= 2]
    if rule.workload is not None:
        if rule.member is not None:
            if f"{rule.workload}-{rule.member}" not in pods:
                return False
        elif not any(p.rsplit("-", 1)[0] == rule.workload and p.rsplit("-", 1)[-1].isdigit() for p in pods):
            return False
    if rule.claim is not None:
        # Claims from a template are named <pod>-<claim>-<suffix>; a shared one <workload>-<claim>.
        prefix = f"{rule.workload}-"
        if not any(c.startswith(prefix) and f"-{rule.claim}" in c[len(prefix) - 1:] for c in claims):
            return False
    devices = [d.split("/") for d in v.devices]
    if rule.node is not None and not any(len(d) >= 3 and d[-2] == rule.node for d in devices):
        return False
    if rule.device is not None and not any(d[-1] == rule.device and (rule.node is None or d[-2] == rule.node)
                                           for d in devices):
        return False
    return True
