"""What a fleet is: who runs a scenario's nodes and drivers, started, stopped and reported as one.

A :class:`Fleet` starts the processes that play the nodes and the DRA driver of one run (fake node
agents, hollow kubelets, the fake driver per node or hosted, the upstream test driver, the gRPC
interposer in front of a driver), keeps them as its own state, stops them at teardown, and says as
data (:attr:`Fleet.capabilities`, names from :data:`FLEET_CAPABILITIES`) what a run on it can do to
them, so that steps and invariants can declare what they need. Each process is a
:class:`~draguard.harness.core.process.NodeProcess`.

Fleets register by name in :data:`FLEETS` (``fake``, ``kubelet``, ``external``, ``installed``); the
runner picks one with :func:`fleet_for` and talks to it through this interface only. What a fleet
needs of the run (the cluster, the journal, the watches) comes in a :class:`FleetRun`: a fleet does
not import the runner.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from draguard.harness.core.errors import HarnessError
from draguard.harness.core.process import NodeProcess
from draguard.harness.core.progress import Counted
from draguard.harness.core.registry import Registry
from ..devices.truth import HardwareFault, NodeTruth
from ..invariants import DeviceId, NodeDriverState
from ..kube import Kube, Obj
from ..proxy.call_rules import FaultSet
from ..proxy.interposer import Interposer
from ..scenario.types import Scenario

if TYPE_CHECKING:
    from ..cluster.local import LocalCluster
    from ..driver.external import ExternalPluginProcess
    from ..driver.host import DriverHostProcess
    from ..driver.process import FakeDriverProcess
    from ..kubelet.process import HollowKubelet
    from ..nodes.process import FakeNodesProcess

__all__ = ["Fleet", "FleetRun", "FLEETS", "FLEET_CAPABILITIES", "fleet_for", "DriverControl", "NodeControl", "Undoable",
           "FaultFile", "NodeDevices"]

FLEET_CAPABILITIES: Mapping[str, str] = MappingProxyType({
    "restart-driver": "a node's driver can be killed, crashed and started again",
    "stop-driver": "a node's driver can be kept down for a while and brought back",
    "kill-node": "a node's agent can be killed, lost and started again",
    "device-truth": "each node's hardware (its device truth) can be read and failed",
    "driver-books": "the driver's own records (its checkpoint) can be read",
    "driver-faults": "the fake driver's fault file can be written (prepare, unprepare and reset failures, slow resets)",
    "interpose": "the gRPC interposer can sit between the nodes and the driver",
})
"""What a fleet may offer a run; a fleet lists those it offers in :attr:`Fleet.capabilities`."""


Undoable = Callable[[str, dict[str, Any]], None]
"""Journals how to undo what is about to happen (an undo kind of the run journal and its arguments),
before it happens; a step's ``ctx.before``."""


class DriverControl(Protocol):
    """A node's driver, as a step takes it down, brings it back or restarts it."""

    node: str

    def restart(self, kill: bool = True) -> None: ...

    def down(self) -> None: ...

    def up(self) -> None: ...


class NodeControl(Protocol):
    """A node, as a step restarts its agent or loses it for a while."""

    node: str

    def restart_agent(self, kill: bool = True) -> None: ...

    def lose(self) -> None: ...

    def back(self) -> None: ...


class FaultFile(Protocol):
    """The fault file of draguard's fake driver on one node when the driver is not a process of the run (an
    installed driver's pod): composed in a local copy under :attr:`root` (laid out as
    :mod:`draguard.harness.driver.fault_control` lays out a node's files) and copied onto the node."""

    node: str
    driver: str
    root: Path

    def pull(self) -> None:
        """The node's fault file and its counts into the local copy."""
        ...

    def push(self) -> None:
        """The local copy's fault file onto the node (atomically)."""
        ...

    def undo(self, previous: str | None) -> tuple[str, dict[str, Any]]:
        """The journal's undo (kind, arguments) that puts the node's fault file back to ``previous``."""
        ...

    def fired(self, kind: str) -> int:
        """How often fault ``kind`` fired there since it was set (the last count read when the node cannot be read now)."""
        ...


class NodeDevices(Protocol):
    """The fake hardware (device truth) of one node when it is not under the run's node root (an installed
    fake driver's node), as steps fail and repair its devices and the judge reads it."""

    node: str

    def read(self) -> NodeTruth: ...

    def raise_fault(self, device: str, fault: HardwareFault) -> None: ...

    def repair(self, device: str) -> None: ...

    def undo(self) -> tuple[str, dict[str, Any]]:
        """The journal's undo (kind, arguments) that puts the node's device truth back as it is now."""
        ...


