"""The validated scenario as plain frozen values: what the runner, the chaos steps and reports read.

The loader (``loader.py``) validates a YAML file against the external, versioned pydantic model
(``format.py``, ``draguard.dev/v1alpha1``) and converts it into these dataclasses (``convert.py``),
the way kwok turns versioned external types into internal ones. Past the loader nothing sees YAML,
camelCase or unvalidated data:

- names are snake_case, durations are :class:`datetime.timedelta`, mappings are read-only;
- node groups are expanded into one :class:`Node` per node (``namePrefix: gpu, count: 2`` ->
  ``gpu-0``, ``gpu-1``);
- defaults are filled in (``count`` of an ExactCount request, ``minCount`` of a gang, the invariants
  to hold when ``expect.hold`` is omitted, those an explicit ``hold`` leaves out);
- a timeline step carries its fault's ``params`` already validated into the fault's registered
  pydantic model (an instance), or None for a fault without a params model.

Every closed set is a ``Literal`` alias below; ``format.py`` uses the same aliases.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

__all__ = [
    "API_VERSION",
    "KIND",
    "Backend",
    "DriverKind",
    "GangPolicy",
    "ClaimSource",
    "AllocationMode",
    "TaintEffect",
    "TolerationOperator",
    "SharingStrategy",
    "PodPhase",
    "Member",
    "AttributeValue",
    "Scenario",
    "Cluster",
    "Driver",
    "Node",
    "Topology",
    "Device",
    "DeviceTaint",
    "DeviceClass",
    "Workload",
    "Claim",
    "Request",
    "SubRequest",
    "Toleration",
    "Constraint",
    "Sharing",
    "OpaqueConfig",
    "Step",
    "Ignore",
    "After",
    "Timing",
    "EvidenceRule",
    "Progress",
    "Condition",
    "Target",
    "Settle",
    "Expectations",
]

API_VERSION = "draguard.dev/v1alpha1"
KIND = "Scenario"

Backend = Literal["local", "kubeconfig", "kind"]
"""``local``: draguard starts its own control plane; ``kubeconfig``: an existing cluster; ``kind``: a
kind cluster draguard brought up (``draguard cluster up --backend kind``), whose nodes it may stop."""
DriverKind = Literal["fake", "external"]
DriverHosting = Literal["auto", "per-node", "shared"]
"""``fake``: draguard's fake DRA driver on fake nodes; ``external``: a driver already installed."""
GangPolicy = Literal["none", "podgroup"]
"""``none``: pods are scheduled one by one; ``podgroup``: the Kubernetes Workload/PodGroup API."""
ClaimSource = Literal["template", "shared"]
"""``template``: one claim per pod from a ResourceClaimTemplate; ``shared``: one claim for the gang."""
AllocationMode = Literal["ExactCount", "All"]
TaintEffect = Literal["None", "NoSchedule", "NoExecute"]
TolerationOperator = Literal["Exists", "Equal"]
SharingStrategy = Literal["TimeSlicing", "MPS"]
PodPhase = Literal["Pending", "Scheduled", "Running", "Succeeded", "Failed", "Deleted"]
"""Pod phases plus ``Scheduled`` (bound to a node) and ``Deleted`` (gone from the API)."""
Member = int | Literal["random", "all"]
"""A gang member: its index, a random one (drawn from the scenario seed), or every member."""
AttributeValue = bool | int | str


@dataclass(frozen=True, slots=True)
class Cluster:
    backend: Backend
    kubeconfig: Path | None
    context: str | None
    feature_gates: Mapping[str, bool]
    runtime_config: Mapping[str, bool]
    client_qps: int | None = None
    """Local backend: the scheduler's and controller manager's ``--kube-api-qps`` (None: the backend's default)."""
    client_burst: int | None = None
    max_requests_inflight: int | None = None
    kind_cluster: str = "default"
    """``kind`` backend: the name of draguard's kind cluster."""

    @property
    def gang_scheduling(self) -> bool:
        """Whether the Workload/PodGroup API (feature gate ``GenericWorkload``) is on."""
        return self.feature_gates.get("GenericWorkload", False)


