"""The external scenario format ``draguard.dev/v1alpha1`` ``Scenario``: strict pydantic models.

These models describe a scenario file exactly as written (camelCase keys, durations as ``"30s"``).
They are strict (no coercion: ``"3"`` is not an integer), closed (``extra="forbid"``: an unknown
key is an error) and frozen. Each field's docstring becomes its description in the JSON Schema
that :func:`json_schema` publishes for editors (``draguard schema``).

Checks that span fields (unique names, references between sections, "exactly one of") live in
``checks.py`` so that each problem names its own field; the loader runs both and reports every
problem of a file at once. Runner code never reads these models: the loader converts them into
the frozen dataclasses of ``types.py``.

Reusable value types for fault parameter models (``draguard.chaos``): :data:`Duration`,
:data:`PositiveDuration`, :data:`Quantity`, :data:`DnsLabel`, and the base :class:`Params`.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel

from draguard.harness.core.paths import DEFAULT_DRIVER
from draguard.harness.dralimits import (
    MAX_DEVICES_PER_NODE,
    MAX_DEVICE_INDEX,
    MAX_NUMA_NODE,
    MAX_ATTRIBUTES_PER_DEVICE,
    MAX_ATTRIBUTE_INT,
    MAX_ATTRIBUTE_STRING,
    MAX_QUANTITY,
    MAX_REQUESTS_PER_CLAIM,
    MAX_DEVICES_PER_REQUEST,
    quantity_amount,
)
from draguard.harness.scenario.types import (
    API_VERSION,
    KIND,
    AllocationMode,
    Backend,
    ClaimSource,
    DriverHosting,
    DriverKind,
    GangPolicy,
    PodPhase,
    SharingStrategy,
    TaintEffect,
    TolerationOperator,
)

__all__ = [
    "Duration",
    "PositiveDuration",
    "Quantity",
    "DnsLabel",
    "DnsSubdomain",
    "QualifiedName",
    "FullyQualifiedName",
    "PATTERN_WORDS",
    "Params",
    "parse_duration",
    "format_duration",
    "quantity_amount",
    "ScenarioDocument",
    "Metadata",
    "ScenarioSpec",
    "ClusterSpec",
    "DriverSpec",
    "NodeGroupSpec",
    "TopologySpec",
    "DeviceSpec",
    "DeviceTaintSpec",
    "DeviceClassSpec",
    "WorkloadSpec",
    "ClaimSpec",
    "RequestSpec",
    "SubRequestSpec",
    "TolerationSpec",
    "ConstraintSpec",
    "SharingSpec",
    "OpaqueConfigSpec",
    "StepSpec",
    "AfterSpec",
    "TimingSpec",
    "EvidenceSpec",
    "ProgressSpec",
    "ConditionSpec",
    "TargetSpec",
    "SettleSpec",
    "ExpectSpec",
    "IgnoreSpec",
    "LIMITS",
]

# ---------------------------------------------------------------------------------------------
# Bounds on every count and size. Validation enforces each before anything is built from it (a node
# list, pod names, devices, threads, command lines); the schema publishes them as ``maximum``,
# ``maxItems`` and ``maxProperties``. Cross-field totals live in checks.py. The device and API bounds
# (harness/dralimits.py) are shared with the fake driver's topology files, which a scenario's
# ``topology`` becomes.

MAX_NODES_PER_GROUP = 1000
"""``nodes[].count``."""
MAX_NODES = 5000
"""All node groups together (and so the length of ``nodes``: a group has at least one node)."""
MAX_REPLICAS = 10_000
"""``workloads[].replicas`` (and ``minCount``, ``when.count``, ``progress.count``; a member index is below it)."""
MAX_PODS = 20_000
"""All workloads' replicas together."""
MAX_WORKLOADS = 1000
"""``workloads`` (and the workloads one ``progress`` entry names)."""
MAX_CLAIMS_PER_POD = 32
"""``workloads[].claims``: the ResourceClaims of each pod."""
MAX_CLAIMS = 40_000
"""All ResourceClaims together: each pod's template claims plus each workload's shared ones."""
MAX_EXTENDED_RESOURCE = 128
"""A legacy extended resource's amount per pod."""
MAX_EXTENDED_RESOURCES = 32
"""Legacy extended resources named per pod."""
MAX_STEPS = 256
"""``timeline``: every step runs on a thread of its own."""
MAX_DEVICE_CLASSES = 128
"""``deviceClasses``."""
MAX_LABELS = 64
"""Labels of the scenario and of a node group (copied onto each of its nodes)."""
MAX_FLAGS = 256
"""``cluster.featureGates`` and ``cluster.runtimeConfig``: each becomes part of every component's command line."""
MAX_SECONDS = 366 * 24 * 3600
"""Whole-second fields such as ``tolerationSeconds`` (one year)."""
MAX_SEED = 2**63 - 1
MAX_CLIENT_QPS = 100_000
"""The local control plane's client rate limits and in-flight requests."""

