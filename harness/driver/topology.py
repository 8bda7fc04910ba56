"""Node topology for the fake driver: the file format, the fleet presets, and the resolved inventory.

A topology file (YAML or JSON) names a preset or lists devices::

    apiVersion: draguard.dev/v1alpha1
    kind: NodeTopology
    preset: h100-sxm-8            # or: devices: [{name: gpu-0, index: 0, productName: ..., ...}]

It is parsed at the edge into strict pydantic models and resolved, for one node, into a frozen
:class:`Inventory`: the devices with the attributes a real GPU/NPU fleet publishes (product name,
uuid, index, architecture, NVLink domain, PCIe root, NUMA node, memory) and, for partitionable
devices, the shared counter sets that MIG-like slices consume. :mod:`.slices` turns the inventory
into ResourceSlices; :mod:`.plugin` uses it to know which devices exist and which overlap.

Presets are data: ``presets/<name>.yaml``, NodeTopology files with a device list, registered by
name into :data:`PRESETS` when this module loads. Preset values come from shared/reference/fleets.md;
PCIe roots and bus ids are platform-specific and only plausible, and the A100 MIG sizes are
derived from the memory-slice count, not measured.
"""

from __future__ import annotations

import json
import re
import uuid as uuidlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from draguard.harness.core.errors import Problem, UsageError
from draguard.harness.core.registry import Registry
from draguard.harness.dralimits import (
    MAX_ATTRIBUTE_INT,
    MAX_ATTRIBUTE_STRING,
    MAX_ATTRIBUTES_PER_DEVICE,
    MAX_DEVICE_INDEX,
    MAX_DEVICES_PER_NODE,
    MAX_NUMA_NODE,
    MAX_QUANTITY,
    quantity_amount,
)

__all__ = [
    "PartitionProfile",
    "Partitioning",
    "DeviceSpec",
    "DeviceTaint",
    "NodeTopology",
    "Version",
    "DeviceInfo",
    "CounterSet",
    "Inventory",
    "PRESETS",
    "DEFAULT_DEVICES",
    "MAX_MULTIPROCESSORS",
    "MAX_PROFILE_ID",
    "MAX_MEMORY_SLICES",
    "MAX_PARTITIONS_PER_DEVICE",
    "MAX_PUBLISHED_DEVICES",
    "preset",
    "generic",
    "partition_name",
    "load_topology",
    "resolve",
]

DEFAULT_DEVICES = 8
"""GPUs published when neither ``--devices`` nor ``--topology`` is given."""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_CAPACITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_UUID_NS = uuidlib.UUID("5b1ad0c5-7d0e-4b8e-9d0f-6472616775a1")
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"