@dataclass(frozen=True, slots=True)
class Driver:
    kind: DriverKind
    name: str
    """The driver name, e.g. ``gpu.draguard.dev``: the ResourceSlice ``spec.driver``."""
    mutant: str | None
    """A named misbehaviour of the fake driver (``fake`` only), or None for the correct driver."""
    device_class: str | None
    """The DeviceClass an ``external`` driver installs; None for ``fake``."""
    interpose: bool = False
    """Whether the gRPC interposer sits between the nodes and the driver (resolved: :func:`~.checks.interposes`)."""
    hosting: DriverHosting = "auto"
    """``per-node``: one fake driver process per node (fidelity); ``shared``: one process serves every
    node's sockets (scale); ``auto``: per-node up to :data:`PER_NODE_UP_TO` nodes, shared above."""
    daemon_set: tuple[str, str] | None = None
    """(namespace, name) of the DaemonSet running an ``external`` driver, when the scenario names it
    (steps then restart and stop the driver through it); None: found by its plugin directory, if any."""
    restart_command: str | None = None
    """A shell command that restarts an ``external`` driver on a node (``{node}`` replaced by its name):
    ``driver-restart`` runs it where no DaemonSet of the driver is found."""


PER_NODE_UP_TO = 16
"""``driver.hosting: auto`` runs a process per node up to this many nodes."""


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: TaintEffect


@dataclass(frozen=True, slots=True)
class Device:
    """An explicitly listed device of the fake driver (v1 ResourceSlice ``Device`` shape, simplified)."""

    name: str
    attributes: Mapping[str, AttributeValue]
    """Attribute name (bare: the driver's domain; or ``domain/name``) -> value."""
    capacity: Mapping[str, str]
    """Capacity name -> Kubernetes quantity string (``80Gi``)."""
    allow_multiple_allocations: bool
    taints: tuple[DeviceTaint, ...]


@dataclass(frozen=True, slots=True)
class Topology:
    """Devices the fake driver publishes on one node: a preset, a generated GPU box, or a device list.

    Exactly one of ``preset``, ``gpus`` or ``devices`` is set (``devices`` is empty otherwise).
    """

    preset: str | None
    gpus: int | None
    product_name: str | None
    memory: str | None
    nvlink_domains: int
    numa_nodes: int
    allow_multiple_allocations: bool
    devices: tuple[Device, ...]


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    group: str
    """The ``name`` or ``namePrefix`` of the node group this node came from."""
    labels: Mapping[str, str]
    topology: Topology | None
    """None when the nodes belong to an external driver."""
    agent: str = "fake"
    """``fake`` or ``kubelet`` (see :mod:`draguard.harness.agents`)."""


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    """CEL expressions over ``device``."""
    extended_resource_name: str | None


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str | None
    operator: TolerationOperator
    value: str | None
    effect: TaintEffect | None
    toleration_seconds: int | None


@dataclass(frozen=True, slots=True)
class SubRequest:
    name: str
    device_class_name: str
    selectors: tuple[str, ...]
    allocation_mode: AllocationMode
    count: int | None
    """Filled (default 1) for ExactCount; None for All."""
    tolerations: tuple[Toleration, ...]


@dataclass(frozen=True, slots=True)
class Request:
    """A claim's request: either exact (``device_class_name`` set) or ``first_available`` (non-empty)."""

    name: str
    device_class_name: str | None
    selectors: tuple[str, ...]
    allocation_mode: AllocationMode
    count: int | None
    admin_access: bool
    tolerations: tuple[Toleration, ...]
    first_available: tuple[SubRequest, ...]


