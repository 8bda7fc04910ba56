"""Run library scenarios against an installed DRA driver: ``draguard run --driver NAME --device-class NAME``.

The library's scenarios are written for draguard's fake driver (``gpu.draguard.dev``): they build a
fake topology (nodes, devices with the fake driver's attributes), ask for devices through their own
DeviceClasses, and many inject the fake driver's faults or run its mutants. Retargeting keeps what a
scenario says about workloads, claims and the timeline, and swaps the rest for the cluster's:

- the cluster's nodes and the driver's published ResourceSlices replace the fake topology (nothing
  is built; :func:`detect` reads what the driver publishes, per node);
- every request asks the given DeviceClass; the scenario's own classes are not created;
- the pods are pinned to as many of the driver's nodes as the scenario has nodes, each with at least
  as many devices as the scenario's node had, or exactly as many when the scenario's workloads ask
  for more devices than its topology has (its expectations count on that contention);
- step targets and evidence rules that name a scenario node name the cluster node it maps to.

A scenario is *not applicable* (:func:`decide`: reasons, never a pass or a failure) when it needs
what the driver or the cluster cannot give: the fake driver's faults, mutants or interposer, its
device truth, attributes the driver does not publish, the fake driver's opaque configuration, more
nodes or devices than the cluster has, node or control-plane faults draguard cannot perform there,
or a destructive step on a cluster it was not allowed to disturb.

Invariants are judged from what the API shows (:data:`PARTIAL` says which part of an invariant is
left out, :data:`NOT_JUDGED` which invariants cannot be judged at all, and why).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from collections.abc import Mapping
from dataclasses import dataclass

from draguard.harness.cluster.kind.cluster import KindCluster
from draguard.harness.cluster.target import KubeTarget
from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.driver.external import TEST_DRIVER_NAME
from draguard.harness.kube import ApiError, Kube
from draguard.harness.core.paths import DEFAULT_DRIVER
from draguard.harness.core.registry import FAULTS
from draguard.harness.result import ScenarioResult
from draguard.harness.scenario.types import Driver, EvidenceRule, Node, Request, Scenario, Step
from draguard.harness.fleet.installed import (FAKE_DRIVER_FAULTS, controlled_pods, fake_driver_container, find_daemonset,
                                             installed_offers)
from draguard.harness.fleet.coverage import (LOCAL_PARTIAL, NOT_JUDGED, PARTIAL, coverage, free_devices, pinned_nodes,
                                             runs_containers, scenario_devices)

__all__ = ["refuse_destructive", "kind_kubeconfig", "coverage", "RunTarget", "ClusterFacts", "Plan", "Retargeting", "retargeting", "PARTIAL", "LOCAL_PARTIAL", "NOT_JUDGED", "DESTRUCTIVE", "detect", "decide",
           "retarget", "not_applicable_result", "scenario_devices", "pinned_nodes", "free_devices", "local_facts"]

DESTRUCTIVE: Mapping[str, str] = {
    "drain-node": "cordons a node and evicts pods from it",
    "device-taint": "taints a device of the cluster with a DeviceTaintRule",
    "load": "floods the cluster with claims and pods",
    "driver-restart": "deletes the installed driver's pod on a node",
    "driver-down": "patches the installed driver's DaemonSet to take it off a node",
}
"""Steps that touch more than the run's own objects: on a cluster draguard does not own they need
``--allow-context`` (as ``draguard load`` does)."""

_NEEDS = {
    "fake-driver": "is a fault of draguard's fake driver",
    "fake-nodes": "needs draguard's fake node agents; the cluster's nodes are not draguard's",
    "local-backend": "restarts a control-plane component; draguard restarts only a control plane it started itself",
    "interposer": "needs the gRPC interposer in front of the driver's sockets, which are on the cluster's nodes",
    "rpc-faults": "makes the driver's calls fail, which needs the gRPC interposer in front of its sockets, which "
                  "are on the cluster's nodes",
    "restart-driver": "restarts the driver, which draguard does through the driver's DaemonSet or a "
                      "--restart-command; none runs this driver (no DaemonSet mounts its plugin directory) and no "
                      "--restart-command was given",
    "stop-driver": "keeps the driver down for a while, which draguard does through the driver's DaemonSet; none "
                   "runs this driver (no DaemonSet mounts its plugin directory)",
    "kill-node": "restarts or loses a node, which draguard does only to its own nodes (its node agents, or the "
                 "node containers of its kind cluster)",
}
LOCAL_OFFERS = frozenset({"local-backend", "fake-nodes", "kill-node", "restart-driver", "stop-driver", "interposer",
                          "rpc-faults"})
"""What ``--cluster local`` gives a scenario's steps: draguard starts the control plane, the node agents
and the driver's processes, behind the gRPC interposer."""
_DRIVER_ONLY = re.compile(r"""^\s*device\.driver\s*==\s*(['"])(?P<driver>[^'"]+)\1\s*$""")
_FAKE_ATTR = re.compile(r"""device\.(attributes|capacity)\[\s*(['"])""" + re.escape(DEFAULT_DRIVER) + r"""\2\s*\]\.(\w+)""")