# Bounds on every count of a topology file, checked when the file is validated, before :func:`resolve`
# builds a device, counter or partition from it. Device index, NUMA node, attributes, quantities and
# devices per file are those the scenario format shares (harness/dralimits.py): a scenario topology
# becomes a topology file.
MAX_MULTIPROCESSORS = 4096
"""Multiprocessors (SMs, CUs) of a partitionable device (an H100 has 132, an MI300X 304)."""
MAX_PROFILE_ID = 1023
"""A partition profile's vendor id; part of each partition's device name."""
MAX_MEMORY_SLICES = 16
"""Memory slices of a partitionable device, and so the placements of a profile (an A100/H100 has 8)."""
MAX_PARTITIONS_PER_DEVICE = 64
"""Partitions (placements of all profiles together) one device publishes (h100-mig: 17)."""
MAX_PUBLISHED_DEVICES = 2048
"""Devices one node publishes, whole devices and partitions together (h100-mig: 144)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PartitionProfile(_Strict):
    """One MIG-like profile: how much of the parent it takes and where it may start."""

    name: str = Field(description="profile name as the vendor spells it, e.g. 1g.10gb")
    id: int = Field(ge=0, le=MAX_PROFILE_ID, description="vendor profile id, part of the device name")
    multiprocessors: int = Field(gt=0, le=MAX_MULTIPROCESSORS)
    memorySlices: int = Field(gt=0, le=MAX_MEMORY_SLICES)
    placements: list[Annotated[int, Field(ge=0, le=MAX_MEMORY_SLICES - 1)]] = Field(
        min_length=1, max_length=MAX_MEMORY_SLICES, description="first memory slice of each placement"
    )


class Partitioning(_Strict):
    """A partitionable parent: a counter set with its compute and memory, consumed by profiles."""

    multiprocessors: int = Field(gt=0, le=MAX_MULTIPROCESSORS, description="multiprocessors the profiles share")
    memorySlices: int = Field(default=8, gt=0, le=MAX_MEMORY_SLICES)
    profiles: list[PartitionProfile] = Field(min_length=1, max_length=32)

    @model_validator(mode="after")
    def _placements_fit(self) -> Partitioning:
        partitions = sum(len(p.placements) for p in self.profiles)
        if partitions > MAX_PARTITIONS_PER_DEVICE:
            raise ValueError(
                f"expected at most {MAX_PARTITIONS_PER_DEVICE} partitions (placements of all profiles together), "
                f"got {partitions}"
            )
        for p in self.profiles:
            if p.multiprocessors > self.multiprocessors:
                raise ValueError(f"profile {p.name}: {p.multiprocessors} multiprocessors, more than the device's "
                                 f"{self.multiprocessors}")  # fmt: skip
            for start in p.placements:
                if start < 0 or start + p.memorySlices > self.memorySlices:
                    raise ValueError(
                        f"profile {p.name}: placement {start} with {p.memorySlices} memory slices "
                        f"does not fit in {self.memorySlices} memory slices"
                    )
        return self


class DeviceTaint(_Strict):
    """A taint the driver publishes on a device (``spec.devices[].taints``)."""

    key: str = Field(min_length=1, max_length=316)
    value: str = Field(default="", max_length=63)
    effect: Literal["None", "NoSchedule", "NoExecute"]


_AttributeValue = (
    Annotated[str, Field(max_length=MAX_ATTRIBUTE_STRING)]
    | bool
    | Annotated[int, Field(ge=-MAX_ATTRIBUTE_INT - 1, le=MAX_ATTRIBUTE_INT)]
)
"""An extra attribute as the API holds it: a string of at most 64 characters, a boolean or an int64."""


def _bounded(key: str, q: str) -> None:
    if quantity_amount(q) > MAX_QUANTITY:
        raise ValueError(f"{key}: expected a quantity of at most {MAX_QUANTITY} (just under 8Ei), got {q[:40]!r}")


class DeviceSpec(_Strict):
    """One physical accelerator of the node."""

    name: str = Field(description="device name in the ResourceSlice (DNS label), e.g. gpu-0")
    index: int = Field(ge=0, le=MAX_DEVICE_INDEX)
    type: Literal["gpu", "npu"] = "gpu"
    productName: str = Field(min_length=1, max_length=64)
    architecture: str = Field(min_length=1, max_length=64)
    brand: str = Field(default="Nvidia", min_length=1, max_length=64)
    memory: str = Field(description="memory capacity as a Kubernetes quantity, e.g. 81559Mi")
    numaNode: int = Field(ge=0, le=MAX_NUMA_NODE)
    pcieRoot: str = Field(min_length=1, max_length=64)
    pciBusID: str | None = Field(default=None, max_length=MAX_ATTRIBUTE_STRING)
    nvlinkDomain: str | None = Field(
        default=None,
        max_length=MAX_ATTRIBUTE_STRING,
        description="scale-up domain (NVLink clique, xGMI hive, Gaudi RoCE domain); default: the node",
    )
    uuid: str | None = Field(
        default=None, max_length=MAX_ATTRIBUTE_STRING, description="default: derived from node and device name"
    )
    attributes: dict[str, _AttributeValue] = Field(
        default_factory=dict, max_length=MAX_ATTRIBUTES_PER_DEVICE, description="extra attributes"
    )
    capacity: dict[str, str] = Field(
        default_factory=dict, max_length=MAX_ATTRIBUTES_PER_DEVICE, description="extra capacities besides memory"
    )
    allowMultipleAllocations: bool = Field(default=False, description="several claims may share the device")
    taints: list[DeviceTaint] = Field(default_factory=list, max_length=16, description="taints published on the device")
    partitioning: Partitioning | None = None

    @model_validator(mode="after")
    def _partition_names(self) -> DeviceSpec:
        for prof in self.partitioning.profiles if self.partitioning else ():
            name = partition_name(self.name, prof, max(prof.placements))
            if not _DNS_LABEL.match(name) or len(name) > 63:
                raise ValueError(f"partition {name!r} of profile {prof.name}: a partition's device name must be a "
                                 "DNS label of at most 63 characters; shorten the device or profile name")  # fmt: skip
        return self

    @field_validator("capacity")
    @classmethod
    def _capacities(cls, v: dict[str, str]) -> dict[str, str]:
        for key, q in v.items():
            if not _CAPACITY.match(q):
                raise ValueError(f"capacity {key}: {q!r} is not a quantity such as 4, 500m or 80Gi")
            _bounded(f"capacity {key}", q)
        return v

    @field_validator("name")
    @classmethod
    def _dns_label(cls, v: str) -> str:
        if not _DNS_LABEL.match(v) or len(v) > 63:
            raise ValueError(f"{v!r} is not a DNS label (lower-case letters, digits, '-', at most 63)")
        return v

    @field_validator("memory")
    @classmethod
    def _quantity(cls, v: str) -> str:
        if not _QUANTITY.match(v):
            raise ValueError(f"{v!r} is not a quantity such as 81559Mi or 80Gi")
        _bounded("memory", v)
        return v


class NodeTopology(_Strict):
    """The top level of a topology file: a preset name or an explicit device list."""

    apiVersion: Literal["draguard.dev/v1alpha1"] = "draguard.dev/v1alpha1"
    kind: Literal["NodeTopology"] = "NodeTopology"
    preset: str | None = None
    devices: list[DeviceSpec] | None = Field(default=None, max_length=MAX_DEVICES_PER_NODE)

    description: str = ""
    """What the topology models (presets say which fleet, and where the values come from)."""

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str | None) -> str | None:
        if v is not None and v not in PRESETS:
            raise ValueError(f"unknown preset {v!r}; known: {', '.join(PRESETS.names())}")
        return v

    @field_validator("devices")
    @classmethod
    def _published(cls, v: list[DeviceSpec] | None) -> list[DeviceSpec] | None:
        published = sum(1 + sum(len(p.placements) for p in (d.partitioning.profiles if d.partitioning else ()))
                        for d in v or ())  # fmt: skip
        if published > MAX_PUBLISHED_DEVICES:
            raise ValueError(
                f"expected at most {MAX_PUBLISHED_DEVICES} devices published per node (whole devices and partitions "
                f"together), got {published}"
            )
        return v

    @model_validator(mode="after")
    def _one_source(self) -> NodeTopology:
        if (self.preset is None) == (self.devices is None):
            raise ValueError("give exactly one of 'preset' and 'devices'")
        if self.devices is not None:
            if not self.devices:
                raise ValueError("'devices' is empty")
            seen: set[str] = set()
            for d in self.devices:
                if d.name in seen:
                    raise ValueError(f"device name {d.name!r} appears twice")
                seen.add(d.name)
            indexes = [d.index for d in self.devices]
            if len(set(indexes)) != len(indexes):
                raise ValueError("device indexes must be unique")
        return self

    def device_specs(self) -> list[DeviceSpec]:
        if self.devices is not None:
            return list(self.devices)
        assert self.preset is not None
        return preset(self.preset)


# -- resolved inventory ---------------------------------------------------------------------------


class Version(str):
    """A string published as a semantic-version attribute (``{"version": ...}``)."""


AttrValue = str | int | bool | Version


@dataclass(frozen=True)
class DeviceInfo:
    """A device as published and prepared: its attributes and the physical units it occupies."""

    name: str
    kind: str
    uuid: str
    attributes: Mapping[str, AttrValue]
    capacity: Mapping[str, str]
    consumes: tuple[tuple[str, Mapping[str, str]], ...] = ()
    parent: str | None = None
    units: frozenset[str] = frozenset()
    """Physical units (a whole device, or memory slices of a parent): devices whose units overlap
    cannot be prepared for two claims at once."""
    allow_multiple: bool = False
    """Published with ``allowMultipleAllocations``: several claims may hold it at once."""
    taints: tuple[tuple[str, str, str], ...] = ()
    """(key, value, effect) of each taint published on the device."""


@dataclass(frozen=True)
class CounterSet:
    name: str
    counters: Mapping[str, str]


@dataclass(frozen=True)
class Inventory:
    """Everything one node's driver publishes and prepares."""

    node: str
    devices: tuple[DeviceInfo, ...]
    counter_sets: tuple[CounterSet, ...] = ()
    _by_name: dict[str, DeviceInfo] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({d.name: d for d in self.devices})

    def get(self, name: str) -> DeviceInfo | None:
        return self._by_name.get(name)

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.devices]