@dataclass(frozen=True, slots=True)
class Constraint:
    """Exactly one of ``match_attribute`` / ``distinct_attribute`` is set; empty ``requests`` = all."""

    requests: tuple[str, ...]
    match_attribute: str | None
    distinct_attribute: str | None


@dataclass(frozen=True, slots=True)
class Sharing:
    strategy: SharingStrategy


@dataclass(frozen=True, slots=True)
class OpaqueConfig:
    requests: tuple[str, ...]
    driver: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Claim:
    name: str
    source: ClaimSource
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...]
    sharing: Sharing | None
    """The sharing strategy; the runner writes it as opaque config ``parameters.sharing.strategy``."""
    config: tuple[OpaqueConfig, ...]


@dataclass(frozen=True, slots=True)
class Workload:
    """A distributed inference gang: ``replicas`` pods named ``<name>-<i>``."""

    name: str
    replicas: int
    gang: GangPolicy
    min_count: int
    """PodGroup ``minCount``; equals ``replicas`` unless set (meaningful for ``podgroup`` only)."""
    priority: int | None
    priority_class_name: str | None
    interleave_with: str | None
    """Pods are created alternately with this workload's pods: a0, b0, a1, b1, ..."""
    image: str | None
    run_for: timedelta | None
    """How long each pod runs before it exits successfully; None: until the scenario ends."""
    extended_resources: Mapping[str, int]
    """Legacy device-plugin resources per pod (``nvidia.com/gpu: 1``), for no-legacy-mix scenarios."""
    claims: tuple[Claim, ...]

    def pod_names(self) -> tuple[str, ...]:
        return tuple(f"{self.name}-{i}" for i in range(self.replicas))


@dataclass(frozen=True, slots=True)
class Condition:
    """Reached when ``count`` members of ``workload`` are in ``phase``."""

    workload: str
    phase: PodPhase
    count: int


@dataclass(frozen=True, slots=True)
class Target:
    workload: str | None
    member: Member | None
    node: str | None
    """A node name, ``random`` or ``all``."""
    claim: str | None
    """A claim name of ``workload``."""
    device: str | None


@dataclass(frozen=True, slots=True)
class After:
    """Due ``delay`` after step ``step`` started."""

    step: str
    delay: timedelta


@dataclass(frozen=True, slots=True)
class Step:
    """One chaos step: run ``fault`` at ``at`` after the start, as soon as ``when`` is reached, or
    ``after`` another step started. Exactly one of the three is set."""

    index: int
    name: str
    """The step's ``name``, or ``<index>-<fault>``."""
    at: timedelta | None
    when: Condition | None
    fault: str
    target: Target | None
    params: BaseModel | None
    """An instance of the fault's registered params model, or None if it has none."""
    after: After | None = None
    tolerance: timedelta = timedelta(seconds=3)
    """How late it may start after it was due (filled from ``timing.stepTolerance`` when not set)."""
    timeout: timedelta = timedelta(minutes=2)
    """How long a ``when``/``after`` step waits for its condition."""
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Settle:
    timeout: timedelta
    """How long the system may take to converge after the last step before invariants judge it."""
    cleanup: timedelta
    """How long consumers may take to go after deletion before ``no-leak`` judges."""


@dataclass(frozen=True, slots=True)
class Timing:
    step_tolerance: timedelta
    condition_timeout: timedelta
    gang_grace: timedelta


@dataclass(frozen=True, slots=True)
class EvidenceRule:
    """A violation of ``invariant`` must name all of the given things."""

    invariant: str
    workload: str | None = None
    member: int | None = None
    claim: str | None = None
    node: str | None = None
    device: str | None = None

    def describe(self) -> str:
        parts = [f"{k} {v}" for k, v in (("workload", self.workload), ("member", self.member),
                                         ("claim", self.claim), ("node", self.node), ("device", self.device))
                 if v is not None]
        return f"{self.invariant} violation names {', '.join(parts)}"