@dataclass(frozen=True)
class FleetRun:
    """What a fleet needs of the run it serves."""

    run_id: str
    scenario: Scenario
    kube: Kube
    cluster: LocalCluster | None
    """The control plane draguard started for the run; None on a cluster of someone else's."""
    kubeconfig: Path
    node_root: Path
    """Where the nodes' directories (sockets, checkpoints, device truth, CDI specs) live."""
    bin_dir: str | None
    record: Callable[[str, str], Path]
    """Where to record evidence ``(name, what it is)``: a path in the run's record (never the report
    folder), placed at ``<report-dir>/<scenario>/<name>`` when the result is rendered."""
    journal_process: Callable[[int, str], None]
    """Journals a process the fleet started (``draguard cleanup`` stops it after a crash)."""
    create: Callable[[Obj], Obj]
    """Creates an API object of the run (it carries the run label)."""
    slices: Callable[[], list[Obj]]
    """The ResourceSlices of the run's driver the run's watch holds now."""
    wait_for: Callable[[Callable[[], bool], float], bool]
    """Waits, on every change the watches see, until the predicate holds or the timeout passed."""
    log: Callable[[str], None]
    progress: Callable[[str], None]
    journal_undo: Undoable | None = None
    """Journals how to undo a change the fleet makes to the cluster before it makes it (``draguard cleanup``
    replays it after a crash): an installed driver's DaemonSet patched to run a mutant."""