LIMITS: dict[str, int] = {
    "nodes[].count": MAX_NODES_PER_GROUP,
    "nodes (all groups)": MAX_NODES,
    "devices per node (topology.gpus, topology.devices; nvlinkDomains, numaNodes)": MAX_DEVICES_PER_NODE,
    "device attributes index, numaNode": MAX_DEVICE_INDEX,
    "attributes, and capacities, per device": MAX_ATTRIBUTES_PER_DEVICE,
    "quantities (memory, capacities), in base units": MAX_QUANTITY,
    "workloads[].replicas, minCount, when.count, progress.count": MAX_REPLICAS,
    "pods (all workloads)": MAX_PODS,
    "workloads": MAX_WORKLOADS,
    "workloads[].claims": MAX_CLAIMS_PER_POD,
    "claims (all workloads)": MAX_CLAIMS,
    "claims[].requests, constraints, config": MAX_REQUESTS_PER_CLAIM,
    "requests[].count": MAX_DEVICES_PER_REQUEST,
    "workloads[].extendedResources values": MAX_EXTENDED_RESOURCE,
    "workloads[].extendedResources names": MAX_EXTENDED_RESOURCES,
    "timeline steps": MAX_STEPS,
    "deviceClasses": MAX_DEVICE_CLASSES,
    "labels (metadata, nodes[])": MAX_LABELS,
    "cluster.featureGates, cluster.runtimeConfig": MAX_FLAGS,
    "seconds (durations, tolerationSeconds)": MAX_SECONDS,
}
"""The bounds in words, for documentation and error messages."""

# ---------------------------------------------------------------------------------------------
# Value types

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(ms|s|m|h))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_HINT = "a duration like '500ms', '30s', '2m' or '1h30m'"


def parse_duration(value: Any) -> timedelta:
    """``"1h30m"`` -> ``timedelta(minutes=90)``; units ms, s, m, h (Go's ``time.ParseDuration`` subset)."""
    if isinstance(value, timedelta):
        return value
    if not isinstance(value, str) or not _DURATION.match(value.strip()):
        raise ValueError(f"expected {DURATION_HINT}, got {value!r}")
    seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(value.strip()))
    if seconds > MAX_SECONDS:  # also keeps timedelta from overflowing
        raise ValueError(f"expected at most {MAX_SECONDS // 3600}h, got {value!r}")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """The shortest ``parse_duration`` spelling of ``value`` (``timedelta(seconds=90)`` -> ``"1m30s"``)."""
    ms = round(value.total_seconds() * 1000)
    if ms == 0:
        return "0s"
    parts = []
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        n, ms = divmod(ms, size)
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts)


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError(f"expected a positive duration, got {format_duration(value)!r}")
    return value


_DURATION_SCHEMA = {
    "type": "string",
    "pattern": r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$",
    "examples": ["30s", "2m", "1h30m"],
}

Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({**_DURATION_SCHEMA, "description": DURATION_HINT}),
]
"""A duration written ``"30s"``; validates into a :class:`timedelta`."""
PositiveDuration = Annotated[Duration, AfterValidator(_positive)]
"""A :data:`Duration` greater than zero."""

PATTERN_WORDS: dict[str, str] = {}
"""Regular expression of a value type -> the words an error message uses for it."""


def _pattern(regex: str, words: str, max_length: int | None = None) -> Any:
    PATTERN_WORDS[regex] = words
    return Field(pattern=regex, max_length=max_length)


_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]{0,31}"





def _short_text(value: str) -> str:
    return repr(value) if len(value) <= 40 else repr(value[:37] + "...")


