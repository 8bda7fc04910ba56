"""What the linter knows about real DRA drivers, loaded from ``devices.yaml`` (data, not code).

Users: the rules (which attributes a class can have, which extended resources are accelerators,
which classes share a device, which labels declare a gang).
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

__all__ = ["DriverInfo", "Knowledge", "knowledge"]

_DATA = Path(__file__).with_name("devices.yaml")


@dataclass(frozen=True)
class DriverInfo:
    """The devices one driver publishes."""

    name: str
    accelerator: bool
    attributes: Mapping[str, frozenset[str] | None]
    """Domain -> attribute names its devices can carry (None: any name in that domain)."""
    capacity: frozenset[str]
    shared_types: frozenset[str]
    types: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """``type`` attribute value -> the attributes (in the driver's own domain) of that kind of device."""

    def published(self, device_type: str | None = None) -> str:
        """The attributes its devices (of ``device_type``, when the driver splits them by type) publish,
        by domain: ``gpu.nvidia.com/{type, uuid}, resource.kubernetes.io/{pcieRoot}``."""
        parts = []
        for domain, names in self.attributes.items():
            if domain == self.name and device_type is not None and device_type in self.types:
                names = self.types[device_type]
            parts.append(f"{domain}/*" if names is None else f"{domain}/{{{', '.join(sorted(names))}}}")
        return ", ".join(parts)

    def can_have(self, domain: str, name: str) -> bool:
        if domain not in self.attributes:
            return False
        names = self.attributes[domain]
        return names is None or name in names


@dataclass(frozen=True)
class Knowledge:
    """The whole table; see devices.yaml for the meaning of each part."""

    standard_domain: str
    drivers: Mapping[str, DriverInfo]
    class_drivers: Mapping[str, str]
    shared_classes: frozenset[str]
    class_types: Mapping[str, str]
    """Well-known class name -> the ``type`` of device its selector picks."""
    interconnect_attributes: frozenset[str]
    topology_words: tuple[str, ...]
    accelerator_resources: tuple[str, ...]
    gang_labels: frozenset[str]
    gang_annotations: frozenset[str]

    def is_accelerator_resource(self, resource: str) -> bool:
        return any(fnmatch.fnmatchcase(resource, pattern) for pattern in self.accelerator_resources)

    def is_topology_attribute(self, name: str) -> bool:
        """Whether an attribute says where a device sits in an interconnect (NVLink, PCIe, NUMA, mesh...)."""
        lowered = name.lower()
        return name in self.interconnect_attributes or any(word in lowered for word in self.topology_words)

    def driver_of_class(self, class_name: str) -> str | None:
        """The driver a well-known class name selects, if the name is known."""
        if class_name in self.class_drivers:
            return self.class_drivers[class_name]
        return class_name if class_name in self.drivers else None


@functools.cache
def knowledge() -> Knowledge:
    """The table, read once."""
    data: Any = YAML(typ="safe").load(_DATA.read_text(encoding="utf-8"))
    drivers = {}
    for name, info in data["drivers"].items():
        attributes: dict[str, frozenset[str] | None] = {name: frozenset(info.get("attributes") or [])}
        for domain, names in (info.get("otherDomains") or {}).items():
            attributes[domain] = None if names is None else frozenset(names)
        drivers[name] = DriverInfo(
            name,
            bool(info.get("accelerator")),
            attributes,
            frozenset(info.get("capacity") or []),
            frozenset(info.get("sharedTypes") or []),
            {t: frozenset(names) for t, names in (info.get("types") or {}).items()},
        )
    classes = data["classes"]
    return Knowledge(
        standard_domain=data["standardDomain"],
        drivers=drivers,
        class_drivers={name: c["driver"] for name, c in classes.items()},
        class_types={name: c["type"] for name, c in classes.items() if c.get("type")},
        shared_classes=frozenset(name for name, c in classes.items() if c.get("shared")),
        interconnect_attributes=frozenset(data["interconnectAttributes"]),
        topology_words=tuple(w.lower() for w in data["topologyWords"]),
        accelerator_resources=tuple(data["acceleratorResources"]),
        gang_labels=frozenset(data["gangLabels"]),
        gang_annotations=frozenset(data["gangAnnotations"]),
    )