class Fleet:
    """The processes of one run's nodes and drivers. Nothing runs until :meth:`start`; :meth:`stop`
    stops whatever was started, in the order the nodes need (drivers, then agents, then the interposer)."""

    name: ClassVar[str] = ""
    capabilities: ClassVar[frozenset[str]] = frozenset()
    """Names from :data:`FLEET_CAPABILITIES`."""
    republish_grace: ClassVar[float] = 0.0
    """Seconds the cleanup phase waits, at most, for the driver's whole inventory to be published again
    before no-leak compares it (0: the fleet's drivers publish at once)."""

    retry_grace: ClassVar[float] = 0.0
    """Seconds the settle phase waits, beyond the scenario's settle timeout, for the progress it expects when
    the nodes retry a failed prepare only after a back-off of their own (0: the fleet's nodes retry at once)."""

    def __init__(self) -> None:
        self.drivers: dict[str, FakeDriverProcess] = {}
        """The fake driver of each node (a handle on the driver host when it is hosted)."""
        self.driver_host: DriverHostProcess | None = None
        """The one process serving every node's fake driver (``driver.hosting: shared``)."""
        self.nodes: FakeNodesProcess | None = None
        """The fake node agents (one process for every node with ``agent: fake``)."""
        self.kubelets: dict[str, HollowKubelet] = {}
        """The hollow DRA kubelets of the nodes with ``agent: kubelet``, by node name."""
        self.external_drivers: dict[str, ExternalPluginProcess] = {}
        """The upstream DRA test driver's process per node, when the run started it."""
        self.interposer: Interposer | None = None
        """The gRPC interposer between the nodes and the driver (``driver.interpose``)."""
        self.rpc_faults: FaultSet | None = None
        """The interposer's rules in force, added to in process by the steps."""
        self.inventory: frozenset[DeviceId] = frozenset()
        """Every device the driver published once the fleet was up (what no-leak compares with)."""
        self.node_root: Path | None = None

    def start(self, run: FleetRun) -> None:
        """Start the nodes and the driver; returns once the driver published its devices."""
        raise NotImplementedError(f"fleet {self.name or type(self).__name__} cannot start")

    def offers(self, capability: str) -> bool:
        return capability in self.capabilities

    def driver_control(self, node: str, before: Undoable) -> DriverControl | None:
        """How a step restarts or stops ``node``'s driver on this fleet; None where the run's own
        processes are that driver (the step context reaches them directly)."""
        return None

    def node_control(self, node: str, before: Undoable) -> NodeControl | None:
        """How a step restarts or loses ``node`` on this fleet; None where the run's own node agents
        are that node (the step context reaches them directly)."""
        return None

    def fault_file(self, node: str) -> FaultFile | None:
        """The fault file of draguard's fake driver on ``node`` where the driver is not a process of the run
        (an installed one); None where it is (the step context writes its file directly) or there is none."""
        return None

    def node_devices(self, node: str) -> NodeDevices | None:
        """The device truth of ``node`` where it is not under the run's node root (an installed fake driver's
        node); None where it is, or where there is none."""
        return None

    def processes(self) -> Iterator[NodeProcess]:
        """Every process the fleet started (a hosted node's driver is its host's)."""
        yield from self.external_drivers.values()
        if self.driver_host is not None:
            yield self.driver_host
        else:
            yield from self.drivers.values()
        yield from self.kubelets.values()
        if self.nodes is not None:
            yield self.nodes

    def external_states(self) -> tuple[NodeDriverState, ...]:
        """What the upstream test driver holds prepared on each node it runs on for this run, seen from
        outside: its CDI spec files (one per claim and request, removed at unprepare; it keeps no other
        record on disk: test/e2e/dra/test-driver/app/kubeletplugin.go)."""
        out = []
        for node, proc in self.external_drivers.items():
            uids = frozenset(proc.prepared_claims())
            out.append(NodeDriverState(node=node, driver=proc.driver, prepared={u: () for u in uids}, cdi_specs=uids,
                                       cdi_devices=proc.cdi_devices()))
        return tuple(out)

    def node_truths(self) -> tuple[NodeTruth, ...]:
        """The device truth of the run's nodes that are not under its node root (an installed fake driver's
        nodes), with what the fleet saw of the run's containers there as incidents (``recorded`` False: no
        draguard runtime runs them); () where there are none."""
        return ()

    reads_books: bool = False
    """Whether :meth:`external_states` holds an installed driver's books read on its nodes (draguard's fake
    driver on kind: its checkpoint), not only its CDI specs."""
    real_nodes: bool = False
    """Whether the run's nodes have a kubelet and a real container runtime that report in the pods'
    statuses what they could not do (the judge reads them: :data:`~.coverage.REAL_NODES`); set by a
    fleet once it sees the nodes."""

    @property
    def reads_node_files(self) -> bool:
        """Whether :meth:`external_states` sees an external driver's files on its nodes (no-leak then
        judges its CDI specs too)."""
        return bool(self.external_drivers)

    def stop(self) -> None:
        """Stop every process the fleet started, then the interposer."""
        for proc in self.processes():
            proc.stop()
        if self.interposer is not None:
            self.interposer.stop()
            shutil.rmtree(f"{self.node_root}-plugins", ignore_errors=True)

    # -- for the fleets --------------------------------------------------------------------------
    @staticmethod
    def journal(run: FleetRun, proc: NodeProcess, title: str | None = None) -> None:
        if proc.pid:
            run.journal_process(proc.pid, title or proc.title)

    def start_interposer(self, run: FleetRun) -> Path:
        """Put the gRPC interposer in front of the driver: the driver serves its sockets under
        ``<node root>-plugins``, the interposer re-exposes them where the nodes look, records every call
        into the run's record and injects the steps' faults. Returns the root the driver serves under."""
        assert self.node_root is not None
        driver_root = Path(f"{self.node_root}-plugins")
        self.rpc_faults = FaultSet()  # in process: steps add validated rules, counted per rule
        calls = run.record("grpc-calls.jsonl", "every registration and DRA call through the gRPC interposer, timed")
        self.interposer = Interposer(driver_root, self.node_root, self.rpc_faults, record=calls,
                                     run_label=run.run_id).start()
        return driver_root

    def wait_slices(self, run: FleetRun, pools: set[str], timeout: float) -> None:
        """Wait until the driver published a ResourceSlice with devices in each of ``pools``; note the
        devices published then as the fleet's :attr:`inventory`."""

        def ready() -> bool:
            have = {s["spec"]["pool"]["name"] for s in run.slices() if s["spec"].get("devices")}
            if len(pools) > 1:
                run.progress(Counted("nodes with published ResourceSlices", len(pools & have), len(pools)))
            return pools <= have

        if not run.wait_for(ready, timeout):
            raise HarnessError(f"the driver did not publish ResourceSlices for {', '.join(sorted(pools))} in {timeout:.0f}s")
        self.inventory = frozenset(
            DeviceId(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
            for s in run.slices() for d in s["spec"].get("devices", [])
        )


FLEETS: Registry[type[Fleet]] = Registry("fleet")
"""Fleets by name; filled by importing :mod:`draguard.harness.fleet`."""


def fleet_for(scenario: Scenario, own_cluster: bool) -> str:
    """The fleet a scenario runs on: the upstream test driver draguard starts (``external``) or a driver
    already in the cluster (``installed``) for an external driver; for draguard's fake driver, hollow
    kubelets when every node asks for one (``kubelet``), else fake node agents (``fake``, which runs a
    hollow kubelet for each node that asks for one)."""
    if scenario.driver.kind == "external":
        return "external" if own_cluster else "installed"
    if scenario.nodes and all(n.agent == "kubelet" for n in scenario.nodes):
        return "kubelet"
    return "fake"