def _bounded_quantity(value: str) -> str:
    if quantity_amount(value) > MAX_QUANTITY:
        raise ValueError(f"expected a quantity of at most {MAX_QUANTITY} (just under 8Ei), got {_short_text(value)}")
    return value


Quantity = Annotated[
    str,
    _pattern(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$", "a Kubernetes quantity like '80Gi' or '4'"),
    AfterValidator(_bounded_quantity),
]
"""A Kubernetes quantity: ``80Gi``, ``500m``, ``4``; at most :data:`MAX_QUANTITY` in its base unit."""
DnsLabel = Annotated[
    str,
    _pattern(
        rf"^{_LABEL}$",
        "a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit)",
        63,
    ),
]
"""A DNS label (RFC 1123): lower-case letters, digits and '-', at most 63 characters."""
DnsSubdomain = Annotated[
    str, _pattern(rf"^{_SUBDOMAIN}$", "a DNS subdomain (dot-separated DNS labels, e.g. 'gpu.example.com')", 253)
]
"""A DNS subdomain (RFC 1123): dot-separated DNS labels, at most 253 characters."""
QualifiedName = Annotated[
    str,
    _pattern(
        rf"^({_SUBDOMAIN}/)?{_IDENT}$",
        "an attribute name: a C identifier of at most 32 characters, optionally after '<domain>/'",
    ),
]
"""A device attribute or capacity name: a C identifier, optionally prefixed by ``<domain>/``."""
FullyQualifiedName = Annotated[
    str, _pattern(rf"^{_SUBDOMAIN}/{_IDENT}$", "an attribute name with its domain, like 'gpu.example.com/nvlinkDomain'")
]
"""An attribute name with its domain: ``gpu.draguard.dev/nvlinkDomain``."""
CelExpression = Annotated[str, Field(min_length=1, max_length=10 * 1024)]
"""A CEL expression over ``device`` (``device.driver``, ``device.attributes[...]``, ``device.capacity[...]``)."""
FaultKind = Annotated[str, _pattern(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$", "a kebab-case name like 'drain-node'")]


_STRICT = ConfigDict(
    extra="forbid",
    strict=True,
    frozen=True,
    alias_generator=to_camel,
    populate_by_name=False,
    use_attribute_docstrings=True,
    hide_input_in_errors=True,
)
"""Every scenario model and fault parameter model: strict, closed, frozen, camelCase keys in YAML."""


class _Model(BaseModel):
    model_config = _STRICT


class Params(BaseModel):
    """Base for fault parameter models: strict, closed, frozen, camelCase keys in YAML."""

    model_config = _STRICT


# ---------------------------------------------------------------------------------------------
# The document


class Metadata(_Model):
    name: DnsLabel
    """The scenario's name (a DNS label); reports and replays use it."""
    description: str = ""
    """What the scenario shows, for humans."""
    labels: dict[str, str] = Field(default={}, max_length=MAX_LABELS)
    """Free-form labels, e.g. for selecting scenarios."""


class ClusterSpec(_Model):
    backend: Backend = "local"
    """``local``: draguard starts etcd, kube-apiserver, scheduler and controller-manager; ``kubeconfig``: use an existing
    cluster; ``kind``: draguard's kind cluster (real kubelets, containerd and runc; an ``external`` driver installed in it)."""
    kubeconfig: str | None = None
    """Path of the kubeconfig (``kubeconfig`` backend only; default: $KUBECONFIG)."""
    context: str | None = None
    """Context in the kubeconfig (``kubeconfig`` backend only)."""
    feature_gates: dict[str, bool] = Field(default={}, max_length=MAX_FLAGS)
    """Kubernetes feature gates, set on every component, e.g. ``{GenericWorkload: true}`` for gang scheduling."""
    runtime_config: dict[str, bool] = Field(default={}, max_length=MAX_FLAGS)
    """Extra kube-apiserver ``--runtime-config`` entries, e.g. ``{scheduling.k8s.io/v1beta1: true}``."""
    client_qps: int | None = Field(default=None, ge=1, le=MAX_CLIENT_QPS)
    """``--kube-api-qps`` of the local scheduler and controller manager (``local`` only; default 500)."""
    client_burst: int | None = Field(default=None, ge=1, le=MAX_CLIENT_QPS)
    """``--kube-api-burst`` of the local scheduler and controller manager (``local`` only; default 1000)."""
    max_requests_inflight: int | None = Field(default=None, ge=2, le=MAX_CLIENT_QPS)
    """kube-apiserver ``--max-requests-inflight`` (``local`` only; mutating gets half; default: the apiserver's)."""
    kind_cluster: DnsLabel | None = None
    """The name of draguard's kind cluster (``draguard cluster up --backend kind --name``; ``kind`` only; default: default)."""


class DaemonSetRef(_Model):
    namespace: DnsLabel
    """The DaemonSet's namespace."""
    name: DnsSubdomain
    """The DaemonSet's name."""


class DriverSpec(_Model):
    kind: DriverKind = "fake"
    """``fake``: draguard's fake DRA driver on fake nodes; ``external``: a driver already installed."""
    name: DnsSubdomain = DEFAULT_DRIVER
    """The driver name published in ResourceSlices (``spec.driver``)."""
    mutant: FaultKind | None = None
    """A named misbehaviour of the fake driver (e.g. ``forget-before-reset``); ``fake`` only."""
    device_class: DnsSubdomain | None = None
    """The DeviceClass an ``external`` driver installs; claims may name it. Required for ``external``."""
    interpose: bool | None = None
    """Put the gRPC interposer between the nodes and the driver: every call and answer is recorded into
    the report (``grpc-calls.jsonl``), the invariants that judge any driver from its calls judge it, and
    prepare/unprepare faults are injected there. Possible where draguard runs the driver (``local``
    backend). Default: on for an ``external`` driver there (draguard did not write it: its calls are
    what it shows), off for the fake driver (its own books are read; ``true`` adds the calls)."""
    daemon_set: DaemonSetRef | None = None
    """The DaemonSet running an ``external`` driver (``external`` only; default: the DaemonSet that mounts
    ``/var/lib/kubelet/plugins/<name>`` from its nodes, if there is one). Through it, steps restart the
    driver (``driver-restart``: its pod deleted) and take it off a node (``driver-down``)."""
    restart_command: str | None = Field(default=None, min_length=1, max_length=2000)
    """A shell command that restarts the driver on a node, ``{node}`` replaced by the node's name, returning
    once the driver is back (``external`` on an existing cluster only): ``driver-restart`` runs it where
    draguard finds no DaemonSet of the driver. ``driver-down`` still needs the DaemonSet (a restart
    command cannot keep the driver down)."""
    hosting: DriverHosting = "auto"
    """``per-node``: one fake driver process per node (fidelity: a crash or restart is a real process's);
    ``shared``: one process serves every node's sockets, each node's state, checkpoint and faults kept
    apart (hundreds of nodes in seconds); ``auto``: per-node up to 16 nodes, shared above (``fake`` only)."""


class DeviceTaintSpec(_Model):
    key: QualifiedName
    """Taint key."""
    value: str = Field(default="", max_length=63)
    """Taint value."""
    effect: TaintEffect
    """``None``, ``NoSchedule`` or ``NoExecute``."""


_AttributeValue = (
    bool
    | Annotated[int, Field(ge=-MAX_ATTRIBUTE_INT - 1, le=MAX_ATTRIBUTE_INT)]
    | Annotated[str, Field(max_length=MAX_ATTRIBUTE_STRING)]
)
"""A device attribute as the API holds it: an int64, a string of at most 64 characters, or a boolean."""


class DeviceSpec(_Model):
    name: DnsLabel
    """Device name, unique on its node (``gpu-0``)."""
    attributes: dict[QualifiedName, _AttributeValue] = Field(default={}, max_length=MAX_ATTRIBUTES_PER_DEVICE)
    """Attributes; a bare name belongs to the driver's domain (``nvlinkDomain: 0``)."""
    capacity: dict[QualifiedName, Quantity] = Field(default={}, max_length=MAX_ATTRIBUTES_PER_DEVICE)
    """Capacities as quantities (``memory: 80Gi``)."""
    allow_multiple_allocations: bool = False
    """Whether several claims may be allocated this device at once (consumable capacity)."""
    taints: list[DeviceTaintSpec] = Field(default=[], max_length=16)
    """Taints published on the device."""


class TopologySpec(_Model):
    """Exactly one of ``preset``, ``gpus`` or ``devices``."""

    preset: DnsLabel | None = None
    """A named topology of the fake driver (e.g. ``h100-sxm-8``)."""
    gpus: int | None = Field(default=None, ge=1, le=MAX_DEVICES_PER_NODE)
    """Generate this many GPUs (``gpu-0`` ... ``gpu-<n-1>``)."""
    product_name: str | None = Field(default=None, min_length=1, max_length=MAX_ATTRIBUTE_STRING)
    """``productName`` attribute of generated GPUs."""
    memory: Quantity | None = None
    """``memory`` capacity of each generated GPU."""
    nvlink_domains: int = Field(default=1, ge=1, le=MAX_DEVICES_PER_NODE)
    """Generated GPUs are split evenly into this many NVLink domains (attribute ``nvlinkDomain``)."""
    numa_nodes: int = Field(default=1, ge=1, le=MAX_DEVICES_PER_NODE)
    """Generated GPUs are split evenly across this many NUMA nodes (``resource.kubernetes.io/numaNode``)."""
    allow_multiple_allocations: bool = False
    """Generated GPUs may be allocated to several claims at once."""
    devices: list[DeviceSpec] | None = Field(default=None, min_length=1, max_length=MAX_DEVICES_PER_NODE)
    """An explicit device list."""


class NodeGroupSpec(_Model):
    """One node (``name``) or ``count`` nodes named ``<namePrefix>-0`` ... (``namePrefix``)."""

    name: DnsSubdomain | None = None
    """The name of a single node."""
    name_prefix: DnsSubdomain | None = None
    """Prefix of ``count`` nodes named ``<namePrefix>-<i>``."""
    count: int | None = Field(default=None, ge=1, le=MAX_NODES_PER_GROUP)
    """How many nodes (with ``namePrefix``; default 1)."""
    labels: dict[str, str] = Field(default={}, max_length=MAX_LABELS)
    """Node labels."""
    topology: TopologySpec | None = None
    """The devices of each node (``fake`` driver; required there)."""
    agent: Literal["fake", "kubelet"] = "fake"
    """What runs the nodes' kubelet part: ``fake`` (draguard's node agent) or ``kubelet`` (a hollow DRA
    kubelet built from upstream, one process per node; local backend only)."""


class DeviceClassSpec(_Model):
    name: DnsSubdomain
    """DeviceClass name; requests refer to it by ``deviceClassName``."""
    selectors: list[CelExpression] = Field(default=[], max_length=32)
    """CEL selectors every device of the class must match."""
    extended_resource_name: str | None = None
    """Extended resource served by this class (DRAExtendedResource), e.g. ``example.com/gpu``."""


class TolerationSpec(_Model):
    key: str | None = None
    """Taint key to tolerate (empty with ``Exists``: every taint)."""
    operator: TolerationOperator = "Equal"
    """``Equal`` or ``Exists``."""
    value: str | None = None
    """Taint value (``Equal``)."""
    effect: TaintEffect | None = None
    """Taint effect to tolerate (empty: all)."""
    toleration_seconds: int | None = Field(default=None, ge=0, le=MAX_SECONDS)
    """For ``NoExecute``: how long the allocation stays after the taint appears."""


class SubRequestSpec(_Model):
    name: DnsLabel
    """Sub-request name; results are named ``<request>/<subrequest>``."""
    device_class_name: DnsSubdomain
    """The DeviceClass (declared in ``deviceClasses``, or the external driver's)."""
    selectors: list[CelExpression] = Field(default=[], max_length=32)
    """CEL selectors on top of the class's."""
    allocation_mode: AllocationMode = "ExactCount"
    """``ExactCount`` (``count`` devices) or ``All`` (every matching device of a node)."""
    count: int | None = Field(default=None, ge=1, le=MAX_DEVICES_PER_REQUEST)
    """Number of devices for ``ExactCount`` (default 1)."""
    tolerations: list[TolerationSpec] = Field(default=[], max_length=16)
    """Device taints to tolerate."""


class RequestSpec(_Model):
    """Exactly one of ``deviceClassName`` (an exact request) or ``firstAvailable`` (a prioritized list)."""

    name: DnsLabel
    """Request name, unique in the claim; constraints and results refer to it."""
    device_class_name: DnsSubdomain | None = None
    """The DeviceClass (declared in ``deviceClasses``, or the external driver's)."""
    selectors: list[CelExpression] = Field(default=[], max_length=32)
    """CEL selectors on top of the class's."""
    allocation_mode: AllocationMode = "ExactCount"
    """``ExactCount`` (``count`` devices) or ``All`` (every matching device of a node)."""
    count: int | None = Field(default=None, ge=1, le=MAX_DEVICES_PER_REQUEST)
    """Number of devices for ``ExactCount`` (default 1)."""
    admin_access: bool = False
    """Admin access: the devices stay allocatable to others (monitoring)."""
    tolerations: list[TolerationSpec] = Field(default=[], max_length=16)
    """Device taints to tolerate."""
    first_available: list[SubRequestSpec] | None = Field(default=None, min_length=1, max_length=8)
    """Alternatives tried in order; the first that fits is allocated."""


class ConstraintSpec(_Model):
    """Exactly one of ``matchAttribute`` or ``distinctAttribute``."""

    requests: list[DnsLabel] = Field(default=[], max_length=MAX_REQUESTS_PER_CLAIM)
    """Requests the constraint covers (empty: all requests of the claim)."""
    match_attribute: FullyQualifiedName | None = None
    """All covered devices must have the same value of this attribute."""
    distinct_attribute: FullyQualifiedName | None = None
    """All covered devices must have different values of this attribute."""


class SharingSpec(_Model):
    strategy: SharingStrategy
    """How pods share the claim's devices: ``TimeSlicing`` or ``MPS``."""


class OpaqueConfigSpec(_Model):
    requests: list[DnsLabel] = Field(default=[], max_length=MAX_REQUESTS_PER_CLAIM)
    """Requests the configuration applies to (empty: all)."""
    driver: DnsSubdomain
    """The driver that interprets ``parameters``."""
    parameters: dict[str, Any]
    """Driver-specific parameters (an object with ``apiVersion`` and ``kind``, as the driver expects)."""


class ClaimSpec(_Model):
    name: DnsLabel
    """Claim name in the pod (``spec.resourceClaims[].name``)."""
    source: ClaimSource = "template"
    """``template``: one claim per pod; ``shared``: one claim for the whole gang."""
    requests: list[RequestSpec] = Field(min_length=1, max_length=MAX_REQUESTS_PER_CLAIM)
    """Device requests."""
    constraints: list[ConstraintSpec] = Field(default=[], max_length=MAX_REQUESTS_PER_CLAIM)
    """Constraints across the devices of several requests."""
    sharing: SharingSpec | None = None
    """The sharing strategy, when pods share an accelerator."""
    config: list[OpaqueConfigSpec] = Field(default=[], max_length=MAX_REQUESTS_PER_CLAIM)
    """Opaque driver configuration."""


class WorkloadSpec(_Model):
    name: DnsLabel
    """Workload name; pods are named ``<name>-<i>``."""
    replicas: int = Field(ge=1, le=MAX_REPLICAS)
    """Number of pods in the gang."""
    gang: GangPolicy = "none"
    """``none``: pods scheduled one by one; ``podgroup``: the Workload/PodGroup API (needs GenericWorkload)."""
    min_count: int | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    """PodGroup ``minCount`` (``podgroup`` only; default ``replicas``)."""
    priority: int | None = Field(default=None, ge=-(2**31), le=10**9)
    """Pod priority value (or use ``priorityClassName``)."""
    priority_class_name: DnsSubdomain | None = None
    """An existing PriorityClass."""
    interleave_with: DnsLabel | None = None
    """Create pods alternately with this workload's: a0, b0, a1, b1, ..."""
    image: str | None = None
    """Container image (default: the runner's pause image)."""
    run_for: PositiveDuration | None = None
    """Each pod exits successfully after this long (default: runs until the scenario ends)."""
    extended_resources: dict[str, Annotated[int, Field(ge=0, le=MAX_EXTENDED_RESOURCE)]] = Field(
        default={}, max_length=MAX_EXTENDED_RESOURCES
    )
    """Legacy extended resources per pod (``nvidia.com/gpu: 1``)."""
    claims: list[ClaimSpec] = Field(default=[], max_length=MAX_CLAIMS_PER_POD)
    """The pod's resource claims."""


class ConditionSpec(_Model):
    workload: DnsLabel
    """The workload whose pods are watched."""
    phase: PodPhase
    """``Pending``, ``Scheduled`` (bound to a node), ``Running``, ``Succeeded``, ``Failed`` or ``Deleted``."""
    count: int | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    """How many members must be in ``phase`` (default: all replicas)."""


class TargetSpec(_Model):
    workload: DnsLabel | None = None
    """A declared workload."""
    member: Annotated[int, Field(ge=0, le=MAX_REPLICAS - 1)] | Literal["random", "all"] | None = None
    """A member index, ``random`` or ``all`` (default ``random``)."""
    claim: DnsLabel | None = None
    """A claim name of ``workload``."""
    node: DnsSubdomain | None = None
    """A node name, ``random`` or ``all``."""
    device: DnsLabel | None = None
    """A device name on the targeted node."""


class AfterSpec(_Model):
    step: DnsLabel
    """The name of an earlier step (``<index>-<fault>`` when it has none)."""
    delay: Duration = timedelta(0)
    """How long after that step started."""


class StepSpec(_Model):
    """Exactly one of ``at``, ``when`` or ``after``. Every step runs on its own: a step that lasts
    (``duration``) never delays another."""

    name: DnsLabel | None = None
    """Step name for reports (default ``<index>-<fault>``)."""
    at: Duration | None = None
    """Time after the workloads are created."""
    when: ConditionSpec | None = None
    """Run as soon as this condition is reached."""
    after: AfterSpec | None = None
    """Run this long after another step started (e.g. while that step's fault is still on)."""
    tolerance: PositiveDuration | None = None
    """How late the step may start after it was due before it fails the scenario (default
    ``spec.timing.stepTolerance``)."""
    timeout: PositiveDuration | None = None
    """How long a ``when``/``after`` step waits for its condition (default ``spec.timing.conditionTimeout``)."""
    optional: bool = False
    """Whether the scenario still passes if this step errs, runs late, never runs or never fires."""
    fault: FaultKind
    """The fault kind (see ``draguard schema`` for the known kinds)."""
    target: TargetSpec | None = None
    """What the fault acts on."""
    params: dict[str, Any] = {}
    """The fault's parameters, validated against the fault's parameter model."""


class SettleSpec(_Model):
    timeout: PositiveDuration = timedelta(seconds=60)
    """How long the system may take to converge after the last step before invariants judge it."""
    cleanup: PositiveDuration = timedelta(seconds=60)
    """How long consumers may take to go after deletion before ``no-leak`` judges."""


class TimingSpec(_Model):
    step_tolerance: PositiveDuration = timedelta(seconds=3)
    """How late a step may start after it was due (``at``/``after``) before it fails the scenario."""
    condition_timeout: PositiveDuration = timedelta(minutes=2)
    """How long a ``when``/``after`` step waits for its condition before it counts as never run."""
    gang_grace: PositiveDuration = timedelta(seconds=30)
    """How long a gang may stay partial while the run goes on before ``gang-atomic`` reports it."""


class EvidenceSpec(_Model):
    """A violation of ``invariant`` must name these (at least one of workload, claim, node, device)."""

    invariant: str
    """An invariant listed in ``violate``."""
    workload: DnsLabel | None = None
    """A pod of this workload must be among the violation's objects."""
    member: int | None = Field(default=None, ge=0, le=MAX_REPLICAS - 1)
    """...this member of it (needs ``workload``)."""
    claim: DnsLabel | None = None
    """A claim of ``workload`` (its claim name) must be among the objects."""
    node: DnsSubdomain | None = None
    """A device of this node (pool) must be among the violation's devices."""
    device: DnsLabel | None = None
    """This device must be among the violation's devices."""


class ProgressSpec(_Model):
    """Progress that must be seen at some moment of the run, so that a fix cannot pass by doing nothing."""

    workloads: list[DnsLabel] = Field(min_length=1, max_length=MAX_WORKLOADS)
    """The workloads that must get there."""
    phase: PodPhase = "Running"
    """The phase their pods reach (``Scheduled``: bound to a node)."""
    count: int | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    """How many members of each (default: all replicas)."""
    need: Literal["all", "any"] = "all"
    """Whether every listed workload must get there, or any one of them (the winner of a race)."""
    within: PositiveDuration | None = None
    """How soon it must happen: counted from when step ``after`` ran, or from the start of the timeline
    (a prepare stalled behind another claim's reset is late, not missing)."""
    after: DnsLabel | None = None
    """The step (by name) the ``within`` clock starts at; needs ``within``."""


class EventSpec(_Model):
    """A Kubernetes Event the run must see (or, with ``seen: false``, must never see): an incident shown
    the way the scheduler and the kubelet report it, so a reproduction tells when a release fixes it."""

    reason: str = Field(pattern=r"^[A-Z][A-Za-z0-9]*$", max_length=128)
    """The Event's ``reason`` (``FailedScheduling``, ``FailedPrepareDynamicResources``...)."""
    message: str | None = Field(default=None, min_length=1, max_length=160)
    """Words its message must contain (within its first 160 characters, as the timeline keeps it)."""
    workload: DnsLabel | None = None
    """About a pod of this workload (default: any object of the run)."""
    seen: bool = True
    """``false``: such an Event must not come (an incident a release fixed)."""


_MAX_INVARIANT_NAMES = 64  # each name at most once, and far fewer invariants exist


class IgnoreSpec(_Model):
    """An invariant whose verdict does not count for this scenario, and why (shown in every report)."""

    invariant: str
    """The invariant (a registered name)."""
    reason: str = Field(min_length=1, max_length=500)
    """Why its verdict does not count here (required: a violation is never ignored without a reason)."""


class ExpectSpec(_Model):
    """Every invariant the run judges must hold, unless ``violate`` names it or ``ignore`` excuses it."""

    hold: list[str] | None = Field(default=None, max_length=_MAX_INVARIANT_NAMES)
    """Invariants that must hold and must be judged: one that ends not checked fails the run (default:
    every invariant the run can judge that ``violate`` and ``ignore`` do not name). An invariant left out
    must still not be violated."""
    violate: list[str] = Field(default=[], max_length=_MAX_INVARIANT_NAMES)
    """Invariants an incident reproduction must show violated."""
    ignore: list[IgnoreSpec] = Field(default=[], max_length=_MAX_INVARIANT_NAMES)
    """Invariants whose violation does not fail this scenario, each with the reason."""
    evidence: list[EvidenceSpec] = Field(default=[], max_length=32)
    """What a violation must name to count: the reason, not just the invariant."""
    progress: list[ProgressSpec] = Field(default=[], max_length=32)
    """Progress that must happen during the run."""
    events: list[EventSpec] = Field(default=[], max_length=32)
    """Kubernetes Events that must come (or must not) during the run."""


class ScenarioSpec(_Model):
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    """Seed for every random choice (``random`` members and nodes, jitter)."""
    cluster: ClusterSpec = ClusterSpec()
    """The Kubernetes cluster."""
    driver: DriverSpec = DriverSpec()
    """The DRA driver under test."""
    nodes: list[NodeGroupSpec] = Field(default=[], max_length=MAX_NODES)
    """Nodes and their devices (required for the ``fake`` driver)."""
    device_classes: list[DeviceClassSpec] = Field(default=[], max_length=MAX_DEVICE_CLASSES)
    """DeviceClasses to create."""
    workloads: list[WorkloadSpec] = Field(min_length=1, max_length=MAX_WORKLOADS)
    """The gangs of pods to run."""
    timeline: list[StepSpec] = Field(default=[], max_length=MAX_STEPS)
    """Chaos steps."""
    settle: SettleSpec = SettleSpec()
    """Settle and cleanup timeouts."""
    timing: TimingSpec = TimingSpec()
    """Step tolerance, condition timeout and gang grace period."""
    expect: ExpectSpec = ExpectSpec()
    """Invariants that must hold, and violations an incident reproduction must show."""


class ScenarioDocument(_Model):
    """A draguard chaos scenario."""

    api_version: Literal["draguard.dev/v1alpha1"] = Field(alias="apiVersion")
    """Always ``draguard.dev/v1alpha1``."""
    kind: Literal["Scenario"]
    """Always ``Scenario``."""
    metadata: Metadata
    """Name and description."""
    spec: ScenarioSpec
    """What to run and what to expect."""


assert API_VERSION == "draguard.dev/v1alpha1" and KIND == "Scenario"  # keep the Literal above in step
