"""What a chaos step gets: the one door from a fault to the run (:class:`StepContext`).

A fault (registered in ``draguard.chaos`` into ``FAULTS``) is a function ``(ctx: StepContext, params)``.
It reaches the run only through ``ctx``; the runner's handles (processes, interposer, journal) stay
private to this module and the runner:

- targets, drawn with ``ctx.rng`` (seeded from the scenario seed and the step index) among the
  scenario's own pods, nodes and devices: the blast radius is bounded to what the run created;
- ``ctx.fake_driver(node)``: the fake driver of a node (kill, start, restart, hardware and RPC
  faults), each action journaled by the handle itself;
- ``ctx.inject_rpc_fault(rule)``: a validated :class:`~draguard.harness.proxy.call_rules.FaultRule` for
  the gRPC interposer (no hand-written JSON);
- ``ctx.restart_node_agents()``, ``ctx.set_node_lost()``, ``ctx.restart_component()``: restarts that
  journal the new process themselves;
- ``ctx.create_workload(name)``: the pods of a workload the scenario held back (``arrive``, ``preempt``);
- ``ctx.before(undo)`` journals how to undo a change before it is made (``draguard cleanup`` replays
  it after a crash); ``ctx.on_undo(fn, until_cleanup=...)`` undoes it in process: faults that last
  "until cleanup" are undone when the cleanup phase starts, the others at teardown;
- ``ctx.fired(n)`` / ``ctx.count_fired(counter)``: how often the fault struck (a step whose fault
  never fired fails the scenario); ``ctx.sleep(seconds)`` waits out a duration, cut short by cleanup;
- ``ctx.record_load(summary)``: what a ``load`` step's churn measured, carried to the step's result;
- ``ctx.record(name, about)``: a path in the run's record for files a step writes as evidence (a
  ``load`` step's locust files), placed at ``<report-dir>/<scenario>/<name>`` when the result is rendered:
  nothing a step does writes into the report directory.
"""

from __future__ import annotations

import functools
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.core.paths import NodeDirs

from ..devices.truth import DeviceTruth, HardwareFault
from draguard.harness.driver import fault_control as faults
from draguard.harness.driver.fault_control import CrashPoint
from ..fleet.base import DriverControl, FaultFile, Fleet
from ..judge.observe import Observer, Timeline
from ..kube import Kube, Obj
from ..result import LoadSummary, RunRecord
from ..scenario.types import Scenario, Step, Target
from .deploy import MEMBER_LABEL, WORKLOAD_LABEL
from .journal import Journal, UndoAction

if TYPE_CHECKING:
    from ..cluster.local import LocalCluster
    from ..driver.process import FakeDriverProcess
    from ..nodes.process import FakeNodesProcess
    from draguard.harness.proxy.call_rules import FaultRule, FaultSet

__all__ = ["RunHandles", "StepContext", "FakeDriverControl", "Undo", "CrashPoint"]


@dataclass(frozen=True)
class Undo:
    seq: int
    """The journal entry it undoes (0: none)."""
    fn: Callable[[], None]
    until_cleanup: bool
    """True: undone when the cleanup phase starts; False: at teardown."""


@dataclass
class RunHandles:
    """Everything a run started, shared by the runner and this module; never handed to a fault."""

    run_id: str
    scenario: Scenario
    kube: Kube
    namespace: str
    journal: Journal
    timeline: Timeline
    observer: Observer
    node_root: Path
    cluster: LocalCluster | None = None
    fleet: Fleet = field(default_factory=Fleet)
    """Who runs the nodes and drivers (its processes, the interposer); an empty one until it starts."""
    undo: list[Undo] = field(default_factory=list)
    create_workload: Callable[[str], None] | None = None
    """Creates the pods of a workload held back for a later step (``arrive``, ``preempt``)."""
    stop: threading.Event = field(default_factory=threading.Event)
    """Set when the cleanup phase starts: waits and durations of steps end."""
    kubeconfig: str | None = None
    """The kubeconfig of the run's cluster (for steps that start processes against it, e.g. ``load``)."""
    record: RunRecord | None = None
    """What the run records besides its result (the runner's :attr:`ScenarioResult.record`)."""

    @property
    def driver_name(self) -> str:
        return self.scenario.driver.name


