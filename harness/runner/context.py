"""What a chaos step gets: the run's handles, target selection with the seeded generator, journaling.

A fault (registered in ``draguard.chaos`` into ``FAULTS``) is a function ``(ctx: StepContext, params)``.
Before it changes anything it calls :meth:`StepContext.before` with an :class:`UndoAction` (written to
the journal, so ``draguard cleanup`` can undo it after a crash) and may register an in-process undo
with :meth:`StepContext.on_undo`. Targets are drawn with ``ctx.rng`` (seeded from the scenario seed
and the step index) and only among the scenario's own pods, nodes and devices: the blast radius is
bounded to what the run created.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..kube import Kube, Obj
from ..scenario.types import Scenario, Step, Target
from .deploy import MEMBER_LABEL, WORKLOAD_LABEL
from .journal import Journal, UndoAction
from .observe import Observer, Timeline

if TYPE_CHECKING:
    from ..cluster.local import LocalCluster
    from ..driver.process import FakeDriverProcess
    from ..kubelet.process import HollowKubelet
    from ..nodes.process import FakeNodesProcess
    from ..proxy.interposer import Interposer

__all__ = ["RunHandles", "StepContext"]


@dataclass
class RunHandles:
    """Everything a run started, shared by the runner and its steps."""

    run_id: str
    scenario: Scenario
    kube: Kube
    namespace: str
    journal: Journal
    timeline: Timeline
    observer: Observer
    node_root: Path
    cluster: LocalCluster | None = None
    drivers: dict[str, FakeDriverProcess] = field(default_factory=dict)
    nodes: FakeNodesProcess | None = None
    kubelets: dict[str, HollowKubelet] = field(default_factory=dict)
    """The hollow DRA kubelets of the nodes with ``agent: kubelet``, by node name."""
    undo: list[tuple[int, Callable[[], None]]] = field(default_factory=list)
    deploy_workload: Callable[[str], None] | None = None
    """Creates the pods of a workload held back for a later step (``preempt``)."""
    interposer: Interposer | None = None
    """The gRPC interposer between the fake nodes and the driver (``driver.interpose``)."""
    proxy_faults: Path | None = None
    """The interposer's fault file (JSON), which prepare/unprepare faults write when it is on."""

    @property
    def driver_name(self) -> str:
        return self.scenario.driver.name


@dataclass
class StepContext:
    handles: RunHandles
    step: Step
    rng: random.Random
    notes: list[str] = field(default_factory=list)
    _journal_seq: int | None = None

    # -- shortcuts ----------------------------------------------------------------------------
    @property
    def kube(self) -> Kube:
        return self.handles.kube

    @property
    def namespace(self) -> str:
        return self.handles.namespace

    @property
    def scenario(self) -> Scenario:
        return self.handles.scenario

    @property
    def target(self) -> Target:
        return self.step.target or Target(None, None, None, None, None)

    def note(self, text: str) -> None:
        """Say what the step did (goes to the timeline and the step's result)."""
        self.notes.append(text)
        self.handles.timeline.add("fault", self.step.fault, self.step.name, "note", text)

    # -- journaling ---------------------------------------------------------------------------
    def before(self, undo: UndoAction) -> None:
        """Journal how to undo what the step is about to do. Call before changing anything."""
        self._journal_seq = self.handles.journal.fault(self.step.name, self.step.fault, undo)

    def on_undo(self, fn: Callable[[], None]) -> None:
        """An in-process undo, run at the end of the scenario (before teardown)."""
        self.handles.undo.append((self._journal_seq or 0, fn))

    # -- targets ------------------------------------------------------------------------------
    def pods(self, workload: str | None = None, live_only: bool = True) -> list[Obj]:
        pods = [
            p for p in self.handles.observer.objects("Pod")
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
        claims = {c["metadata"]["name"]: c for c in self.handles.observer.objects("ResourceClaim")}
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
        return self.handles.observer.wait_for(predicate, timeout)