@dataclass(frozen=True)
class RunTarget:
    """What ``--driver``/``--device-class`` name, and whether destructive steps are allowed."""

    driver: str
    device_class: str
    allow_destructive: bool = False
    """A local draguard cluster, or ``--allow-context`` named the kubeconfig's context."""
    restart_command: str | None = None
    """``--restart-command``: restarts the driver on a node where no DaemonSet of it is found."""
    context: str = ""
    """The kubeconfig context (for the reason given when destructive steps are refused)."""
    local: bool = False
    """draguard starts the control plane, the nodes and the driver itself (``--cluster local``: the
    upstream DRA test driver only): control-plane restarts and node-agent faults are possible there."""


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster and the driver offer (capability detection)."""

    devices: Mapping[str, tuple[str, ...]]
    """Schedulable node -> names of the devices the driver publishes for it (node-local slices)."""
    attributes: frozenset[str]
    """Qualified names (``domain/name``) of every attribute and capacity the driver publishes."""
    allocatable: Mapping[str, frozenset[str]]
    """Node -> its allocatable resource names (extended resources of device plugins)."""
    podgroups: bool
    """Whether the cluster serves the Workload/PodGroup API (scheduling.k8s.io/v1beta1 podgroups)."""
    daemonset: str | None = None
    """``namespace/name`` of the DaemonSet running the driver (steps restart and stop the driver through it)."""
    kind_nodes: bool = False
    """Whether the nodes are containers of draguard's kind cluster (steps restart and lose them)."""
    driver_pods: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    """Node -> ``namespace/name`` of the driver's DaemonSet pods there (what driver steps would touch)."""
    runtimes: frozenset[str] = frozenset()
    """Nodes that run a real container runtime (:func:`~draguard.harness.fleet.coverage.runs_containers`)."""
    fake_driver: bool = False
    """Whether the driver's DaemonSet runs draguard's fake driver (deploy/fake-driver.yaml): a scenario's
    mutant is switched on through it, and on kind its books are read in the nodes."""

    def offers(self) -> set[str]:
        """The fleet capabilities (``draguard.harness.fleet``) this cluster gives the driver's steps."""
        return installed_offers(self.daemonset is not None, self.kind_nodes, self.fake_driver)

    def describe(self) -> str:
        nodes = ", ".join(f"{n}: {len(d)}" for n, d in sorted(self.devices.items())) or "none"
        return f"devices per node: {nodes}"

    def reach(self) -> str:
        """How steps reach the driver and the nodes here."""
        return (f"driver restarted through DaemonSet {self.daemonset}" if self.daemonset else
                "no DaemonSet of the driver found (no driver restarts)") + (
                "; nodes are kind containers (node restarts and losses)" if self.kind_nodes else "")