@dataclass(frozen=True, slots=True)
class Progress:
    """``count`` pods (None: all replicas) of each (``need: all``) or one (``any``) of ``workloads`` reach ``phase``."""

    workloads: tuple[str, ...]
    phase: PodPhase
    count: int | None
    need: Literal["all", "any"]
    within: float | None = None
    """Seconds after step ``after`` ran (or the timeline started) by which it must happen; None: any time."""
    after: str | None = None

    def describe(self) -> str:
        who = " and ".join(self.workloads) if self.need == "all" else " or ".join(self.workloads)
        when = "" if self.within is None else f" within {self.within:g}s of " + (
            f"step {self.after}" if self.after else "the start")
        return f"{who}: {self.count or 'all'} pod(s) {self.phase}{when}"


@dataclass(frozen=True, slots=True)
class EventExpectation:
    """A Kubernetes Event with ``reason`` (its message containing ``message``, about a pod of
    ``workload``) that must come during the run, or with ``seen`` False must not."""

    reason: str
    message: str | None = None
    workload: str | None = None
    seen: bool = True

    def describe(self) -> str:
        what = f"Event {self.reason}" + (f" '{self.message}'" if self.message else "")
        about = f" about a pod of {self.workload}" if self.workload else ""
        return ("" if self.seen else "no ") + what + about

    def matches(self, pod: str, reason: str, message: str) -> bool:
        """Whether an Event about object ``pod`` with ``reason`` and ``message`` is one of these."""
        if reason != self.reason or (self.message is not None and self.message not in message):
            return False
        return self.workload is None or re.fullmatch(rf"{re.escape(self.workload)}-\d+", pod) is not None


@dataclass(frozen=True, slots=True)
class Ignore:
    """An invariant whose verdict does not count for the scenario, and why."""

    invariant: str
    reason: str


@dataclass(frozen=True, slots=True)
class Expectations:
    """Every invariant the run judges must hold, unless ``violate`` names it or ``ignore`` excuses it."""

    hold: tuple[str, ...]
    """Invariants that must hold and be judged (defaults to every invariant the run can judge that
    ``violate`` and ``ignore`` do not name)."""
    violate: tuple[str, ...]
    """Invariants an incident reproduction must show violated."""
    evidence: tuple[EvidenceRule, ...] = ()
    progress: tuple[Progress, ...] = ()
    events: tuple[EventExpectation, ...] = ()
    ignore: tuple[Ignore, ...] = ()
    unnamed: tuple[str, ...] = ()
    """Invariants the run can judge that an explicit ``hold`` leaves out (and no other list names):
    judged all the same, a violation of one fails the run (``draguard validate`` and ``run`` say so)."""

    @property
    def ignored(self) -> dict[str, str]:
        """Invariant -> why the scenario ignores it."""
        return {i.invariant: i.reason for i in self.ignore}


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    source: Path | None
    """The file it was loaded from; None for text."""
    seed: int
    cluster: Cluster
    driver: Driver
    nodes: tuple[Node, ...]
    device_classes: tuple[DeviceClass, ...]
    workloads: tuple[Workload, ...]
    timeline: tuple[Step, ...]
    settle: Settle
    expect: Expectations
    timing: Timing = Timing(timedelta(seconds=3), timedelta(minutes=2), timedelta(seconds=30))

    @property
    def hold_note(self) -> str | None:
        """One line when an explicit ``expect.hold`` leaves out invariants the run judges all the same
        (a file written when an invariant left out of ``hold`` did not count); None otherwise."""
        if not self.expect.unnamed:
            return None
        return (f"{self.source or self.name}: note: expect.hold leaves out {', '.join(self.expect.unnamed)}; "
                "they are judged all the same and a violation fails the run (name them in expect.hold, or "
                "excuse each in expect.ignore with a reason)")

    def workload(self, name: str) -> Workload:
        for workload in self.workloads:
            if workload.name == name:
                return workload
        raise KeyError(name)

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)
