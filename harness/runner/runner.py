"""The runner: one scenario, end to end, on a real control plane.

Phases, each on the timeline:

1. **cluster**: start a local control plane with the scenario's feature gates, or connect to one;
2. **fleet**: fake nodes (one process) and one fake DRA driver per node, or an external driver;
3. **deploy**: DeviceClasses, PriorityClasses, claims/templates, PodGroups, then the pods (interleaved
   where the scenario says);
4. **timeline**: every chaos step on its own thread, at its time, condition or after another step
   (``timeline.py``), each journaled first; the invariants registered ``judged="continuously"`` are
   judged every :data:`JUDGE_INTERVAL` (half a second) meanwhile, and the expected progress is watched on
   every change;
5. **settle**: until nothing changed for :data:`SETTLE_QUIET` (:data:`RETRY_QUIET` while a pod is not
   running: the scheduler's and kubelet's back-offs) or the settle timeout; then every invariant but
   the after-cleanup ones is judged with gangs settled;
6. **cleanup**: faults meant to last "until cleanup" are undone first (a driver left down comes
   back), then the workloads are deleted; once consumers are gone and no driver has a call in
   flight (or the cleanup timeout passed) the ``after-cleanup`` invariants are judged;
7. **teardown**: the other faults undone, every object with the run label deleted, processes stopped,
   cluster down.

A step that errs, starts later than its tolerance, never runs, or whose fault never fired fails
the scenario unless it is ``optional``; so does an unmet ``expect.progress`` or ``expect.evidence``.

Talks to: the cluster backend, the fake driver and fake nodes (as processes), the fault registry
(filled by ``draguard.chaos``, which the CLI imports), the invariants, the journal.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import random
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cluster.local import DEFAULT_CLIENT_BURST, DEFAULT_CLIENT_QPS, ClusterConfig, LocalCluster
from draguard.harness.core.errors import DraguardError, HarnessError, UsageError
from ..devices.truth import DeviceTruth, NodeTruth
from ..core.fsio import StampedReads
from ..invariants import DeviceId, DeviceState, DriverCall, Gang, GpuUsage, NodeDriverState, Snapshot, Violation, evaluate, judged
from ..kube import BULK_PARALLEL, ApiError, Kube, Obj
from draguard.harness.core.paths import state_dir
from draguard.harness.core.registry import FAULTS, INVARIANTS
from draguard.harness.core.environment import draguard_version
from draguard.harness.core.progress import Counted
from ..result import (
    Evidence,
    ExpectationResult,
    InvariantResult,
    ScenarioResult,
    Status,
    StepResult,
    StepStatus,
    TimelineEvents,
)
from ..scenario.checks import lacking
from ..scenario.types import PER_NODE_UP_TO, Condition, EvidenceRule, Progress, Scenario, Step, Topology
from . import deploy
from .context import RunHandles, StepContext
from .incremental import INCREMENTAL, Incremental
from .journal import RUN_LABEL, Journal, delete_labelled
from draguard.harness.campaign.retarget import LOCAL_PARTIAL, NOT_JUDGED, PARTIAL, free_devices, pinned_nodes
from .observe import Observer, Timeline
from .timeline import StepRun, TimelinePlayer

__all__ = ["Runner", "RunOptions", "JUDGE_INTERVAL", "step_status", "evidence_matches", "record_breaches"]

JUDGE_INTERVAL = 0.5
"""Seconds between two rounds of the continuous invariants. A violation the cluster shows is reported
at most this long plus one round's evaluation later: the detection-latency goal is a p99 under 1 s
(issue 12), and a round at 500 nodes x 4000 claims takes 18 ms incremental, 68 ms whole (p99 69 ms;
``draguard bench invariant-cost``, 2026-12-06). Judged once a second, no round however fast could meet it."""

SETTLE_QUIET = 4.0
"""Seconds without a change after which a run whose pods all run (or ended) is settled."""
RETRY_QUIET = 11.0
"""Seconds without a change after which a run with a pod not running is settled: the scheduler retries
a pod that failed to schedule (an API server restart, no device free yet) only after its back-off,
up to ``podMaxBackoffSeconds`` (10 s by default, kube-scheduler's KubeSchedulerConfiguration v1), and
a kubelet retries a failed prepare after a back-off of about as long. After 4 s of quiet such a pod may
still be bound later: a gang judged partial then shows the scheduler's back-off, not a partial gang."""
CLAIMS_ROUND_GAP = 0.1
"""Seconds at least between two claims rounds (see ``Runner._check_continuously``): while thousands of
pods are scheduled claims change hundreds of times a second, and a claims round costs a few ms."""


@dataclass(frozen=True)
class RunOptions:
    backend: str | None = None
    """Override of the scenario's backend (``local`` | ``kubeconfig``)."""
    kubeconfig: str | None = None
    context: str | None = None
    bin_dir: str | None = None
    report_dir: Path = Path("draguard-report")
    seed: int | None = None
    progress: Callable[[str], None] = lambda message: None


def quiet_needed(pods: Iterable[Obj]) -> float:
    """The quiet period that settles a run with ``pods``: ``RETRY_QUIET`` while one is not running
    (pending, bound and not started, or being deleted), else ``SETTLE_QUIET``."""
    waiting = any((p.get("status") or {}).get("phase") not in ("Running", "Succeeded", "Failed")
                  or p["metadata"].get("deletionTimestamp") for p in pods)
    return RETRY_QUIET if waiting else SETTLE_QUIET


class Runner:
    def __init__(self, scenario: Scenario, options: RunOptions) -> None:
        self.scenario = scenario
        self.options = options
        self.run_id = uuid.uuid4().hex[:8]
        self.seed = options.seed if options.seed is not None else scenario.seed
        self.timeline = Timeline()
        self._spool = state_dir() / "runs" / self.run_id / "timeline.spool.jsonl"
        self.timeline.spool_to(self._spool)  # bounded memory while a big run goes on
        self.result = ScenarioResult(scenario.name, str(scenario.source) if scenario.source else None, self.seed,
                                     hold=scenario.expect.hold, violate=scenario.expect.violate)
        self.violations: dict[str, dict[str, Evidence]] = {name: {} for name in INVARIANTS.names()}
        self.checked: set[str] = set()
        self._handles: RunHandles | None = None
        self.initial_inventory: frozenset[DeviceId] = frozenset()
        self._settled = False
        self._created: set[str] = set()
        """Workloads whose pods have all been created (Gang.created)."""
        self._members: dict[str, tuple[str, ...]] | None = None
        self._stop_checks = threading.Event()
        self._first_seen: dict[tuple[str, str], float] = {}
        self._published: dict[DeviceId, Mapping[str, Any]] = {}
        """Every device a snapshot saw published, as last published (see Snapshot.published_before).
        Replaced, never changed in place: snapshots share it (a claims round, many a second, copied
        5000 devices each time)."""
        self._published_from: object = None
        """The Snapshot.devices last added to ``_published`` (the same object while no slice changed)."""
        self._quiet_of: tuple[object, float] = (None, SETTLE_QUIET)
        """The pods ``_settle_quiet`` last looked at, and the quiet period they need."""
        self._views: Snapshot | None = None
        """The last full snapshot: its indexes of unchanged objects are handed on (Snapshot.with_views_of)."""
        self._calls: list[DriverCall] = []
        """The interposer's records converted so far (see _driver_calls)."""
        self._calls_lock = threading.Lock()
        self._published_lock = threading.Lock()
        self._judge_lock = threading.Lock()
        self._driver_states: StampedReads[str, NodeDriverState] = StampedReads()
        """Each node's driver books, read again when its checkpoint or CDI folder changed (``_driver_state``)."""
        self._truths: dict[tuple[Path, str], DeviceTruth] = {}
        """One reader per node's device truth, kept across snapshots: it parses the file again only when
        its bytes changed (a new reader each snapshot parsed every node's truth every second)."""
        self._truth_states: StampedReads[tuple[Path, str], NodeTruth] = StampedReads()
        """Each node's device truth, read again when its file changed (``_truth_now``)."""
        self._driver_paths: dict[str, tuple[object, Path, Path]] = {}
        """Each node's driver handle, its checkpoint and CDI folder (named once per handle: 500 nodes
        are looked at twice a second)."""
        self._player: TimelinePlayer | None = None
        self._contexts: dict[str, StepContext] = {}
        self._fired: dict[str, int] = {}
        self._progress_seen: dict[Progress, float] = {}

    def log(self, message: str) -> None:
        self.timeline.add("phase", "Run", self.scenario.name, "phase", message)
        self.options.progress(message)

    # -- the whole run ---------------------------------------------------------------------------
    def run(self) -> ScenarioResult:
        started = time.monotonic()
        journal = Journal(self.run_id)
        cluster: LocalCluster | None = None
        try:
            kube, cluster = self._cluster()
            namespace = f"dg-{self.scenario.name[:40]}-{self.run_id}".replace("--", "-")
            journal.run_started(str(cluster.kubeconfig) if cluster else self.options.kubeconfig, namespace,
                                self.run_id, str(cluster.dir) if cluster else None)
            for sup in (cluster.components.values() if cluster else []):
                if sup.pid:
                    journal.process(sup.pid, sup.name)
            # A fresh controller manager takes seconds to make the namespace's ServiceAccount: start
            # the fleet meanwhile and wait for it just before the pods are created.
            kube.create_namespace(namespace, {RUN_LABEL: self.run_id}, wait=False)
            observer = Observer(kube, self.timeline)
            self._handles = RunHandles(self.run_id, self.scenario, kube, namespace, journal, self.timeline, observer,
                                       self._node_root(), cluster)
            self._handles.create_workload = self._create_workload_pods
            self._handles.kubeconfig = str(cluster.kubeconfig) if cluster else self.options.kubeconfig
            self._handles.report_dir = self.options.report_dir / self.scenario.name
            driver = self.scenario.driver.name
            observer.watch("Pod", namespace)
            observer.watch("ResourceClaim", namespace)
            observer.watch("Event", namespace)
            observer.watch("ResourceSlice", keep=lambda s: s.get("spec", {}).get("driver") == driver)
            observer.watch("DeviceClass")
            observer.watch("Node", label_selector=f"{RUN_LABEL}={self.run_id}" if self.scenario.driver.kind == "fake" else None)
            observer.start()
            self._fleet()
            self._remember_published()  # before any step can take a node's slices away
            # Judged from the first pod on: with thousands of pods, creating them takes a minute, and a
            # violation while they are scheduled (two gangs deadlocked, a device allocated twice, even
            # one gone again) must not wait for, or be missed before, the end of the deployment.
            checker = threading.Thread(target=self._check_continuously, name="invariants", daemon=True)
            checker.start()
            self._deploy()
            progress = threading.Thread(target=self._watch_progress, name="progress", daemon=True)
            progress.start()
            self._play_timeline()
            self._settle()
            self._stop_checks.set()
            checker.join(timeout=10)
            self._cleanup_phase()
        except DraguardError as exc:
            self.result.error = str(exc)
            self.result.error_kind = type(exc).__name__
            self.log(f"error: {exc}")
        finally:
            self._stop_checks.set()
            if self._handles is not None:
                self._handles.stop.set()
            if self._player is not None:
                self._player.join(timeout=30)
            try:
                self._count_fired()
            except (DraguardError, OSError):
                pass
            try:
                self._teardown(cluster)
                journal.close()
            except DraguardError as exc:  # the journal stays: `draguard cleanup` finishes the job
                if self.result.error is None:
                    self.result.error, self.result.error_kind = f"teardown: {exc}", type(exc).__name__
            self.result.duration = time.monotonic() - started
            self._finish()
        return self.result

    # -- phases ----------------------------------------------------------------------------------
    def _environment(self, backend: str, kube: Kube) -> None:
        """Record what this scenario ran on (``ScenarioResult.environment``)."""
        sc = self.scenario
        version = kube.server_version()
        self.result.environment.update({
            "backend": backend,
            "kubernetesVersion": version.get("gitVersion"),
            # What the server reports wins over what the scenario asked for (an existing cluster keeps its own).
            "featureGates": {**dict(sc.cluster.feature_gates),
                             **{g: on for g, on in kube.feature_gates().items() if _dra_gate(g) or g in sc.cluster.feature_gates}},
            "driver": {"name": sc.driver.name, "kind": sc.driver.kind, "mutant": sc.driver.mutant,
                       "deviceClass": sc.driver.device_class,
                       "version": draguard_version() if sc.driver.kind == "fake" else None,
                       "interposed": bool(sc.driver.interpose)},
            "nodeAgent": ("the cluster's kubelets" if sc.driver.kind != "fake" and backend != "local" else
                          {frozenset({"fake"}): "draguard fake nodes", frozenset({"kubelet"}): "hollow DRA kubelets"}.get(
                              frozenset(n.agent for n in sc.nodes), "draguard fake nodes and hollow DRA kubelets")),
            "nodeAgents": {n.name: n.agent for n in sc.nodes},
            "nodes": len(sc.nodes),
            "seed": self.seed,
        })

    def _cluster(self) -> tuple[Kube, LocalCluster | None]:
        spec = self.scenario.cluster
        backend = self.options.backend or spec.backend
        if backend == "kubeconfig":
            path = self.options.kubeconfig or (str(spec.kubeconfig) if spec.kubeconfig else None)
            kube = Kube.from_kubeconfig(path, self.options.context or spec.context)
            self._environment(backend, kube)
            self.log(f"connected to the cluster of {path or '$KUBECONFIG'}")
            return kube, None
        config = ClusterConfig(
            feature_gates=dict(spec.feature_gates),
            runtime_config={k: "true" if v else "false" for k, v in spec.runtime_config.items()},
            client_qps=spec.client_qps or DEFAULT_CLIENT_QPS,
            client_burst=spec.client_burst or DEFAULT_CLIENT_BURST,
            max_requests_inflight=spec.max_requests_inflight,
        )
        cluster = LocalCluster(f"run-{self.run_id}", config, bin_dir=self.options.bin_dir, progress=self.options.progress)
        t0 = time.monotonic()
        cluster.up()
        self.log(f"local control plane v1.37.2 up in {time.monotonic() - t0:.1f}s")
        kube = cluster.kube()
        self._environment(backend, kube)
        return kube, cluster

    def _node_root(self) -> Path:
        """``<state>/runs/<id>/nodes``, unless its socket paths would pass the 107-byte unix limit."""
        root = state_dir() / "runs" / self.run_id / "nodes"
        longest = max((len(n.name) for n in self.scenario.nodes), default=0)
        sockets = len(str(root)) + longest + len(self.scenario.driver.name) * 2 + len("//plugins_registry/-reg.sock")
        return root if sockets < 90 else Path(tempfile.gettempdir()) / f"draguard-{self.run_id}"

    def _fleet(self) -> None:
        h = self._h()
        sc = self.scenario
        if sc.driver.kind == "external" and h.cluster is not None:
            self._external_fleet()
            return
        if sc.driver.kind == "external":
            self.log(f"external driver {sc.driver.name}: using the cluster's nodes and slices")
            self._wait_slices(set(), timeout=30)
            pinned = pinned_nodes(sc)
            if pinned:  # the inventory no-leak compares with: this run's nodes, what no one held at the start
                self.initial_inventory = frozenset(DeviceId(*d) for d in free_devices(h.kube, sc.driver.name, pinned))
                self.log(f"pods pinned to {', '.join(pinned)}: {len(self.initial_inventory)} free device(s) there")
            return
        from ..driver.process import FakeDriverProcess
        from ..nodes.process import FakeNodesProcess

        kubeconfig = h.cluster.kubeconfig if h.cluster else Path(self.options.kubeconfig or "")
        h.node_root.mkdir(parents=True, exist_ok=True)
        driver_root = h.node_root
        if sc.driver.interpose:
            from ..proxy.faults import FaultSet
            from ..proxy.interposer import Interposer

            # The driver serves its sockets under <root>-plugins; the interposer re-exposes them where
            # the fake nodes look, records every call into the report and injects the steps' faults.
            driver_root = Path(f"{h.node_root}-plugins")
            evidence = self.options.report_dir / sc.name
            evidence.mkdir(parents=True, exist_ok=True)
            h.rpc_faults = FaultSet()  # in process: steps add validated rules, counted per rule
            h.interposer = Interposer(driver_root, h.node_root, h.rpc_faults,
                                      record=evidence / "grpc-calls.jsonl", run_label=self.run_id).start()
        names = [n.name for n in sc.nodes if n.agent == "fake"]
        # A kubelet wipes its node's ResourceSlices when it starts: kubelets come up before the drivers.
        self._kubelets(kubeconfig)
        labels: dict[str, str] = {}
        # Pod sync workers: each prepare waits on the API and the driver, so at scale the default 8 made
        # the fake nodes the ceiling (400 pods on 50 nodes: scheduled-to-Running lag grew to 15 s), and
        # 32 at 500 nodes (a kubelet syncs each pod on its own): Running/s 22.5 behind 26.2 scheduled/s,
        # bound-to-Running lag p50 28.7 s; with 125, 28.0 Running/s and 27.8 scheduled/s, lag p50 2.1 s.
        workers = 8 if len(names) <= PER_NODE_UP_TO else max(32, min(128, len(names) // 4))
        if names:
            h.nodes = FakeNodesProcess(kubeconfig, names, root=h.node_root, run_label=self.run_id, labels=labels,
                                       extra_args=["--workers", str(workers)])  # fmt: skip
            h.nodes.start()
            if h.nodes.pid:
                h.journal.process(h.nodes.pid, "draguard nodes")
            self.log(f"{len(names)} fake node(s) registered")
        started = time.monotonic()
        node_topology: dict[str, Path] = {}
        for node in sc.nodes:
            node_topology[node.name] = h.node_root / f"{node.name}.topology.json"
            node_topology[node.name].write_text(json.dumps(topology_file(node.topology, node.name)))
        hosting = sc.driver.hosting
        if hosting == "auto":
            hosting = "per-node" if len(sc.nodes) <= PER_NODE_UP_TO or h.kubelets else "shared"
        if hosting == "shared":
            from ..driver.host import DriverHostProcess, HostedNode

            host = DriverHostProcess(kubeconfig, driver_root, [
                HostedNode(n.name, str(node_topology[n.name]), None, sc.driver.mutant) for n in sc.nodes
            ], driver=sc.driver.name)  # fmt: skip
            h.driver_host = host
            host.start()
            if host.pid:
                h.journal.process(host.pid, f"fake driver host for {len(sc.nodes)} nodes")
            h.drivers.update(host.handles())
        else:
            procs = [FakeDriverProcess(kubeconfig, node.name, root=driver_root, driver=sc.driver.name,
                                       topology=node_topology[node.name], mutant=sc.driver.mutant,
                                       node_root=h.node_root if driver_root != h.node_root else None)
                     for node in sc.nodes]  # fmt: skip
            # Started together (each takes a second or more to import its libraries), then awaited.
            with ThreadPoolExecutor(8) as pool:
                for proc, error in zip(procs, pool.map(_start, procs)):
                    if proc.pid:
                        h.journal.process(proc.pid, f"fake driver on {proc.node}")
                    h.drivers[proc.node] = proc
                    if error is not None:
                        raise error
        for node_name, kubelet in h.kubelets.items():
            kubelet.wait_registered(sc.driver.name)
        self._wait_slices({n.name for n in sc.nodes}, timeout=max(60, len(sc.nodes) / 5))
        self.log(f"fake driver {sc.driver.name}{' (mutant ' + sc.driver.mutant + ')' if sc.driver.mutant else ''} "
                 f"published {len(self.initial_inventory)} devices"
                 + (", behind the gRPC interposer" if h.interposer else "")
                 + f" ({hosting}, {time.monotonic() - started:.1f}s)")

    def _external_fleet(self) -> None:
        """On a control plane of its own, draguard runs the one driver written by others it can: the
        upstream DRA test driver (k8s.io/kubernetes/test/e2e/dra/test-driver), one process per node
        with as many devices as the scenario's node, on fake nodes or hollow kubelets, and the DeviceClass."""
        from ..driver.external import TEST_DRIVER_NAME, ExternalPluginProcess, external_device_class, find_test_driver
        from ..nodes.process import FakeNodesProcess
        from draguard.harness.campaign.retarget import scenario_devices

        h = self._h()
        sc = self.scenario
        assert h.cluster is not None
        if sc.driver.name != TEST_DRIVER_NAME:
            raise UsageError(f"driver {sc.driver.name}: on a control plane of its own draguard runs only the upstream "
                             f"DRA test driver ({TEST_DRIVER_NAME}); for an installed driver give --kubeconfig")
        started = time.monotonic()
        binary = find_test_driver(self.options.bin_dir)
        h.node_root.mkdir(parents=True, exist_ok=True)
        self._kubelets(h.cluster.kubeconfig)  # a kubelet wipes its node's slices when it starts: before the drivers
        names = [n.name for n in sc.nodes if n.agent != "kubelet"]
        if names:
            h.nodes = FakeNodesProcess(h.cluster.kubeconfig, names, root=h.node_root, run_label=self.run_id)
            h.nodes.start()
            if h.nodes.pid:
                h.journal.process(h.nodes.pid, "draguard nodes")
        if sc.driver.device_class:
            cls = external_device_class(sc.driver.device_class, sc.driver.name)
            cls["metadata"]["labels"] = {RUN_LABEL: self.run_id}
            self._create(cls)
        devices = scenario_devices(sc)
        for node in sc.nodes:  # the test driver's slice is owned by its Node: the node registers first
            proc = ExternalPluginProcess(h.cluster.kubeconfig, node.name, root=h.node_root, driver=sc.driver.name,
                                         devices=devices[node.name], binary=binary)
            h.external_drivers[node.name] = proc
            proc.start()
            if proc.pid:
                h.journal.process(proc.pid, f"DRA test driver on {node.name}")
        for kubelet in h.kubelets.values():
            kubelet.wait_registered(sc.driver.name)
        self._wait_slices({n.name for n in sc.nodes}, timeout=60)
        self.log(f"upstream DRA test driver {sc.driver.name} published {len(self.initial_inventory)} devices on "
                 f"{len(sc.nodes)} node(s) ({time.monotonic() - started:.1f}s)")

    def _kubelets(self, kubeconfig: Path) -> None:
        """Start a hollow DRA kubelet for each node with ``agent: kubelet`` (local backend only)."""
        h = self._h()
        nodes = [n for n in self.scenario.nodes if n.agent == "kubelet"]
        if not nodes:
            return
        if h.cluster is None:
            raise UsageError("nodes with 'agent: kubelet' need the local backend: their credentials come from its CA")
        from ..cluster.pki import Pki
        from ..kubelet.process import HollowKubelet
        from draguard.harness.core.paths import NodeDirs

        t0 = time.monotonic()
        for node in nodes:
            kubelet = HollowKubelet(
                Pki(h.cluster.dir / "pki"), h.cluster.server, node.name, h.node_root, admin=h.kube,
                feature_gates=self.scenario.cluster.feature_gates, labels={RUN_LABEL: self.run_id, **node.labels},
                # The driver writes its CDI specs under the node's root even behind the interposer
                # (FakeDriverProcess node_root), not under the plugins root the interposer fronts.
                cdi_dir=NodeDirs(h.node_root, node.name).cdi,
            )
            h.kubelets[node.name] = kubelet
            kubelet.start()
            if kubelet.pid:
                h.journal.process(kubelet.pid, f"hollow kubelet {node.name}")
        self.log(f"{len(nodes)} hollow DRA kubelet(s) ready in {time.monotonic() - t0:.1f}s")

    def _wait_slices(self, pools: set[str], timeout: float) -> None:
        h = self._h()

        def ready() -> bool:
            have = {s["spec"]["pool"]["name"] for s in h.observer.objects("ResourceSlice") if s["spec"].get("devices")}
            if len(pools) > 1:
                self.options.progress(Counted("nodes with published ResourceSlices", len(pools & have), len(pools)))
            return pools <= have

        if not h.observer.wait_for(ready, timeout):
            raise HarnessError(f"the driver did not publish ResourceSlices for {', '.join(sorted(pools))} in {timeout:.0f}s")
        self.initial_inventory = frozenset(
            DeviceId(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
            for s in h.observer.objects("ResourceSlice") for d in s["spec"].get("devices", [])
        )

    def _deploy(self) -> None:
        h = self._h()
        sc = self.scenario
        h.kube.wait_namespace_ready(h.namespace)
        for dc in sc.device_classes:
            self._create(deploy.device_class(dc, self.run_id))
        for value in sorted({w.priority for w in sc.workloads if w.priority is not None and not w.priority_class_name}):
            self._create(deploy.priority_class(self.run_id, value))
        first: list[Obj] = []
        for w in sc.workloads:
            first += deploy.claim_objects(w, h.namespace, self.run_id)
            if w.gang == "podgroup":
                first.append(deploy.pod_group(w, h.namespace, self.run_id))
        self._create_all(first)
        # Workloads that arrive with a later step (preempt) are held back until it creates them.
        deferred = deploy.deferred_workloads(sc)
        pinned = pinned_nodes(sc)
        pods = [deploy.pod(w, member, h.namespace, self.run_id, sc.name, pinned)
                for w, member in deploy.creation_order(sc) if w.name not in deferred]  # fmt: skip
        started = time.monotonic()
        # Interleaved workloads (a0, b0, a1, ...) reproduce a race that needs that order: one at a time.
        ordered = any(w.interleave_with for w in sc.workloads)
        self._create_all(pods, parallel=1 if ordered else BULK_PARALLEL)
        self._created.update(w.name for w in sc.workloads if w.name not in deferred)
        elapsed = time.monotonic() - started
        self.log(f"deployed {len(pods)} pods in {len(sc.workloads)} workload(s) in {elapsed:.1f}s "
                 f"({len(pods) / max(elapsed, 1e-3):.0f}/s, {'in order' if ordered else f'{BULK_PARALLEL} at a time'})")

    def _create_workload_pods(self, workload: str) -> None:
        """Create the pods of a deferred workload (``arrive``, ``preempt``)."""
        h = self._h()
        w = self.scenario.workload(workload)
        self._create_all([deploy.pod(w, member, h.namespace, self.run_id, self.scenario.name,
                                     pinned_nodes(self.scenario))
                          for member in range(w.replicas)])  # fmt: skip
        self._created.add(w.name)

    def _create_all(self, objs: list[Obj], parallel: int = BULK_PARALLEL) -> None:
        """Create ``objs`` with at most ``parallel`` requests in flight; the first error is raised."""
        for obj, result in zip(objs, self._h().kube.bulk(self._create, objs, parallel)):
            if isinstance(result, HarnessError):
                raise result
            if isinstance(result, Exception):
                md = obj["metadata"]
                raise HarnessError(f"creating {obj['kind']} {md.get('namespace', '')}/{md['name']}: {result}") from result

    def _create(self, obj: Obj) -> Obj:
        h = self._h()
        try:
            return h.kube.create(obj)
        except ApiError as exc:
            md = obj["metadata"]
            raise HarnessError(f"creating {obj['kind']} {md.get('namespace', '')}/{md['name']}: {exc}") from exc

    def _play_timeline(self) -> None:
        """Every step on its own thread; returns when all of them finished or gave up."""
        h = self._h()
        if not self.scenario.timeline:
            return
        self._player = TimelinePlayer(
            self.scenario.timeline,
            clock=self.timeline.now,
            condition=self._condition,
            wait_for=h.observer.wait_for,
            execute=self._run_step,
            stop=h.stop,
        )
        self._player.start()
        longest = max((s.at.total_seconds() if s.at else 0.0) + s.timeout.total_seconds() for s in self.scenario.timeline)
        if not self._player.join(timeout=longest + 600):
            self.log("some steps are still running; moving on")

    def _condition(self, cond: Condition) -> bool:
        tally = self._h().observer.tally(cond.workload)
        if cond.phase == "Deleted":
            return self.scenario.workload(cond.workload).replicas - tally["live"] >= cond.count
        return tally["scheduled" if cond.phase == "Scheduled" else f"phase:{cond.phase}"] >= cond.count

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

    def _undo(self, until_cleanup: bool) -> None:
        """Run the in-process undos of one kind, newest first, journaling each as undone."""
        h = self._h()
        for undo in [u for u in reversed(h.undo) if u.until_cleanup == until_cleanup]:
            h.undo.remove(undo)
            try:
                undo.fn()
                if undo.seq:
                    h.journal.undone(undo.seq)
            except DraguardError as exc:
                self.log(f"undo failed: {exc}")

    def _settle(self) -> None:
        h = self._h()
        timeout = self.scenario.settle.timeout.total_seconds()
        deadline = time.monotonic() + timeout
        quiet = h.observer.wait_quiet(quiet=lambda: min(self._settle_quiet(), timeout), timeout=timeout)
        # Quiet is not settled while expected progress has not come yet: a kubelet retries a failed
        # prepare only after its back-off (about 10 s), longer than the quiet period. Wait for it,
        # within the same settle timeout, then for quiet again.
        wanted = self.scenario.expect.progress
        while wanted and len(self._progress_seen) < len(wanted) and time.monotonic() < deadline:
            time.sleep(0.5)
            if len(self._progress_seen) == len(wanted):
                quiet = h.observer.wait_quiet(quiet=lambda: min(self._settle_quiet(), timeout),
                                              timeout=max(0.0, deadline - time.monotonic()))
        self._settled = True
        self.log("settled" if quiet else f"settle timeout ({timeout:.0f}s) reached before {self._settle_quiet():.0f}s "
                 "without a change")
        self._judge(judged("continuously", "at-settle"))

    def _settle_quiet(self) -> float:
        """How long the run must be without a change to be settled now: ``RETRY_QUIET`` while a pod of
        the run is not running (pending, bound and not started, being deleted), else ``SETTLE_QUIET``."""
        pods = self._h().observer.frozen("Pod")
        if pods is not self._quiet_of[0]:
            self._quiet_of = (pods, quiet_needed(pods))
        return self._quiet_of[1]

    def _cleanup_phase(self) -> None:
        h = self._h()
        h.stop.set()  # steps still waiting or sleeping through a duration end now
        if self._player is not None:
            self._player.join(timeout=60)
        self._count_fired()
        self._undo(until_cleanup=True)
        self.log("cleanup: faults that lasted until now are undone; deleting the workloads")
        pods = [p["metadata"]["name"] for p in h.observer.objects("Pod")]
        for name, result in zip(pods, h.kube.bulk(lambda n: h.kube.delete("Pod", n, h.namespace), pods)):
            if isinstance(result, Exception):
                raise HarnessError(f"deleting pod {h.namespace}/{name}: {result}") from result
        timeout = self.scenario.settle.cleanup.total_seconds()

        def quiet() -> bool:
            if h.observer.objects("Pod"):
                return False
            if any((c.get("status") or {}).get("reservedFor") for c in h.observer.objects("ResourceClaim")):
                return False
            return (all(not self._driver_state(n).prepared for n in h.drivers) and not self._calls_in_flight()
                    and not any(s.prepared for s in self._external_states()))

        deadline = time.monotonic() + timeout
        gone = h.observer.wait_for(quiet, timeout)
        # A prepare that outlived its caller (the kubelet gives up after 45 s) still completes and
        # changes the node: judge only once no driver has a call in flight (within the same timeout).
        from ..driver.inflight import in_flight

        while self._calls_in_flight() and time.monotonic() < deadline:
            time.sleep(0.2)
        busy = {n: in_flight(p.plugin_dir) for n, p in h.drivers.items() if in_flight(p.plugin_dir)}
        h.observer.wait_quiet(quiet=1.0, timeout=5.0)
        self.log("consumers gone" if gone else f"consumers not gone after {timeout:.0f}s"
                 + (f"; calls still in flight: {busy}" if busy else ""))
        self._judge(judged("after-cleanup"))
        if h.cluster is not None and h.cluster.exits:  # started again by the cluster's keeper: evidence, not hidden
            self.result.environment["controlPlaneExits"] = list(h.cluster.exits)
            self.log("control-plane components exited on their own and were started again: "
                     + "; ".join(e.splitlines()[0] for e in h.cluster.exits))
        dead = h.cluster.dead() if h.cluster is not None else []
        if dead:  # every step that stops a component starts it again: one that is down now died on its own
            raise HarnessError("the local control plane lost " + "; ".join(dead) + "\nwhat the run saw may be the "
                               "control plane's doing, not the driver's: the scenario is an error, not a verdict")

    def _external_states(self) -> tuple[NodeDriverState, ...]:
        """What the upstream test driver holds prepared on each node it runs on for this run, seen from
        outside: its CDI spec files (one per claim and request, removed at unprepare; it keeps no other
        record on disk: test/e2e/dra/test-driver/app/kubeletplugin.go)."""
        out = []
        for node, proc in self._h().external_drivers.items():
            uids = frozenset(proc.prepared_claims())
            out.append(NodeDriverState(node=node, driver=proc.driver, prepared={u: () for u in uids}, cdi_specs=uids))
        return tuple(out)

    def _calls_in_flight(self) -> bool:
        from ..driver.inflight import in_flight

        return any(in_flight(p.plugin_dir) for p in self._h().drivers.values())

    def _teardown(self, cluster: LocalCluster | None) -> None:
        h = self._handles
        if h is not None:
            self._undo(until_cleanup=True)
            self._undo(until_cleanup=False)
            h.observer.stop()
            # The timeline ends here: teardown's deletions are not part of what the scenario showed.
            self.result.timeline = TimelineEvents(tuple(h.timeline.events()))
            if cluster is None:  # a shared cluster: remove exactly what this run created
                delete_labelled(h.kube, self.run_id)
            for external in h.external_drivers.values():
                external.stop()
            if h.driver_host is not None:
                h.driver_host.stop()
            else:
                for proc in h.drivers.values():
                    proc.stop()
            for kubelet in h.kubelets.values():
                kubelet.stop()
            if h.nodes is not None:
                h.nodes.stop()
            if h.interposer is not None:
                h.interposer.stop()
                shutil.rmtree(f"{h.node_root}-plugins", ignore_errors=True)
            self._keep_device_truth(h)
            if os.environ.get("DRAGUARD_KEEP_LOGS") == "1":  # the node agents' and drivers' logs too
                self.log(f"kept the nodes' files (DRAGUARD_KEEP_LOGS=1): {h.node_root}")
            else:
                shutil.rmtree(h.node_root, ignore_errors=True)
        if cluster is not None:
            # DRAGUARD_KEEP_LOGS=1 keeps the control-plane logs of a run for debugging.
            cluster.down(remove=os.environ.get("DRAGUARD_KEEP_LOGS") != "1")

    def _keep_device_truth(self, h: RunHandles) -> None:
        """Copy each node's device truth into the report (``<scenario>/devices/<node>.json``) as evidence."""
        out = self.options.report_dir / self.scenario.name / "devices"
        for node in h.drivers:
            src = DeviceTruth(h.node_root, node).path
            if src.exists():
                out.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, out / f"{node}.json")

    # -- judging ---------------------------------------------------------------------------------
    def _driver_state(self, node: str) -> NodeDriverState:
        """One node's driver books and CDI specs; read again only when the checkpoint or the CDI
        folder changed on disk (judged every second, at 500 nodes)."""
        from ..driver.state import checkpoint_path

        h = self._h()
        handle = h.drivers[node]
        named = self._driver_paths.get(node)
        if named is None or named[0] is not handle:
            named = (handle, checkpoint_path(handle.root, node, h.driver_name), handle.node_root / node / "cdi")
            self._driver_paths[node] = named
        return self._driver_states.get(node, named[1:], lambda: self._read_driver_state(node))

    def _read_driver_state(self, node: str) -> NodeDriverState:
        from ..driver.state import read_checkpoint

        h = self._h()
        root = h.drivers[node].root
        cp = read_checkpoint(root, node, h.driver_name)
        prepared = {
            uid: tuple(DeviceId(h.driver_name, d.pool, d.device) for d in rec.devices)
            for uid, rec in cp.claims.items()
        }
        devices = {name: DeviceState(rec.state.value, (rec.claim,) if rec.claim else ()) for name, rec in cp.devices.items()}
        cdi_dir = h.drivers[node].node_root / node / "cdi"
        prefix = f"{h.driver_name}-"
        specs = frozenset(p.name[len(prefix):-len(".json")] for p in cdi_dir.glob(f"{prefix}*.json")) if cdi_dir.exists() else frozenset()
        return NodeDriverState(node=node, driver=h.driver_name, prepared=prepared, devices=devices, cdi_specs=specs)

    def _gpu_usage(self, h: RunHandles) -> dict[DeviceId, GpuUsage]:
        """What each node's probe sees: processes and memory per device, MIG devices on their own
        (a parent's memory counts its MIG devices', as NVML's does, so it is taken out here)."""
        from ..devices.probe import FakeProbe

        out: dict[DeviceId, GpuUsage] = {}
        for node in h.drivers:
            for d in FakeProbe(self._truth(h.node_root, node)).probe().devices:
                own = d.memory_used - sum(m.memory_used for m in d.mig_devices)
                out[DeviceId(h.driver_name, node, d.name)] = GpuUsage(tuple(p.pid for p in d.processes), own)
                for m in d.mig_devices:
                    out[DeviceId(h.driver_name, node, m.name)] = GpuUsage(tuple(p.pid for p in m.processes), m.memory_used)
        return out

    def snapshot(self, drivers_state: bool = True) -> Snapshot:
        """What the invariants judge. The drivers' books are always there (no-double-allocation reads
        them while the run goes on: a device prepared for two claims may last only seconds; each node
        is read again only when its files changed); ``drivers_state=False`` skips the GPU probe."""
        h = self._h()
        grace = self.scenario.timing.gang_grace.total_seconds()
        if self._members is None:  # named once: 5000 names twice a second cost the judging round
            self._members = {w.name: w.pod_names() for w in self.scenario.workloads}
        gangs = tuple(
            Gang(w.name, h.namespace, self._members[w.name], len(w.claims), self._settled,
                 min_count=w.min_count, grace=grace, created=w.name in self._created)
            for w in self.scenario.workloads
        )
        drivers = tuple(self._driver_state(n) for n in h.drivers) + self._external_states()
        truth = tuple(self._truth_now(h.node_root, n) for n in h.drivers)
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

    def _truth_now(self, root: Path, node: str) -> NodeTruth:
        """One node's device truth, read again only when its file changed on disk (as ``_driver_state``)."""
        reader = self._truth(root, node)
        return self._truth_states.get((root, node), (reader.path,), reader.read)

    def _truth(self, root: Path, node: str) -> DeviceTruth:
        reader = self._truths.get((root, node))
        if reader is None:
            reader = self._truths.setdefault((root, node), DeviceTruth(root, node))
        return reader

    def _driver_calls(self, h: RunHandles) -> tuple[DriverCall, ...]:
        """The interposer's record so far, timed from the scenario's start (empty without an interposer).
        Each record is converted once, when a snapshot first sees it."""
        if h.interposer is None:
            return ()
        offset = self.timeline.now() - time.time()
        with self._calls_lock:  # snapshots are taken by the checker and by the final judgments
            for e in h.interposer.recorder.recorded(since=len(self._calls)):
                self._calls.append(DriverCall(
                    time=round(float(e.get("ts", 0.0)) + offset, 3), node=str(e.get("node", "")),
                    driver=str(e.get("driver", "")), method=str(e.get("method", "")),
                    claims=tuple((str(c.get("namespace", "")), str(c.get("name", "")), str(c.get("uid", "")))
                                 for c in e.get("claims") or ()),
                    status=str(e.get("status", "")), error=str(e.get("error", "")),
                    claim_errors=dict(e.get("claim_errors") or {}),
                    injected=e.get("fault") if e.get("kind") == "call" else str(e.get("kind")),
                ))
            return tuple(self._calls)

    def _judgeable(self, name: str) -> str:
        """Why invariant ``name`` cannot be judged in this run ("" when it can)."""
        sc = self.scenario
        lacks = lacking(sc.driver.kind, self.options.backend or sc.cluster.backend, sc.driver.interpose)
        for need in INVARIANTS.get(name).meta.get("needs", ()):
            if need in lacks:
                return f"not checked: it needs {need}, but {lacks[need]}"
        return ""

    def _remember_published(self) -> None:
        """Note the devices published now (Snapshot.published_before is built from what was noted)."""
        devices = Snapshot(time=0.0, slices=tuple(self._h().observer.objects("ResourceSlice"))).devices
        with self._published_lock:
            self._published = {**self._published, **devices}

    def _judge(self, names: list[str], snapshot: Snapshot | None = None, partial: bool = False) -> None:
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
                        initial_inventory=self.initial_inventory, published_before=published_before)  # fmt: skip
        return snap.with_views_of(self._views)

    def _check_continuously(self) -> None:
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
        while not self._stop_checks.is_set():
            try:
                left = full_due - time.monotonic()
                if left > 0:
                    now_seen = observer.wait_change("ResourceClaim", seen, min(left, 0.5))
                    if now_seen != seen and time.monotonic() < full_due:
                        seen = now_seen
                        self._judge(claim_names, incremental.reduce(self._claims_snapshot()), partial=True)
                        self._stop_checks.wait(CLAIMS_ROUND_GAP)
                    continue
                seen = observer.changes("ResourceClaim")
                snapshot = self.snapshot(drivers_state=False)
                self._judge(claim_names, incremental.reduce(snapshot))
                self._judge(whole, snapshot)
                full_due = time.monotonic() + JUDGE_INTERVAL
            except DraguardError as exc:
                self.timeline.add("invariant", "*", self.scenario.name, "error", str(exc))
                full_due = time.monotonic() + JUDGE_INTERVAL
                self._stop_checks.wait(JUDGE_INTERVAL)

    def _watch_progress(self) -> None:
        """Watch, on every change, for the progress ``expect.progress`` asks for; note when it happened."""
        wanted = list(self.scenario.expect.progress)
        if not wanted:
            return
        h = self._h()

        def check() -> bool:
            for p in wanted:
                if p not in self._progress_seen and self._progress_reached(p):
                    self._progress_seen[p] = self.timeline.now()
                    self.timeline.add("expect", "progress", self.scenario.name, "reached", p.describe())
            return len(self._progress_seen) == len(wanted) or self._stop_checks.is_set()

        while not self._stop_checks.is_set():
            if h.observer.wait_for(check, 1.0):
                return

    def _progress_reached(self, p: Progress) -> bool:
        reached = [self._condition(Condition(w, p.phase, p.count or self.scenario.workload(w).replicas))
                   for w in p.workloads]
        return all(reached) if p.need == "all" else any(reached)

    # -- results ---------------------------------------------------------------------------------
    def _finish(self) -> None:
        exp = self.scenario.expect
        self.result.ignore = exp.ignored
        for entry in INVARIANTS:
            want = self.result.expectation(entry.name)  # every violation counts unless violate/ignore names it
            found = list(self.violations.get(entry.name, {}).values())
            status: Status = "violated" if found else "held" if entry.name in self.checked else "not-checked"
            note = self._judgeable(entry.name)
            if self.scenario.driver.kind == "external":  # an installed driver: no books, no device truth
                if entry.name in NOT_JUDGED:
                    status, found, note = "not-checked", [], f"not checked on an installed driver: {NOT_JUDGED[entry.name]}"
                elif entry.name in PARTIAL and status != "not-checked":
                    local = self._handles is not None and bool(self._handles.external_drivers)
                    note = (LOCAL_PARTIAL if local else PARTIAL)[entry.name]
            self.result.invariants[entry.name] = InvariantResult(entry.name, entry.summary, status, want.expected, found,
                                                                 note, want.required, want.reason)
        for name in (*exp.hold, *exp.violate):
            if self.result.invariants[name].status == "not-checked" and self.result.error is None:
                self.result.error = f"invariant {name} could not be judged (the run stopped early)"
        self._finish_steps()
        for p in exp.progress:
            self.result.expectation_results.append(self._progress_result(p))
        for rule in exp.evidence:
            found = self.result.invariants[rule.invariant].violations
            match = next((v for v in found if evidence_matches(rule, v, self._namespace())), None)
            self.result.expectation_results.append(ExpectationResult(
                "evidence", rule.describe(), match is not None,
                f"carried by: {match.message}" if match is not None
                else f"none of its {len(found)} violation(s) names it"))
        if self.result.timeline is None:  # stopped before the fleet: what the timeline has so far
            self.result.timeline = TimelineEvents(tuple(self.timeline.events()))
        # The runner writes no report files: renderers (draguard.reports) take the result from here.
        self._spool.unlink(missing_ok=True)

    def _progress_result(self, p: Progress) -> ExpectationResult:
        """Whether progress ``p`` came, and in time when it names a ``within``."""
        at = self._progress_seen.get(p)
        if at is None:
            return ExpectationResult("progress", p.describe(), False, "never reached during the run")
        if p.within is None:
            return ExpectationResult("progress", p.describe(), True, f"reached at {at:.1f}s")
        start = 0.0
        if p.after is not None:
            run = self._player.runs.get(p.after) if self._player is not None else None
            if run is None or run.ran is None:
                return ExpectationResult("progress", p.describe(), False,
                                         f"reached at {at:.1f}s, but step {p.after} never ran to start the clock")
            start = run.ran
        took = at - start
        since = f"step {p.after} ran" if p.after else "the start"
        return ExpectationResult("progress", p.describe(), took <= p.within,
                                 f"reached {took:.1f}s after {since} (at {at:.1f}s); allowed {p.within:g}s")

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


def _start(proc: Any) -> HarnessError | None:
    try:
        proc.start()
        return None
    except HarnessError as exc:
        return exc


def _dra_gate(name: str) -> bool:
    """Feature gates worth recording with a DRA run (the full list has hundreds)."""
    return name.startswith("DRA") or "DynamicResource" in name or name in ("GenericWorkload", "GangScheduling")


def topology_file(topology: Topology | None, node: str) -> dict[str, Any]:
    """The fake driver's NodeTopology document for a scenario node."""
    from ..driver.topology import generic

    if topology is None:
        raise HarnessError(f"node {node}: the fake driver needs a topology")
    if topology.preset:
        return {"apiVersion": "draguard.dev/v1alpha1", "kind": "NodeTopology", "preset": topology.preset}
    if topology.gpus:
        product: dict[str, Any] = {}
        devices = []
        for spec in generic(topology.gpus):
            d = spec.model_dump(exclude_none=True)
            i = d["index"]
            per_domain = max(1, -(-topology.gpus // topology.nvlink_domains))
            per_numa = max(1, -(-topology.gpus // topology.numa_nodes))
            d["nvlinkDomain"] = f"{node}-nvl{i // per_domain}"
            d["numaNode"] = i // per_numa
            if topology.product_name:
                d["productName"] = topology.product_name
            if topology.memory:
                d["memory"] = topology.memory
            if topology.allow_multiple_allocations:
                d["allowMultipleAllocations"] = True
            devices.append({**d, **product})
        return {"apiVersion": "draguard.dev/v1alpha1", "kind": "NodeTopology", "devices": devices}
    devices = []
    for i, dev in enumerate(topology.devices):
        attrs = dict(dev.attributes)
        d = {
            "name": dev.name,
            "index": int(attrs.pop("index", i)),
            "productName": str(attrs.pop("productName", "Generic Accelerator")),
            "architecture": str(attrs.pop("architecture", "Generic")),
            "memory": dev.capacity.get("memory", "16Gi"),
            "numaNode": int(attrs.pop("numaNode", 0)),
            "pcieRoot": str(attrs.pop("pcieRoot", f"pci0000:{i:02x}")),
        }
        if "nvlinkDomain" in attrs:
            d["nvlinkDomain"] = str(attrs.pop("nvlinkDomain"))
        if attrs:
            d["attributes"] = attrs
        extra = {k: v for k, v in dev.capacity.items() if k != "memory"}
        if extra:
            d["capacity"] = extra
        if dev.allow_multiple_allocations:
            d["allowMultipleAllocations"] = True
        if dev.taints:
            d["taints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in dev.taints]
        devices.append(d)
    return {"apiVersion": "draguard.dev/v1alpha1", "kind": "NodeTopology", "devices": devices}