@dataclass(frozen=True)
class Plan:
    """Scenario node -> cluster node, and whether each must have exactly the scenario's device count."""

    nodes: Mapping[str, str]
    exact: bool
    real_nodes: bool = False
    """Whether every cluster node it maps to runs a real container runtime (container-devices is judged)."""
    mutant: str | None = None
    """The scenario's mutant, kept: the installed driver is draguard's fake driver, whose DaemonSet runs it."""


def _qualify(driver: str, name: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def detect(kube: Kube, target: RunTarget, kubeconfig: str | None = None) -> ClusterFacts:
    """Read what the cluster and the driver offer; UsageError (exit 2) for an unknown device class, a
    driver that publishes no devices, or a cluster that cannot be read. ``kubeconfig``: the file the
    cluster was reached through (a draguard kind cluster's nodes can be stopped)."""
    try:
        if kube.get("DeviceClass", target.device_class) is None:
            names = sorted(c["metadata"]["name"] for c in kube.items("DeviceClass"))
            raise UsageError(f"--device-class {target.device_class}: no such DeviceClass in the cluster; "
                             f"it has: {', '.join(names) or 'none'}")
        slices, _ = kube.list("ResourceSlice", field_selector=f"spec.driver={target.driver}")
        nodes = {n["metadata"]["name"]: n for n in kube.items("Node")}
    except ApiError as exc:
        raise UsageError(f"cannot read the cluster's DeviceClasses, ResourceSlices and Nodes: {exc}") from exc
    devices: dict[str, list[str]] = {}
    attributes: set[str] = set()
    for sl in slices:
        spec = sl.get("spec") or {}
        for d in spec.get("devices") or []:
            attributes.update(_qualify(target.driver, a) for a in d.get("attributes") or {})
            attributes.update(_qualify(target.driver, c) for c in d.get("capacity") or {})
            node = spec.get("nodeName")
            if node and node in nodes and not nodes[node].get("spec", {}).get("unschedulable"):
                devices.setdefault(node, []).append(d["name"])
    if not devices:
        drivers = sorted({s["spec"].get("driver", "") for s in kube.items("ResourceSlice")})
        raise UsageError(f"--driver {target.driver}: the driver publishes no devices on any schedulable node "
                         f"(no ResourceSlice with devices and a nodeName); drivers publishing slices: "
                         f"{', '.join(drivers) or 'none'}")
    try:
        podgroups = any(r.get("name") == "podgroups" for r in
                        kube.request("GET", "/apis/scheduling.k8s.io/v1beta1").get("resources") or [])
    except (ApiError, HarnessError):
        podgroups = False
    allocatable = {n: frozenset((obj.get("status") or {}).get("allocatable") or {}) for n, obj in nodes.items()}
    pods: dict[str, list[str]] = {}
    try:
        ds = find_daemonset(kube, target.driver)
        if ds is not None:
            labels = (ds.get("spec") or {}).get("selector", {}).get("matchLabels") or {}
            ns = ds["metadata"]["namespace"]
            selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or None
            for pod in controlled_pods(kube.items("Pod", ns, label_selector=selector), ds):
                pods.setdefault(pod["spec"].get("nodeName") or "", []).append(f"{ns}/{pod['metadata']['name']}")
    except ApiError:  # not allowed to list DaemonSets or their pods: no driver chaos
        ds = None
    kind = KindCluster.of_kubeconfig(kubeconfig) is not None if kubeconfig else False
    return ClusterFacts({n: tuple(sorted(d)) for n, d in devices.items()}, frozenset(attributes), allocatable, podgroups,
                        f"{ds['metadata']['namespace']}/{ds['metadata']['name']}" if ds else None, kind,
                        {n: tuple(sorted(p)) for n, p in pods.items()},
                        frozenset(n for n, obj in nodes.items() if runs_containers(obj)),
                        ds is not None and fake_driver_container(ds) is not None)


def _demand(scenario: Scenario) -> int | None:
    """Devices the workloads ask for at once at most (None: a request takes All, as many as there are)."""
    total = 0
    for w in scenario.workloads:
        for c in w.claims:
            per = 0
            for r in c.requests:
                counts = [r.count] if not r.first_available else [s.count for s in r.first_available]
                if any(n is None for n in counts):
                    return None
                per += max(n or 0 for n in counts)
            total += per * (w.replicas if c.source == "template" else 1)
    return total


def _static_reasons(sc: Scenario, target: RunTarget, facts: ClusterFacts) -> list[str]:
    reasons: list[str] = []
    if sc.driver.mutant and not facts.fake_driver:
        reasons.append(f"it runs the fake driver's mutant {sc.driver.mutant!r} (a planted bug) and expects what it breaks")
    if sc.driver.interpose and not target.local:
        reasons.append("it puts the gRPC interposer in front of the driver's sockets, which are on the cluster's "
                       "nodes, out of draguard's reach")
    # On its own control plane draguard runs the driver's processes (restarts them) behind the interposer.
    have = (LOCAL_OFFERS if target.local else set()) | facts.offers() | (
        {"restart-driver"} if target.restart_command else set())
    for step in sc.timeline:
        entry = FAULTS.get(step.fault)
        # A fake driver's fault that an installed fake driver takes through its files on the node needs only that.
        carried = FAKE_DRIVER_FAULTS.get(step.fault) in have
        for need in (n for n in entry.meta.get("needs", ()) if n not in have and not carried):
            reasons.append(f"step {step.name} ({step.fault}) {_NEEDS.get(need, 'needs ' + need)}")
        if step.target is not None and step.target.device is not None:
            reasons.append(f"step {step.name} ({step.fault}) targets the fake device {step.target.device}")
        if step.fault == "load":
            for key in ("device_class", "sharing"):
                value = getattr(step.params, key, None)
                if value:
                    reasons.append(f"step {step.name} (load) names {key.replace('_', ' ')} {value} of the fake "
                                   f"driver; the load on driver {target.driver} takes --device-class and no sharing")
        if step.fault in DESTRUCTIVE and not target.allow_destructive:
            reasons.append(f"step {step.name} ({step.fault}) {DESTRUCTIVE[step.fault]} of a cluster draguard does "
                           f"not own; pass --allow-context {target.context or 'CONTEXT'} to allow it")
    foreign = [dc for dc in sc.device_classes if not _driver_only(dc.selectors)]
    for dc in foreign:
        reasons.append(f"its DeviceClass {dc.name} selects devices by the fake driver's attributes "
                       f"({'; '.join(dc.selectors)}), which --device-class {target.device_class} cannot stand for")
    for dc in sc.device_classes:
        if dc.extended_resource_name:
            reasons.append(f"its DeviceClass {dc.name} serves extended resource {dc.extended_resource_name}, which "
                           f"--device-class {target.device_class} need not")
    if len(sc.device_classes) > 1 and not foreign:
        reasons.append(f"it tells {len(sc.device_classes)} DeviceClasses apart; --device-class names one")
    for w in sc.workloads:
        for c in w.claims:
            where = f"claim {w.name}/{c.name}"
            for r in c.requests:
                for sel in (*r.selectors, *(s for sub in r.first_available for s in sub.selectors)):
                    if DEFAULT_DRIVER in sel:
                        names = sorted({m.group(3) for m in _FAKE_ATTR.finditer(sel)}) or [sel]
                        reasons.append(f"{where} selects by the fake driver's attribute(s) {', '.join(names)}; "
                                       f"{_published(target, facts)}")
            for k in c.constraints:
                attr = k.match_attribute or k.distinct_attribute or ""
                if attr not in facts.attributes:
                    kind = "matchAttribute" if k.match_attribute else "distinctAttribute"
                    reasons.append(f"{where} constrains {kind} {attr}, which driver {target.driver} does not "
                                   f"publish; {_published(target, facts)}")
            if c.sharing is not None:
                reasons.append(f"{where} names sharing strategy {c.sharing.strategy} as the fake driver's opaque "
                               f"configuration; what driver {target.driver} expects there is its own")
            for cfg in c.config:
                if cfg.driver == DEFAULT_DRIVER:
                    reasons.append(f"{where} passes opaque configuration to the fake driver {DEFAULT_DRIVER}")
        if w.gang == "podgroup" and not facts.podgroups:
            reasons.append(f"workload {w.name} is a PodGroup gang; the cluster does not serve "
                           "scheduling.k8s.io/v1beta1 podgroups (feature gate GenericWorkload)")
    partial, not_judged = coverage(not target.local and bool(facts.runtimes), target.local,
                                   facts.fake_driver and facts.kind_nodes)
    for name in sc.expect.violate:
        if name in not_judged:
            reasons.append(f"it expects {name} violated, which {not_judged[name]}")
        elif name in partial:
            reasons.append(f"it expects {name} violated, which on an installed driver is {partial[name]}: the "
                           "violation it reproduces may lie in the part left out")
    for rule in sc.expect.evidence:
        if rule.device is not None:
            reasons.append(f"its expected evidence names the fake device {rule.device}")
    return reasons


def _driver_only(selectors: tuple[str, ...]) -> bool:
    """Whether a class's selectors only pick the fake driver's devices (``device.driver == '...'``)."""
    return all((m := _DRIVER_ONLY.match(s)) is not None and m.group("driver") == DEFAULT_DRIVER for s in selectors)


def _published(target: RunTarget, facts: ClusterFacts) -> str:
    attrs = sorted(facts.attributes)
    return (f"driver {target.driver} publishes " + (", ".join(attrs) if attrs else "no attributes")
            + " (an attribute of the fake driver is mapped to none: the same name need not mean the same thing)")


def _plan(sc: Scenario, facts: ClusterFacts) -> tuple[Plan | None, str | None]:
    """Map the scenario's nodes onto the cluster's, or say why they do not fit."""
    wanted = scenario_devices(sc)
    demand = _demand(sc)
    exact = demand is None or demand > sum(wanted.values())
    extended = _extended(sc)
    free = dict(facts.devices)
    mapping: dict[str, str] = {}
    for name, need in sorted(wanted.items(), key=lambda kv: (-kv[1], kv[0])):
        fits = [n for n, d in sorted(free.items()) if (len(d) == need if exact else len(d) >= need)
                and facts.allocatable.get(n, frozenset()) >= extended]
        if not fits:
            how = "exactly" if exact else "at least"
            why = (f" (its workloads ask for {'every device' if demand is None else demand} against "
                   f"{sum(wanted.values())} in its topology: its expectations count on that contention)") if exact else ""
            ext = f" and allocatable {', '.join(sorted(extended))}" if extended else ""
            return None, (f"it needs {len(wanted)} node(s) with {how} {need} device(s) each{ext}{why}; "
                          f"{facts.describe()}")
        mapping[name] = fits[0]
        del free[fits[0]]
    return Plan(mapping, exact, bool(mapping) and all(n in facts.runtimes for n in mapping.values()),
                sc.driver.mutant if facts.fake_driver else None), None


def _extended(sc: Scenario) -> set[str]:
    return {r for w in sc.workloads for r in w.extended_resources}


def decide(sc: Scenario, target: RunTarget, facts: ClusterFacts) -> tuple[list[str], Plan | None]:
    """Why ``sc`` is not applicable on this driver (empty: it is), and how its nodes map when it is."""
    reasons = _static_reasons(sc, target, facts)
    plan, why = _plan(sc, facts)
    if why is not None:
        reasons.append(why)
    return reasons, (plan if not reasons else None)


def _request(r: Request, device_class: str) -> Request:
    subs = tuple(dataclasses.replace(s, device_class_name=device_class) for s in r.first_available)
    return dataclasses.replace(r, device_class_name=device_class if r.device_class_name else None, first_available=subs)



def _step(step: Step, nodes: Mapping[str, str]) -> Step:
    t = step.target
    if t is None or t.node is None or t.node not in nodes:
        return step
    return dataclasses.replace(step, target=dataclasses.replace(t, node=nodes[t.node]))


def _evidence(rule: EvidenceRule, nodes: Mapping[str, str]) -> EvidenceRule:
    return dataclasses.replace(rule, node=nodes.get(rule.node, rule.node)) if rule.node is not None else rule


def retarget(sc: Scenario, target: RunTarget, plan: Plan) -> Scenario:
    """``sc`` against the installed driver: its class in every request, the cluster's nodes, no fake topology."""
    workloads = tuple(dataclasses.replace(w, claims=tuple(
        dataclasses.replace(c, requests=tuple(_request(r, target.device_class) for r in c.requests))
        for c in w.claims)) for w in sc.workloads)
    # On its own control plane draguard starts the scenario's nodes with as many devices (topology kept
    # for the count); on a cluster the scenario's nodes become the cluster's.
    nodes = sc.nodes if target.local else tuple(Node(plan.nodes[n.name], n.group, {}, None, "cluster") for n in sc.nodes)
    _, not_judged = coverage(not target.local and plan.real_nodes, target.local)
    expect = dataclasses.replace(sc.expect, hold=tuple(n for n in sc.expect.hold if n not in not_judged),
                                 evidence=tuple(_evidence(e, plan.nodes) for e in sc.expect.evidence),
                                 unnamed=tuple(n for n in sc.expect.unnamed if n not in not_judged))
    mapped = ", ".join(f"{a} -> {b}" for a, b in plan.nodes.items())
    return dataclasses.replace(
        sc,
        description=f"{sc.description.strip()}\n\nRetargeted at driver {target.driver} (DeviceClass "
                    f"{target.device_class}); nodes {mapped}.",
        driver=Driver(kind="external", name=target.driver, mutant=plan.mutant,
                      device_class=target.device_class,
                      interpose=target.local, restart_command=target.restart_command),
        nodes=nodes, device_classes=(), workloads=workloads,
        timeline=tuple(_step(s, plan.nodes) for s in sc.timeline), expect=expect,
    )


def local_facts(sc: Scenario) -> ClusterFacts:
    """What ``--cluster local`` offers a scenario: draguard starts its nodes (fake node agents or hollow
    kubelets) and the upstream DRA test driver on each, with as many devices as the scenario's node
    (``device-00``...; the test driver publishes no attributes), on a control plane with its feature gates."""
    devices = {name: tuple(f"device-{i:02d}" for i in range(n)) for name, n in scenario_devices(sc).items()}
    return ClusterFacts(devices, frozenset(), {n: frozenset() for n in devices}, sc.cluster.gang_scheduling)


def not_applicable_result(sc: Scenario, reasons: list[str], target: RunTarget) -> ScenarioResult:
    """The result of a scenario that was not run on this driver: not a pass, not a failure."""
    result = ScenarioResult(sc.name, str(sc.source) if sc.source else None, sc.seed, hold=sc.expect.hold,
                            violate=sc.expect.violate)
    result.not_applicable = f"not applicable on driver {target.driver}: " + "; ".join(reasons)
    result.environment = {"driver": {"name": target.driver, "kind": "external", "deviceClass": target.device_class}}
    return result


def refuse_destructive(scenarios: list[Scenario], kube: KubeTarget) -> None:
    """Scenarios run as written on a cluster draguard did not bring up: refuse, before anything runs, a
    step that touches more than the run's own objects (:data:`DESTRUCTIVE`) unless ``--allow-context``
    names the kubeconfig's active context (UsageError: exit 2)."""
    if kube.is_local():
        return
    steps = [f"{sc.name}: step {st.name} ({st.fault}) {DESTRUCTIVE[st.fault]}"
             for sc in scenarios for st in sc.timeline if st.fault in DESTRUCTIVE]
    if not steps:
        return
    active = kube.active_context()
    if kube.allow_context != active:
        raise UsageError(f"refusing to disturb context {active!r} of {kube.path()}: " + "; ".join(steps[:5])
                         + f"; pass --allow-context {active} to allow it")


def kind_kubeconfig(kube: KubeTarget, name: str = "default") -> Path:
    """``--cluster kind``: the kubeconfig of draguard's kind cluster (``--kubeconfig`` when it names one of
    them, else the one named ``name``); UsageError when it is not up."""
    if kube.kubeconfig is not None:
        if KindCluster.of_kubeconfig(kube.kubeconfig) is None:
            raise UsageError(f"--cluster kind --kubeconfig {kube.kubeconfig}: not the kubeconfig of a kind cluster "
                             "draguard brought up (`draguard cluster up --backend kind` prints it)")
        return kube.kubeconfig
    cluster = KindCluster(name, progress=lambda s: None)
    if KindCluster.of_kubeconfig(cluster.kubeconfig) is None:
        raise UsageError(f"--cluster kind: draguard's kind cluster {name!r} is not up; "
                         f"`draguard cluster up --backend kind --name {name}` first")
    return cluster.kubeconfig


@dataclass(frozen=True)
class Retargeting:
    """``--driver``/``--device-class``: the installed driver, the cluster's kubeconfig and what it offers."""

    target: RunTarget
    facts: ClusterFacts | None
    """What the cluster offers; None with ``--cluster local`` (each scenario gets its own, see local_facts)."""
    kubeconfig: str | None

    def decide(self, sc: Scenario) -> tuple[list[str], Plan | None]:
        """Why ``sc`` is not applicable on this driver (empty: it is), and how its nodes map."""
        return decide(sc, self.target, self.facts or local_facts(sc))


def retargeting(driver: str | None, device_class: str | None, backend: str | None, kube: KubeTarget,
                restart_command: str | None = None) -> Retargeting:
    """Check ``--driver``, ``--device-class`` and the cluster options together, and detect what the cluster
    and the driver offer (UsageError: exit 2)."""
    if not driver or not device_class:
        raise UsageError("--driver and --device-class go together: the installed driver's name and the "
                         "DeviceClass its devices are asked for by")
    if restart_command is not None and backend == "local":
        raise UsageError("--restart-command restarts a driver installed in a cluster; with --cluster local "
                         "draguard runs the driver itself and restarts it")
    if backend == "local":
        # A control plane of its own per scenario: draguard runs the driver itself, which it can only do
        # for the upstream DRA test driver (harness/driver/external.py).
        if driver != TEST_DRIVER_NAME:
            raise UsageError(f"--cluster local --driver {driver}: on a control plane of its own draguard runs only "
                             f"the upstream DRA test driver ({TEST_DRIVER_NAME}); for a driver installed in a "
                             "cluster give --kubeconfig")
        if kube.kubeconfig is not None or kube.allow_context is not None:
            raise UsageError("--cluster local starts its own control plane: --kubeconfig and --allow-context are "
                             "for an existing cluster")
        return Retargeting(RunTarget(driver, device_class, allow_destructive=True, local=True), None, None)
    if backend == "kind":
        kube = KubeTarget(kind_kubeconfig(kube), kube.context, kube.allow_context)
    path = kube.path()
    if not path.is_file():
        raise UsageError(f"--driver needs a cluster: kubeconfig {path} is not a file (give --kubeconfig)")
    active = kube.active_context()
    allow = kube.allow_context
    target = RunTarget(driver, device_class, allow_destructive=kube.is_local() or allow == active, context=active,
                       restart_command=restart_command)
    if allow is not None and allow != active:
        raise UsageError(f"--allow-context {allow}: the kubeconfig's context is {active!r}")
    facts = detect(Kube.from_kubeconfig(str(path), kube.context), target, str(path))
    return Retargeting(target, facts, str(path))