def partition_name(device: str, profile: PartitionProfile, start: int) -> str:
    """The device name of ``profile``'s partition of ``device`` at memory slice ``start``."""
    return f"{device}-mig-{profile.name.replace('.', '').replace('+', '')}-{profile.id}-{start}"


def _uuid(prefix: str, node: str, name: str) -> str:
    return f"{prefix}-{uuidlib.uuid5(_UUID_NS, f'{node}/{name}')}"


def _mebibytes(quantity: str) -> int:
    m = _QUANTITY.match(quantity)
    assert m is not None
    number = float(quantity[: len(quantity) - len(m.group(2) or "")])
    factor = {
        None: 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
        "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    }[m.group(2)]
    return int(number * factor) // 2**20


_SEMVER = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")


def _is_version_attr(key: str, value: object) -> bool:
    """Extra attributes named like versions are published as versions, as real drivers do."""
    return isinstance(value, str) and bool(_SEMVER.match(value)) and (
        key.endswith("Version") or key == "cudaComputeCapability"
    )


def resolve(topology: NodeTopology | list[DeviceSpec], node: str) -> Inventory:
    """Turn a topology into the devices and counter sets one node publishes."""
    specs = topology.device_specs() if isinstance(topology, NodeTopology) else topology
    devices: list[DeviceInfo] = []
    counter_sets: list[CounterSet] = []
    for spec in specs:
        base: dict[str, AttrValue] = {
            "type": spec.type,
            "index": spec.index,
            "productName": spec.productName,
            "architecture": spec.architecture,
            "brand": spec.brand,
            "numaNode": spec.numaNode,
            "nvlinkDomain": spec.nvlinkDomain or node,
            PCIE_ROOT: spec.pcieRoot,
        }
        if spec.pciBusID:
            base[PCI_BUS_ID] = spec.pciBusID
        base.update(
            {k: Version(v) if _is_version_attr(k, v) else v for k, v in spec.attributes.items()}
        )
        gpu_uuid = spec.uuid or _uuid("GPU" if spec.type == "gpu" else "NPU", node, spec.name)
        part = spec.partitioning
        whole_units = frozenset(
            [f"{spec.name}/mem{i}" for i in range(part.memorySlices)] if part else [spec.name]
        )
        consumes: tuple[tuple[str, Mapping[str, str]], ...] = ()
        capacity: dict[str, str] = {**spec.capacity, "memory": spec.memory}
        if part:
            cset = f"{spec.name}-counter-set"
            total = {"multiprocessors": str(part.multiprocessors), "memory": spec.memory}
            total.update({f"memory-slice-{i}": "1" for i in range(part.memorySlices)})
            counter_sets.append(CounterSet(cset, total))
            consumes = ((cset, dict(total)),)
            capacity["multiprocessors"] = str(part.multiprocessors)
        devices.append(
            DeviceInfo(
                name=spec.name,
                kind=spec.type,
                uuid=gpu_uuid,
                attributes={**base, "uuid": gpu_uuid},
                capacity=capacity,
                consumes=consumes,
                units=whole_units,
                allow_multiple=spec.allowMultipleAllocations,
                taints=tuple((t.key, t.value, t.effect) for t in spec.taints),
            )
        )
        if not part:
            continue
        mem_mib = _mebibytes(spec.memory)
        for prof in part.profiles:
            for start in prof.placements:
                name = partition_name(spec.name, prof, start)
                slices = range(start, start + prof.memorySlices)
                memory = f"{mem_mib * prof.memorySlices // part.memorySlices}Mi"
                mig_uuid = _uuid("MIG", node, name)
                attrs: dict[str, AttrValue] = {
                    **base,
                    "type": "mig",
                    "uuid": mig_uuid,
                    "parentUUID": gpu_uuid,
                    "profile": prof.name,
                }
                used = {"multiprocessors": str(prof.multiprocessors), "memory": memory}
                used.update({f"memory-slice-{i}": "1" for i in slices})
                devices.append(
                    DeviceInfo(
                        name=name,
                        kind="mig",
                        uuid=mig_uuid,
                        attributes=attrs,
                        capacity={"memory": memory, "multiprocessors": str(prof.multiprocessors)},
                        consumes=((f"{spec.name}-counter-set", used),),
                        parent=spec.name,
                        units=frozenset(f"{spec.name}/mem{i}" for i in slices),
                    )
                )
    return Inventory(node=node, devices=tuple(devices), counter_sets=tuple(counter_sets))


# -- presets --------------------------------------------------------------------------------------

PRESET_DIR = Path(__file__).parent / "presets"
"""Fleet presets as data: ``presets/<name>.yaml``, each a NodeTopology with a device list."""


def _preset_loader(path: Path) -> Callable[[], list[DeviceSpec]]:
    def load() -> list[DeviceSpec]:
        return load_topology(path).device_specs()

    load.__qualname__ = f"preset:{path.stem}"
    return load


def _register_presets() -> Registry[Callable[[], list[DeviceSpec]]]:
    registry: Registry[Callable[[], list[DeviceSpec]]] = Registry("preset")
    for path in sorted(PRESET_DIR.glob("*.yaml")):
        head = YAML(typ="safe").load(path.read_text()) or {}
        registry.register(path.stem, summary=str(head.get("description") or path.stem))(_preset_loader(path))
    return registry


_H100 = dict(productName="NVIDIA H100 80GB HBM3", architecture="Hopper", memory="81559Mi")
_CC = {"cudaComputeCapability": "9.0.0"}
# DGX H100: GPU buses inferred from the NIC pairing (fleets.md, uncertain).
_DGX_BUSES = ["1b", "43", "52", "61", "9d", "c3", "d1", "df"]


def generic(count: int, product: Mapping[str, Any] | None = None, gpus_per_root: int = 2) -> list[DeviceSpec]:
    """``count`` GPUs laid out like an HGX board: half per NUMA node, ``gpus_per_root`` per PCIe root."""
    if count < 1 or count > 512:
        raise UsageError(f"--devices {count}: give between 1 and 512 devices")
    product = dict(product or _H100)
    attributes = dict(product.pop("attributes", None) or _CC)
    half = max(1, (count + 1) // 2)
    out = []
    for i in range(count):
        root = i // gpus_per_root
        bus = _DGX_BUSES[i] if count == 8 else f"{(0x18 + i * 0x10) % 0x100:02x}"
        out.append(
            DeviceSpec(
                name=f"gpu-{i}",
                index=i,
                numaNode=i // half,
                pcieRoot=f"pci0000:{(0x10 + root * 0x20) % 0x100:02x}" if count <= 16 else f"pci{root:04x}:00",
                pciBusID=f"0000:{bus}:00.0" if count <= 16 else None,
                attributes=dict(attributes),
                **product,
            )
        )
    return out


def preset(name: str) -> list[DeviceSpec]:
    """The devices of preset ``name`` (``presets/<name>.yaml``)."""
    if name not in PRESETS:
        raise UsageError(f"unknown topology preset {name!r}; known: {', '.join(PRESETS.names())}")
    return PRESETS.get(name).target()


# -- loading --------------------------------------------------------------------------------------


def _position(data: Any, loc: tuple[int | str, ...]) -> tuple[int, int]:
    """Line and column (1-based) of the deepest node of ``loc`` that ruamel recorded."""
    line, col = 1, 1
    node = data
    for key in loc:
        lc = getattr(node, "lc", None)
        try:
            if lc is not None:
                if isinstance(key, int):
                    ln, cl = lc.item(key)
                else:
                    ln, cl = lc.key(key)
                line, col = ln + 1, cl + 1
            node = node[key]
        except (KeyError, IndexError, TypeError):
            break
    return line, col


def load_topology(path: str | Path) -> NodeTopology:
    """Read and validate a topology file; every problem is reported with file, line and field."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise UsageError(f"{p}: cannot read topology file: {exc.strerror or exc}") from exc
    try:
        data = YAML(typ="rt").load(text) if p.suffix != ".json" else json.loads(text)
    except (YAMLError, ValueError) as exc:
        long = re.search(r"(?<![0-9])[0-9]{4301,}", text)
        if isinstance(exc, ValueError) and long is not None:  # Python refuses to convert it (int_max_str_digits)
            line = text.count("\n", 0, long.start()) + 1
            column = long.start() - (text.rfind("\n", 0, long.start()) + 1) + 1
            raise UsageError(f"{p}:{line}:{column}: a number of {len(long.group())} digits: every count and size "
                             "of a topology is far smaller") from exc  # fmt: skip
        raise UsageError(f"{p}: not valid YAML/JSON: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, Mapping):
        raise UsageError(f"{p}: a topology file must be a mapping with kind: NodeTopology")
    if _values_past(data, _MAX_VALUES):
        raise UsageError(f"{p}: the topology file is too large (over {_MAX_VALUES} values, aliases expanded)")
    try:
        return NodeTopology.model_validate(json.loads(json.dumps(data)))
    except ValidationError as exc:
        found: dict[tuple[int | str, ...], list[tuple[str, str]]] = {}
        for err in exc.errors():
            msg = err["msg"].removeprefix("Value error, ")
            found.setdefault(_data_loc(data, tuple(err["loc"])), []).append((err["type"], msg))
        problems = []
        for loc, errors in found.items():
            # A union (an attribute: string, boolean or integer) fails once per branch; the branch of the
            # value's own type says what is wrong with it.
            kept = [m for t, m in errors if not t.endswith(("_type", "_parsing"))] or [m for _, m in errors]
            line, col = _position(data, loc)
            problems.append(Problem(str(p), line, col, ".".join(str(x) for x in loc), "; ".join(dict.fromkeys(kept))))
        raise UsageError("\n".join(str(pr) for pr in problems)) from exc


_MAX_VALUES = 100_000
"""Values a topology file may hold once YAML aliases are expanded (an alias bomb expands past it)."""


def _values_past(data: Any, limit: int) -> bool:
    """Whether ``data`` holds more than ``limit`` values; stops counting there."""
    stack, seen = [data], 0
    while stack:
        seen += 1
        if seen > limit:
            return True
        node = stack.pop()
        if isinstance(node, Mapping):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _data_loc(data: Any, loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """``loc`` without pydantic's union-branch tags (``constrained-int``), which are not in the file."""
    out: list[int | str] = []
    node = data
    for i, part in enumerate(loc):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif not (i == len(loc) - 1 and isinstance(node, Mapping)):  # a missing key stays
            continue
        out.append(part)
    return tuple(out)


PRESETS = _register_presets()
"""Fleet presets by name, in the one registry class (``harness.registry.Registry``)."""
