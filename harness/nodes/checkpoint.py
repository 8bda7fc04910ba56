"""The node agent's checkpoint: which claims it prepared on a node, for which pods.

Like the kubelet's ``dra_manager_state``, the file ``<root>/<node>/dra_manager_state.json`` is written
before each NodePrepareResources call (with the pod reference) and after it (with the prepared flag),
so that a restarted agent neither leaks a claim nor prepares one twice. Writes are crash-safe: a
temporary file, fsync, rename, fsync of the directory. Only :mod:`.manager` writes it; anyone may read it.

Format (version 1)::

    {"version": 1, "node": "n1", "claims": {"<claim uid>": {
        "name": "...", "namespace": "...", "driver": "<first driver>", "pods": ["<pod uid>", ...],
        "prepared": true, "drivers": {"<driver>": {"sent": true, "prepared": true, "devices": [...]}}}}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draguard.harness.core import jsonfast
from draguard.harness.core.fsio import atomic_write
from draguard.harness.core.errors import HarnessError

__all__ = ["ClaimRecord", "DriverState", "Checkpoint", "CHECKPOINT_FILE"]

CHECKPOINT_FILE = "dra_manager_state.json"


@dataclass
class DriverState:
    """What one driver did for a claim: ``sent`` once a prepare call went out, ``prepared`` after success."""

    sent: bool = False
    prepared: bool = False
    devices: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ClaimRecord:
    """A claim known to the node: the pods using it here and its state per driver."""

    uid: str
    name: str
    namespace: str
    pods: set[str] = field(default_factory=set)
    drivers: dict[str, DriverState] = field(default_factory=dict)

    @property
    def prepared(self) -> bool:
        return bool(self.drivers) and all(d.prepared for d in self.drivers.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "driver": next(iter(self.drivers), ""),
            "pods": sorted(self.pods),
            "prepared": self.prepared,
            "drivers": {
                d: {"sent": s.sent, "prepared": s.prepared, "devices": s.devices} for d, s in self.drivers.items()
            },
        }

    @classmethod
    def from_json(cls, uid: str, data: dict[str, Any]) -> ClaimRecord:
        drivers = {
            d: DriverState(bool(s.get("sent")), bool(s.get("prepared")), list(s.get("devices", [])))
            for d, s in data.get("drivers", {}).items()
        }
        if not drivers and data.get("driver"):
            drivers[data["driver"]] = DriverState(True, bool(data.get("prepared")), [])
        return cls(uid, data.get("name", ""), data.get("namespace", ""), set(data.get("pods", [])), drivers)


class Checkpoint:
    """The claims of one node, loaded from and saved to ``path``. Not thread-safe: the manager locks."""

    def __init__(self, path: Path, node: str) -> None:
        self.path = path
        self.node = node
        self.claims: dict[str, ClaimRecord] = {}

    def load(self) -> Checkpoint:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return self
        try:
            data = jsonfast.loads(raw)
            self.claims = {uid: ClaimRecord.from_json(uid, c) for uid, c in data.get("claims", {}).items()}
        except (ValueError, AttributeError, TypeError) as exc:
            raise HarnessError(f"{self.path}: corrupt checkpoint: {exc}") from exc
        return self

    def save(self) -> None:
        data = {"version": 1, "node": self.node, "claims": {u: c.to_json() for u, c in sorted(self.claims.items())}}
        # Compact, encoded at once (an indented json.dump cost 1.0 ms of CPU a save at 10 claims, json's
        # compact encoder 0.4): see jsonfast. Temporary file, fsync, rename, fsync of the directory.
        atomic_write(self.path, jsonfast.dumps(data, sort_keys=True), sync="full")

    @staticmethod
    def read(path: Path) -> dict[str, Any]:
        """The checkpoint's claims as plain JSON (for tests, invariants and reports); empty if absent."""
        try:
            claims: dict[str, Any] = jsonfast.loads(path.read_bytes()).get("claims", {})
            return claims
        except FileNotFoundError:
            return {}
