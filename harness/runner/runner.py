"""The runner: one scenario, end to end, on a real control plane.

Phases, each on the timeline:

1. **cluster**: start a local control plane with the scenario's feature gates, or connect to one;
2. **fleet**: fake nodes (one process) and one fake DRA driver per node, or an external driver;
3. **deploy**: DeviceClasses, PriorityClasses, claims/templates, PodGroups, then the pods (interleaved
   where the scenario says);
4. **timeline**: chaos steps at their time or when their condition is reached, each journaled first;
   the continuous invariants are judged every second meanwhile;
5. **settle**: until nothing changes (or the settle timeout); then every invariant but the
   cleanup ones is judged with gangs settled;
6. **cleanup**: the workloads are deleted; once consumers are gone (or the cleanup timeout passed)
   ``no-leak`` and ``sharing-explicit`` are judged;
7. **teardown**: faults undone, every object with the run label deleted, processes stopped, cluster down.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..cluster.local import ClusterConfig, LocalCluster
from ..errors import DraguardError, HarnessError, UsageError
from ..invariants import DeviceId, DeviceState, Gang, NodeDriverState, Snapshot, evaluate
from ..kube import ApiError, Kube, Obj
from ..paths import state_dir
from ..registry import FAULTS, INVARIANTS
from ..environment import draguard_version
from ..progress import Counted
from ..result import Evidence, InvariantResult, ScenarioResult, Status, StepResult, TimelineEvents
from ..scenario.types import Condition, Scenario, Step, Topology
from . import deploy
from .context import RunHandles, StepContext
from .journal import RUN_LABEL, Journal, delete_labelled
from .observe import Observer, Timeline

__all__ = ["Runner", "RunOptions", "CONTINUOUS", "AFTER_CLEANUP"]

CONTINUOUS = ("claim-atomic", "no-double-allocation", "topology", "no-legacy-mix")
"""Judged every second while the scenario runs: a breach at any moment counts."""
AFTER_CLEANUP = ("no-leak", "sharing-explicit")
"""Judged once the consumers are gone."""


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


class Runner:
    def __init__(self, scenario: Scenario, options: RunOptions) -> None:
        self.scenario = scenario
        self.options = options
        self.run_id = uuid.uuid4().hex[:8]
        self.seed = options.seed if options.seed is not None else scenario.seed
        self.timeline = Timeline()
        self.result = ScenarioResult(scenario.name, str(scenario.source) if scenario.source else None, self.seed,
                                     hold=scenario.expect.hold, violate=scenario.expect.violate)
        self.violations: dict[str, dict[str, Evidence]] = {name: {} for name in INVARIANTS.names()}
        self.checked: set[str] = set()
        self.handles: RunHandles | None = None
        self.initial_inventory: frozenset[DeviceId] = frozenset()
        self._settled = False
        self._stop_checks = threading.Event()

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
            self.handles = RunHandles(self.run_id, self.scenario, kube, namespace, journal, self.timeline, observer,
                                      self._node_root(), cluster)
            self.handles.deploy_workload = self.create_workload_pods
            driver = self.scenario.driver.name
            observer.watch("Pod", namespace)
            observer.watch("ResourceClaim", namespace)
            observer.watch("Event", namespace)
            observer.watch("ResourceSlice", keep=lambda s: s.get("spec", {}).get("driver") == driver)
            observer.watch("DeviceClass")
            observer.watch("Node", label_selector=f"{RUN_LABEL}={self.run_id}" if self.scenario.driver.kind == "fake" else None)
            observer.start()
            self._fleet()
            self._deploy()
            checker = threading.Thread(target=self._check_continuously, name="invariants", daemon=True)
            checker.start()
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
                       "version": draguard_version() if sc.driver.kind == "fake" else None,
                       "interposed": bool(sc.driver.interpose)},
            "nodeAgent": ("the cluster's kubelets" if sc.driver.kind != "fake" else
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
        if sc.driver.kind == "external":
            self.log(f"external driver {sc.driver.name}: using the cluster's nodes and slices")
            self._wait_slices(set(), timeout=30)
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
            h.proxy_faults = h.node_root / "proxy-faults.json"
            h.proxy_faults.write_text('{"faults": []}\n')
            h.interposer = Interposer(driver_root, h.node_root, FaultSet(h.proxy_faults),
                                      record=evidence / "grpc-calls.jsonl", run_label=self.run_id).start()
        names = [n.name for n in sc.nodes if n.agent == "fake"]
        # A kubelet wipes its node's ResourceSlices when it starts: kubelets come up before the drivers.
        self._kubelets(kubeconfig, driver_root)
        if names:
            labels: dict[str, str] = {}
            h.nodes = FakeNodesProcess(kubeconfig, names, root=h.node_root, run_label=self.run_id, labels=labels)
            h.nodes.start()
            if h.nodes.pid:
                h.journal.process(h.nodes.pid, "draguard nodes")
            self.log(f"{len(names)} fake node(s) registered")
        for i, node in enumerate(sc.nodes):
            if len(sc.nodes) > 1:
                self.options.progress(Counted("starting fake drivers", i, len(sc.nodes)))
            topo = h.node_root / f"{node.name}.topology.json"
            topo.write_text(json.dumps(topology_file(node.topology, node.name)))
            proc = FakeDriverProcess(kubeconfig, node.name, root=driver_root, driver=sc.driver.name,
                                     topology=topo, mutant=sc.driver.mutant)
            proc.start()
            if proc.pid:
                h.journal.process(proc.pid, f"fake driver on {node.name}")
            h.drivers[node.name] = proc
            if node.name in h.kubelets:
                h.kubelets[node.name].wait_registered(sc.driver.name)
        self._wait_slices({n.name for n in sc.nodes}, timeout=60)
        self.log(f"fake driver {sc.driver.name}{' (mutant ' + sc.driver.mutant + ')' if sc.driver.mutant else ''} "
                 f"published {len(self.initial_inventory)} devices"
                 + (", behind the gRPC interposer" if h.interposer else ""))

    def _kubelets(self, kubeconfig: Path, driver_root: Path) -> None:
        """Start a hollow DRA kubelet for each node with ``agent: kubelet`` (local backend only)."""
        h = self._h()
        nodes = [n for n in self.scenario.nodes if n.agent == "kubelet"]
        if not nodes:
            return
        if h.cluster is None:
            raise UsageError("nodes with 'agent: kubelet' need the local backend: their credentials come from its CA")
        from ..cluster.pki import Pki
        from ..kubelet.process import HollowKubelet
        from ..paths import NodeDirs

        t0 = time.monotonic()
        for node in nodes:
            kubelet = HollowKubelet(
                Pki(h.cluster.dir / "pki"), h.cluster.server, node.name, h.node_root, admin=h.kube,
                feature_gates=self.scenario.cluster.feature_gates, labels={RUN_LABEL: self.run_id, **node.labels},
                cdi_dir=NodeDirs(driver_root, node.name).cdi,
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
        for w in sc.workloads:
            for obj in deploy.claim_objects(w, h.namespace, self.run_id):
                self._create(obj)
            if w.gang == "podgroup":
                self._create(deploy.pod_group(w, h.namespace, self.run_id))
        # Workloads that arrive with a later step (preempt) are held back until it creates them.
        deferred = deploy.deferred_workloads(sc)
        for w, member in deploy.creation_order(sc):
            if w.name not in deferred:
                self._create(deploy.pod(w, member, h.namespace, self.run_id, sc.name))
        self.log(f"deployed {sum(w.replicas for w in sc.workloads if w.name not in deferred)} pods "
                 f"in {len(sc.workloads)} workload(s)")

    def create_workload_pods(self, workload: str) -> None:
        """Create the pods of a deferred workload (used by the ``preempt`` fault)."""
        h = self._h()
        w = self.scenario.workload(workload)
        for member in range(w.replicas):
            self._create(deploy.pod(w, member, h.namespace, self.run_id, self.scenario.name))

    def _create(self, obj: Obj) -> Obj:
        h = self._h()
        try:
            return h.kube.create(obj)
        except ApiError as exc:
            md = obj["metadata"]
            raise HarnessError(f"creating {obj['kind']} {md.get('namespace', '')}/{md['name']}: {exc}") from exc

    def _play_timeline(self) -> None:
        h = self._h()
        pending = sorted(self.scenario.timeline, key=lambda s: (s.at is None, s.at.total_seconds() if s.at else 0, s.index))
        start = time.monotonic()
        while pending:
            due_at = [s for s in pending if s.at is not None]
            next_at = min((start + s.at.total_seconds() for s in due_at if s.at is not None), default=None)
            whens = [s for s in pending if s.when is not None]
            timeout = (next_at - time.monotonic()) if next_at is not None else 600.0
            if timeout > 0:
                if whens:
                    h.observer.wait_for(lambda: any(self._condition(s.when) for s in whens if s.when), timeout)
                else:
                    time.sleep(timeout)
            ready = [s for s in pending if (s.at is not None and time.monotonic() >= start + s.at.total_seconds())
                     or (s.when is not None and self._condition(s.when))]
            if not ready and next_at is None and whens:
                for s in whens:
                    self.result.steps.append(StepResult(s.name, s.fault, self.timeline.now(), False,
                                                        f"condition never reached: {s.when}"))
                return
            for step in ready:
                pending.remove(step)
                self._run_step(step)

    def _condition(self, cond: Condition) -> bool:
        pods = [p for p in self._h().observer.objects("Pod")
                if p["metadata"].get("labels", {}).get(deploy.WORKLOAD_LABEL) == cond.workload]
        if cond.phase == "Deleted":
            live = len([p for p in pods if not p["metadata"].get("deletionTimestamp")])
            return self.scenario.workload(cond.workload).replicas - live >= cond.count
        if cond.phase == "Scheduled":
            n = sum(1 for p in pods if p["spec"].get("nodeName"))
        else:
            n = sum(1 for p in pods if p.get("status", {}).get("phase") == cond.phase)
        return n >= cond.count

    def _run_step(self, step: Step) -> None:
        h = self._h()
        entry = FAULTS.get(step.fault)
        ctx = StepContext(h, step, random.Random(f"{self.seed}:{step.index}"))
        t = self.timeline.now()
        h.timeline.add("fault", step.fault, step.name, "start", f"target={step.target}")
        self.log(f"step {step.name}: {entry.summary}")
        try:
            entry.target(ctx, step.params)
            ok, detail = True, "; ".join(ctx.notes)
        except DraguardError as exc:
            ok, detail = False, str(exc)
        h.timeline.add("fault", step.fault, step.name, "done" if ok else "failed", detail)
        self.result.steps.append(StepResult(step.name, step.fault, t, ok, detail))

    def _settle(self) -> None:
        h = self._h()
        timeout = self.scenario.settle.timeout.total_seconds()
        quiet = h.observer.wait_quiet(quiet=min(4.0, timeout), timeout=timeout)
        self._settled = True
        self.log("settled" if quiet else f"settle timeout ({timeout:.0f}s) reached while still changing")
        self._judge([n for n in INVARIANTS.names() if n not in AFTER_CLEANUP])

    def _cleanup_phase(self) -> None:
        h = self._h()
        pods = h.observer.objects("Pod")
        for i, p in enumerate(pods):
            if len(pods) > 1:
                self.options.progress(Counted("deleting pods", i, len(pods)))
            h.kube.delete("Pod", p["metadata"]["name"], h.namespace)
        timeout = self.scenario.settle.cleanup.total_seconds()

        def quiet() -> bool:
            if h.observer.objects("Pod"):
                return False
            if any((c.get("status") or {}).get("reservedFor") for c in h.observer.objects("ResourceClaim")):
                return False
            return all(not self._driver_state(n).prepared for n in h.drivers)

        gone = h.observer.wait_for(quiet, timeout)
        h.observer.wait_quiet(quiet=1.0, timeout=5.0)
        self.log("consumers gone" if gone else f"consumers not gone after {timeout:.0f}s")
        self._judge(list(AFTER_CLEANUP))

    def _teardown(self, cluster: LocalCluster | None) -> None:
        h = self.handles
        if h is not None:
            for _, undo in reversed(h.undo):
                try:
                    undo()
                except DraguardError as exc:
                    self.log(f"undo failed: {exc}")
            h.observer.stop()
            # The timeline ends here: teardown's deletions are not part of what the scenario showed.
            self.result.timeline = TimelineEvents(tuple(h.timeline.events()))
            if cluster is None:  # a shared cluster: remove exactly what this run created
                delete_labelled(h.kube, self.run_id)
            for proc in h.drivers.values():
                proc.stop()
            for kubelet in h.kubelets.values():
                kubelet.stop()
            if h.nodes is not None:
                h.nodes.stop()
            if h.interposer is not None:
                h.interposer.stop()
                shutil.rmtree(f"{h.node_root}-plugins", ignore_errors=True)
            shutil.rmtree(h.node_root, ignore_errors=True)
        if cluster is not None:
            # DRAGUARD_KEEP_LOGS=1 keeps the control-plane logs of a run for debugging.
            cluster.down(remove=os.environ.get("DRAGUARD_KEEP_LOGS") != "1")

    # -- judging ---------------------------------------------------------------------------------
    def _driver_state(self, node: str) -> NodeDriverState:
        from ..driver.state import read_checkpoint

        h = self._h()
        root = h.drivers[node].root
        cp = read_checkpoint(root, node, h.driver_name)
        prepared = {
            uid: tuple(DeviceId(h.driver_name, d.pool, d.device) for d in rec.devices)
            for uid, rec in cp.claims.items()
        }
        devices = {name: DeviceState(rec.state.value, (rec.claim,) if rec.claim else ()) for name, rec in cp.devices.items()}
        cdi_dir = root / node / "cdi"
        prefix = f"{h.driver_name}-"
        specs = frozenset(p.name[len(prefix):-len(".json")] for p in cdi_dir.glob(f"{prefix}*.json")) if cdi_dir.exists() else frozenset()
        return NodeDriverState(node=node, driver=h.driver_name, prepared=prepared, devices=devices, cdi_specs=specs)

    def snapshot(self) -> Snapshot:
        h = self._h()
        gangs = tuple(
            Gang(w.name, h.namespace, w.pod_names(), len(w.claims), self._settled) for w in self.scenario.workloads
        )
        drivers = tuple(self._driver_state(n) for n in h.drivers)
        return Snapshot(
            time=self.timeline.now(),
            pods=tuple(h.observer.objects("Pod")),
            claims=tuple(h.observer.objects("ResourceClaim")),
            slices=tuple(h.observer.objects("ResourceSlice")),
            device_classes=tuple(h.observer.objects("DeviceClass")),
            drivers=drivers,
            initial_inventory=self.initial_inventory,
            gangs=gangs,
        )

    def _judge(self, names: list[str]) -> None:
        results = evaluate(self.snapshot(), names)
        for name, violations in results.items():
            self.checked.add(name)
            for v in violations:
                key = v.message
                if key not in self.violations[name]:
                    self.violations[name][key] = Evidence(v.message, tuple(v.objects), tuple(v.devices), round(v.time, 3))
                    self.timeline.add("invariant", name, self.scenario.name, "violated", v.message)

    def _check_continuously(self) -> None:
        while not self._stop_checks.wait(1.0):
            try:
                self._judge(list(CONTINUOUS))
            except DraguardError as exc:
                self.timeline.add("invariant", "*", self.scenario.name, "error", str(exc))

    # -- results ---------------------------------------------------------------------------------
    def _finish(self) -> None:
        exp = self.scenario.expect
        for entry in INVARIANTS:
            expected: Literal["hold", "violate"] | None = (
                "violate" if entry.name in exp.violate else "hold" if entry.name in exp.hold else None
            )
            found = list(self.violations.get(entry.name, {}).values())
            status: Status = "violated" if found else "held" if entry.name in self.checked else "not-checked"
            self.result.invariants[entry.name] = InvariantResult(entry.name, entry.summary, status, expected, found)
        for name in (*exp.hold, *exp.violate):
            if self.result.invariants[name].status == "not-checked" and self.result.error is None:
                self.result.error = f"invariant {name} could not be judged (the run stopped early)"
        if self.result.timeline is None:  # stopped before the fleet: what the timeline has so far
            self.result.timeline = TimelineEvents(tuple(self.timeline.events()))
        # The runner writes no report files: renderers (draguard.reports) take the result from here.

    def _h(self) -> RunHandles:
        assert self.handles is not None
        return self.handles


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
        devices.append(d)
    return {"apiVersion": "draguard.dev/v1alpha1", "kind": "NodeTopology", "devices": devices}
