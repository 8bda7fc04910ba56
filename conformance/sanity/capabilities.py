"""What a driver declares it supports (``--capabilities FILE``), and which sanity checks that selects.

A vendor writes what the driver supports in a small YAML or JSON file::

    healthStream: true                  # serves the DRAResourceHealth stream (KEP-4680)
    sharingStrategies: [TimeSlicing]    # sharing it sets up from a claim's opaque config
    adminAccess: false                  # adminAccess claims (KEP-5018)
    partitionableDevices: false         # devices consuming shared counters (KEP-4815)

A check registers the capability it tests (``sanity_check(..., capability="health-stream")``); a
check for something the file does not declare is reported ``not-applicable`` with the file named,
never failed or skipped (csi-test#143 and #214 asked csi-sanity for the same). Without a file every
check applies and only runtime skips decide. The file is parsed here, at the edge, into a frozen
value; a bad file is a :class:`~draguard.harness.core.errors.UsageError` naming it and the field.
Talks to nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from draguard.harness.core.errors import UsageError

__all__ = ["CAPABILITIES", "Capabilities", "load_capabilities"]

CAPABILITIES: dict[str, str] = {
    "health-stream": "a health stream (healthStream)",
    "sharing-mps": "MPS sharing (sharingStrategies: [MPS])",
    "sharing-time-slicing": "time-slicing (sharingStrategies: [TimeSlicing])",
    "admin-access": "admin access (adminAccess)",
    "partitionable-devices": "partitionable devices (partitionableDevices)",
}
"""Capability name → what the driver declares for it, as the file spells it."""


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    health_stream: bool = Field(False, alias="healthStream")
    sharing_strategies: list[Literal["TimeSlicing", "MPS"]] = Field(default_factory=list, alias="sharingStrategies")
    admin_access: bool = Field(False, alias="adminAccess")
    partitionable_devices: bool = Field(False, alias="partitionableDevices")


@dataclass(frozen=True)
class Capabilities:
    """The declared capabilities of one driver; anything not declared is not supported."""

    declared: frozenset[str]
    source: str = "given in code"

    def declares(self, capability: str) -> bool:
        return capability in self.declared

    @staticmethod
    def describe(capability: str) -> str:
        return CAPABILITIES.get(capability, capability)

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.source, "declared": sorted(self.declared)}


def load_capabilities(path: Path) -> Capabilities:
    """Read ``--capabilities FILE`` (YAML or JSON); :class:`UsageError` naming the file and field."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"--capabilities {path}: cannot read it: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else YAML(typ="safe").load(text)
    except (ValueError, YAMLError) as exc:
        raise UsageError(f"--capabilities {path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: "
                         f"{str(exc).splitlines()[0]}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"--capabilities {path}: expected a mapping of capabilities (healthStream, "
                         f"sharingStrategies, adminAccess, partitionableDevices), got {type(data).__name__}")
    try:
        f = _File.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise UsageError(f"--capabilities {path}: {field}: {err['msg']} (known fields: healthStream, "
                         "sharingStrategies, adminAccess, partitionableDevices)") from exc
    declared = {name for name, on in (("health-stream", f.health_stream), ("admin-access", f.admin_access),
                                       ("partitionable-devices", f.partitionable_devices)) if on}
    declared |= {"sharing-mps" if s == "MPS" else "sharing-time-slicing" for s in f.sharing_strategies}
    return Capabilities(frozenset(declared), str(path))