class FakeDriverControl:
    """The fake driver of one node, as a step may use it: every action journals itself."""

    def __init__(self, ctx: StepContext, proc: FakeDriverProcess | None, node: str = "",
                 files: FaultFile | None = None) -> None:
        self._ctx = ctx
        self._maybe_proc = proc
        self._files = files
        """The fault file of an installed fake driver (its pod on the node), when the run has no process of it."""
        self.node = proc.node if proc is not None else node

    @property
    def _proc(self) -> FakeDriverProcess:
        if self._maybe_proc is None:
            raise UsageError(f"step {self._ctx.step.name}: fault {self._ctx.step.fault} needs draguard's fake driver "
                             f"on node {self.node} as a process of the run; the installed one takes only the faults of "
                             "its fault file and device truth")
        return self._maybe_proc

    def kill(self) -> None:
        """SIGKILL the driver; the run starts it again if the step does not (teardown stops it anyway)."""
        self._ctx.before(UndoAction("none", {"why": f"the driver on {self.node} is started again by the run"}))
        self._proc.kill()

    def start(self) -> None:
        if not self._proc.alive:
            self._proc.start()
            self._journal_pid("started again")

    @property
    def alive(self) -> bool:
        return self._proc.alive

    def wait_exit(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for the driver to exit (a crash); its exit status, or None."""
        return self._proc.wait_exit(timeout=timeout)

    def down(self) -> None:
        """Take the driver down (killed) until :meth:`up`."""
        self.kill()

    def up(self) -> None:
        self.start()

    def restart(self, kill: bool = True) -> None:
        self._ctx.before(UndoAction("none", {"why": f"the driver on {self.node} is started again by the step"}))
        self._proc.restart(kill=kill)
        self._journal_pid("restarted")

    def rolling_update(self, overlap: float) -> str:
        """Replace the driver by a new instance started beside it (:meth:`FakeDriverProcess.rolling_update`);
        the new instance's pod UID."""
        self._ctx.before(UndoAction("none", {"why": f"the new driver instance on {self.node} is stopped by the run"}))
        instance = self._proc.rolling_update(overlap)
        self._journal_pid(f"instance {instance}")
        return instance

    @property
    def sockets(self) -> list[Path]:
        """The driver's plugin sockets (its DRA service and its registration), wherever it serves them."""
        return [self._proc.dra_socket, self._proc.registration_socket]

    @property
    def checkpoint(self) -> Path:
        """The driver's checkpoint file."""
        return self._proc.dirs.plugin_dir(self._proc.driver) / "checkpoint.json"

    def _journal_pid(self, what: str) -> None:
        if self._proc.pid:
            self._ctx._run.journal.process(self._proc.pid, f"fake driver on {self.node} ({what})")

    def set_fault(self, kind: str, spec: dict[str, object], *, until_cleanup: bool) -> None:
        """Switch on one fault kind of the driver (``reset_fail``, ``prepare_fail``...), keeping the
        others; it is switched off at cleanup start (``until_cleanup``) or at teardown. Counted."""
        files = self._files  # an installed driver's: composed in a local copy, copied into its pod
        root, driver = (files.root, files.driver) if files is not None else (self._proc.root, self._proc.driver)
        path = faults.faults_path(root, self.node, driver)
        if files is not None:
            files.pull()
        previous = path.read_text() if path.exists() else None
        self._ctx.before(UndoAction(*files.undo(previous)) if files is not None else
                         UndoAction("write-file", {"path": str(path), "content": previous}))
        faults.set_faults(root, self.node, driver, merge=True, **{kind: spec})
        if files is not None:
            files.push()

        def clear() -> None:
            if files is not None:
                files.pull()
            faults.set_faults(root, self.node, driver, merge=True, **{kind: None})
            if files is not None:
                files.push()

        self._ctx.on_undo(clear, until_cleanup=until_cleanup)
        self._ctx.count_fired(lambda: files.fired(kind) if files is not None else faults.fired(root, self.node, driver, kind))
        self._ctx.note(f"{kind} {spec} on {self.node}")


def _applied(faults: FaultSet, index: int) -> int:
    return faults.applied()[index]


@dataclass
class StepContext:
    _run: RunHandles
    step: Step
    rng: random.Random
    notes: list[str] = field(default_factory=list)
    _journal_seq: int | None = None
    _fired: int | None = None
    _counters: list[Callable[[], int]] = field(default_factory=list)
    load: LoadSummary | None = None
    """What the step's claim churn measured (``load``), for its :class:`~draguard.harness.result.StepResult`."""

    # -- what the step sees ------------------------------------------------------------------
    @property
    def kube(self) -> Kube:
        return self._run.kube

    @property
    def namespace(self) -> str:
        return self._run.namespace

    @property
    def scenario(self) -> Scenario:
        return self._run.scenario

    @property
    def kubeconfig(self) -> str | None:
        """The kubeconfig of the run's cluster, for steps that start processes against it (``load``)."""
        return self._run.kubeconfig

    def record(self, name: str, about: str) -> Path:
        """Where the step records ``name`` (a file, or a folder it makes), in the run's record: placed at
        ``<report-dir>/<scenario>/<name>`` when the result is rendered. ``about`` says what it is."""
        if self._run.record is None:
            raise HarnessError(f"step {self.step.name}: fault {self.step.fault} records files, and this run keeps no record")
        return self._run.record.path(name, about)

    @property
    def run_id(self) -> str:
        return self._run.run_id

    @property
    def driver_name(self) -> str:
        return self._run.driver_name

    @property
    def target(self) -> Target:
        return self.step.target or Target(None, None, None, None, None)

    def note(self, text: str) -> None:
        """Say what the step did (goes to the timeline and the step's result)."""
        self.notes.append(text)
        self._run.timeline.add("fault", self.step.fault, self.step.name, "note", text)

    # -- journaling and undo -------------------------------------------------------------------
    def before(self, undo: UndoAction) -> None:
        """Journal how to undo what the step is about to do. Call before changing anything."""
        self._journal_seq = self._run.journal.fault(self.step.name, self.step.fault, undo)

    def on_undo(self, fn: Callable[[], None], *, until_cleanup: bool = False) -> None:
        """An in-process undo: at the start of cleanup (a fault meant to last until then) or at teardown."""
        self._run.undo.append(Undo(self._journal_seq or 0, fn, until_cleanup))

    def sleep(self, seconds: float) -> bool:
        """Wait out a fault's duration; False when the cleanup phase cut it short."""
        return not self._run.stop.wait(seconds)

    # -- how often the fault struck --------------------------------------------------------------
    def fired(self, n: int = 1) -> None:
        """The step itself made the fault happen ``n`` times (a deletion, a kill)."""
        self._fired = (self._fired or 0) + n

    def count_fired(self, counter: Callable[[], int]) -> None:
        """The fault strikes later, in the driver or the interposer; ``counter`` says how often so far."""
        self._counters.append(counter)

    def fired_count(self) -> int | None:
        """Direct firings plus the counters; None when the step reported nothing countable."""
        if self._fired is None and not self._counters:
            return None
        return (self._fired or 0) + sum(c() for c in self._counters)

    def record_load(self, summary: LoadSummary) -> None:
        """Keep what the step's load measured; it goes to the step's result, even when the step then fails."""
        self.load = summary

    # -- what the run started --------------------------------------------------------------------
    def _before(self, kind: str, args: dict[str, Any]) -> None:
        self.before(UndoAction(kind, args))

    def driver(self, node: str) -> DriverControl:
        """The DRA driver of ``node``, to restart or take down: the fleet's way (an installed driver's
        DaemonSet), else draguard's fake driver there."""
        control = self._run.fleet.driver_control(node, self._before)
        return control if control is not None else self.fake_driver(node)

    def fake_driver(self, node: str) -> FakeDriverControl:
        """The fake driver of ``node``; a clear error for an external driver."""
        proc = self._run.fleet.drivers.get(node)
        files = self._run.fleet.fault_file(node) if proc is None else None
        if files is not None:  # an installed fake driver: its fault file on the node, through its pod
            return FakeDriverControl(self, None, node, files)
        if proc is None:
            raise UsageError(
                f"step {self.step.name}: fault {self.step.fault} needs draguard's fake driver on node {node}; "
                "with an external driver use the gRPC interposer (driver.interpose) instead"
            )
        return FakeDriverControl(self, proc)

    def node_dirs(self, node: str) -> NodeDirs:
        """The directories of draguard's node ``node`` on this machine: its CDI specs, device truth and agent files."""
        return NodeDirs(self._run.node_root, node)

    def fail_device(self, node: str, device: str, fault: HardwareFault) -> None:
        """The hardware of a fake node raises ``fault`` on ``device`` (recorded in its device truth, reported
        through NVML); repaired at the start of cleanup. A driver learns of it only through its own health
        check."""
        self.require_devices(node, [device])
        remote = self._run.fleet.node_devices(node) if node not in self._run.fleet.drivers else None
        if remote is not None:  # an installed fake driver's node: its device truth there, through its pod
            self.before(UndoAction(*remote.undo()))
            remote.raise_fault(device, fault)
            self.on_undo(functools.partial(remote.repair, device), until_cleanup=True)
            return
        truth = DeviceTruth(self._run.node_root, node)
        self.before(UndoAction("none", {"why": "the device truth lives under the run's node root, removed at teardown"}))
        truth.raise_fault(device, fault)
        self.on_undo(functools.partial(truth.repair, device), until_cleanup=True)

    def require_devices(self, node: str, devices: list[str]) -> None:
        """A clear error unless the hardware of fake node ``node`` (its device truth) has every one of ``devices``."""
        remote = self._run.fleet.node_devices(node) if node not in self._run.fleet.drivers else None
        if node not in self._run.fleet.drivers and remote is None:
            raise UsageError(f"step {self.step.name}: fault {self.step.fault} needs a fake node's device truth; "
                             f"node {node} has none (an external driver on a real node)")  # fmt: skip
        have = (remote.read() if remote is not None else DeviceTruth(self._run.node_root, node).read()).devices
        missing = [d for d in devices if d not in have]
        if missing:
            raise UsageError(f"step {self.step.name}: node {node} has no device {', '.join(missing)}; it has "
                             f"{', '.join(sorted(have)) or 'none'}")  # fmt: skip

    @property
    def has_interposer(self) -> bool:
        return self._run.fleet.rpc_faults is not None

    def inject_rpc_fault(self, rule: FaultRule) -> bool:
        """Add ``rule`` at the interposer for each targeted node (default: all); False when there is none."""
        faults = self._run.fleet.rpc_faults
        if faults is None:
            return False
        self.before(UndoAction("none", {"why": "the interposer's rules live in the run's process"}))
        for node in self.target_nodes(default="all"):
            index = faults.add(rule.model_copy(update={"node": node, "driver": self.driver_name}))
            self.on_undo(functools.partial(faults.drop, index), until_cleanup=rule.count is None)
            self.count_fired(functools.partial(_applied, faults, index))
            self.note(f"interposer: {rule.action.value} on {rule.method} at {node}")
        return True

    def restart_node_agents(self, kill: bool = True, nodes: list[str] | None = None) -> None:
        """Kill (or stop) and restart the agents of ``nodes`` (default: every node): the fake node agent
        process (one for all fake nodes) and each targeted hollow kubelet."""
        targets = nodes if nodes is not None else self.node_names()
        controls = [c for n in targets if (c := self._run.fleet.node_control(n, self._before)) is not None]
        for control in controls:  # the cluster's own nodes (kind): the fleet restarts their agents
            control.restart_agent(kill=kill)
        targets = [n for n in targets if n not in {c.node for c in controls}]
        if not targets:
            return
        kubelets = [self._run.fleet.kubelets[n] for n in targets if n in self._run.fleet.kubelets]
        fake = [n for n in targets if n not in self._run.fleet.kubelets]
        self.before(UndoAction("none", {"why": "the agent is started again by the step itself"}))
        for kubelet in kubelets:
            kubelet.restart(kill=kill)
            if kubelet.pid:
                self._run.journal.process(kubelet.pid, f"hollow kubelet {kubelet.node} (restarted)")
        if fake:
            agent = self._nodes()
            agent.restart(kill=kill)
            if agent.pid:
                self._run.journal.process(agent.pid, "draguard nodes (restarted)")

    def set_node_lost(self, node: str, lost: bool) -> None:
        """Stop (or resume) a node's heartbeats and pod syncs; journaled when it is lost. A fake node
        stops acting while its agent goes on; a hollow kubelet is killed (its lease expires) and started
        again from its checkpoint when the node returns."""
        control = self._run.fleet.node_control(node, self._before)
        if control is not None:  # the cluster's own node (kind)
            if lost:
                control.lose()
            else:
                control.back()
            return
        kubelet = self._run.fleet.kubelets.get(node)
        if kubelet is not None:
            if lost:
                self.before(UndoAction("none", {"why": f"the kubelet of {node} is started again or stopped at teardown"}))
                kubelet.kill()
            elif not kubelet.alive:
                kubelet.start()
                if kubelet.pid:
                    self._run.journal.process(kubelet.pid, f"hollow kubelet {node} (back)")
            return
        agent = self._nodes()
        if lost:
            self.before(UndoAction("write-file", {"path": str(agent.root / node / "lost"), "content": None}))
        agent.set_lost(node, lost)

    def _nodes(self) -> FakeNodesProcess:
        if self._run.fleet.nodes is None:
            raise UsageError(f"step {self.step.name}: fault {self.step.fault} needs draguard's fake nodes")
        return self._run.fleet.nodes

    def restart_component(self, component: str) -> None:
        """Restart ``kube-<component>`` of the local control plane."""
        cluster = self._run.cluster
        if cluster is None:
            raise UsageError(f"step {self.step.name}: restarting {component} needs the local backend")
        self.before(UndoAction("none", {"why": f"{component} is started again by the step itself"}))
        cluster.restart(component)
        sup = cluster.components.get(f"kube-{component}")
        if sup is not None and sup.pid:
            self._run.journal.process(sup.pid, f"kube-{component} (restarted)")

    def create_workload(self, name: str) -> None:
        """Create the pods of workload ``name``, held back until now by the scenario."""
        try:
            self.scenario.workload(name)
        except KeyError:
            raise UsageError(f"step {self.step.name}: {name!r} is not a workload of the scenario") from None
        assert self._run.create_workload is not None
        self._run.create_workload(name)

    # -- targets ------------------------------------------------------------------------------
    def pods(self, workload: str | None = None, live_only: bool = True) -> list[Obj]:
        pods = [
            p for p in self._run.observer.objects("Pod")
            if (workload is None or p["metadata"].get("labels", {}).get(WORKLOAD_LABEL) == workload)
            and (not live_only or not p["metadata"].get("deletionTimestamp"))
        ]
        return sorted(pods, key=lambda p: (p["metadata"].get("labels", {}).get(WORKLOAD_LABEL, ""),
                                           int(p["metadata"].get("labels", {}).get(MEMBER_LABEL, "0"))))

    def target_pods(self, default_all: bool = False, bound_only: bool = False) -> list[Obj]:
        """The pods the step's target names: a member index, ``random`` (one, seeded) or ``all``."""
        t = self.target
        pods = self.pods(t.workload)
        if bound_only:
            pods = [p for p in pods if p["spec"].get("nodeName")]
        if t.node not in (None, "random", "all"):
            pods = [p for p in pods if p["spec"].get("nodeName") == t.node]
        if not pods:
            return []
        member = t.member if t.member is not None else ("all" if default_all else "random")
        if member == "all":
            return pods
        if member == "random":
            return [self.rng.choice(pods)]
        chosen = [p for p in pods if p["metadata"].get("labels", {}).get(MEMBER_LABEL) == str(member)]
        return chosen

    def node_names(self) -> list[str]:
        return [n.name for n in self.scenario.nodes]

    def target_nodes(self, default: str = "random") -> list[str]:
        """Nodes named by the target: a name, ``random``, ``all``, or the node of the targeted pod."""
        t = self.target
        names = self.node_names()
        choice = t.node or (None if t.workload else default)
        if choice is None:
            pods = self.target_pods(bound_only=True)
            return sorted({p["spec"]["nodeName"] for p in pods})
        if choice == "all":
            return names
        if choice == "random":
            return [self.rng.choice(names)] if names else []
        if choice not in names:
            raise UsageError(f"step {self.step.name}: node {choice!r} is not a node of the scenario")
        return [choice]

    def allocated_devices(self, pod: Obj) -> list[tuple[str, str, str]]:
        """(driver, pool, device) of every device allocated to the claims of ``pod``."""
        out = []
        claims = {c["metadata"]["name"]: c for c in self._run.observer.objects("ResourceClaim")}
        for status in pod.get("status", {}).get("resourceClaimStatuses", []):
            claim = claims.get(status.get("resourceClaimName", ""))
            for r in ((claim or {}).get("status", {}).get("allocation") or {}).get("devices", {}).get("results", []):
                out.append((r["driver"], r["pool"], r["device"]))
        for ref in pod["spec"].get("resourceClaims", []):
            if ref.get("resourceClaimName") in claims:
                claim = claims[ref["resourceClaimName"]]
                for r in (claim.get("status", {}).get("allocation") or {}).get("devices", {}).get("results", []):
                    if (r["driver"], r["pool"], r["device"]) not in out:
                        out.append((r["driver"], r["pool"], r["device"]))
        return out

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        return self._run.observer.wait_for(predicate, timeout)
