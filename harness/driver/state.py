"""Simulated hardware state of the fake driver: device states, claim records and the checkpoint.

Every device is ``free``, ``prepared``, ``resetting`` or ``failed``; a device that is not free names
the claim that holds it. Claims move ``PrepareStarted`` -> ``PrepareCompleted`` ->
``UnprepareStarted`` -> forgotten. The checkpoint (``<plugins>/<driver>/checkpoint.json``) holds
both tables and is replaced atomically (temporary file, fsync, rename), so a ``kill -9`` or a power
loss at any point leaves either the old or the new version, never a mix; the driver syncs the
directory once per call before it replies (:meth:`Checkpoint.save`, :func:`sync_dir`), so what a
reply reports survives a power loss too.

The no-leak rule that the runner and the tests check (:meth:`Checkpoint.leaks`): every device is
free or held by a claim that is in the checkpoint, and no device is held by two claims.
:func:`read_checkpoint` is the inspection API for other processes; it never writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from draguard.harness.core import jsonfast
from draguard.harness.core.errors import HarnessError
from draguard.harness.core.fsio import Sync, atomic_write
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

__all__ = [
    "DeviceState",
    "ClaimState",
    "PreparedDevice",
    "ClaimRecord",
    "DeviceRecord",
    "Checkpoint",
    "CHECKPOINT_VERSION",
    "CheckpointDamaged",
    "checkpoint_path",
    "read_checkpoint",
]

CHECKPOINT_VERSION = 1


class DeviceState(str, Enum):
    FREE = "free"
    PREPARED = "prepared"
    RESETTING = "resetting"
    FAILED = "failed"


class ClaimState(str, Enum):
    PREPARE_STARTED = "PrepareStarted"
    PREPARE_COMPLETED = "PrepareCompleted"
    UNPREPARE_STARTED = "UnprepareStarted"


@dataclass
class PreparedDevice:
    """One device of a claim, as NodePrepareResources returns it."""

    requests: list[str]
    pool: str
    device: str
    cdi_device_ids: list[str] = field(default_factory=list)


@dataclass
class ClaimRecord:
    uid: str
    namespace: str
    name: str
    state: ClaimState
    devices: list[PreparedDevice] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"uid": self.uid, "namespace": self.namespace, "name": self.name, "state": self.state.value,
                "devices": [{"requests": list(d.requests), "pool": d.pool, "device": d.device,
                             "cdi_device_ids": list(d.cdi_device_ids)} for d in self.devices]}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ClaimRecord:
        return cls(
            uid=d["uid"],
            namespace=d["namespace"],
            name=d["name"],
            state=ClaimState(d["state"]),
            devices=[PreparedDevice(**x) for x in d.get("devices", [])],
        )


@dataclass
class DeviceRecord:
    state: DeviceState = DeviceState.FREE
    claim: str | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state.value, "claim": self.claim, "message": self.message}


class CheckpointDamaged(HarnessError):
    """The checkpoint file exists and was read, but is not a checkpoint (truncated, garbled, another version)."""


@dataclass
class Checkpoint:
    """The driver's whole persistent state; devices absent from ``devices`` are free."""

    driver: str
    node: str
    claims: dict[str, ClaimRecord] = field(default_factory=dict)
    devices: dict[str, DeviceRecord] = field(default_factory=dict)

    # -- queries ---------------------------------------------------------------------------
    def device(self, name: str) -> DeviceRecord:
        return self.devices.setdefault(name, DeviceRecord())

    def held_by(self, uid: str) -> list[str]:
        """Devices whose record names ``uid`` as holder (in any non-free state)."""
        return [n for n, r in self.devices.items() if r.claim == uid and r.state is not DeviceState.FREE]

    def device_states(self) -> dict[str, DeviceState]:
        return {n: r.state for n, r in self.devices.items()}

    def leaks(self) -> list[str]:
        """Violations of the no-leak rule, one sentence each; empty when nothing is lost."""
        problems = []
        for name, rec in sorted(self.devices.items()):
            if rec.state is DeviceState.FREE:
                continue
            if rec.claim is None:
                problems.append(f"device {name} is {rec.state.value} but held by no claim")
            elif rec.claim not in self.claims:
                problems.append(f"device {name} is {rec.state.value} for claim {rec.claim}, which the driver forgot")
        owners: dict[str, list[str]] = {}
        for uid, claim in self.claims.items():
            for dev in {d.device for d in claim.devices}:
                owners.setdefault(dev, []).append(uid)
        for dev, uids in sorted(owners.items()):
            if len(uids) > 1:
                problems.append(f"device {dev} is handed to {len(uids)} claims: {', '.join(sorted(uids))}")
        return problems

    # -- (de)serialisation ------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "version": CHECKPOINT_VERSION,
            "driver": self.driver,
            "node": self.node,
            "claims": {uid: c.to_json() for uid, c in sorted(self.claims.items())},
            "devices": {n: r.to_json() for n, r in sorted(self.devices.items())},
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Checkpoint:
        if d.get("version") != CHECKPOINT_VERSION:
            raise ValueError(f"unsupported checkpoint version {d.get('version')!r}")
        return cls(
            driver=d["driver"],
            node=d["node"],
            claims={uid: ClaimRecord.from_json(c) for uid, c in d.get("claims", {}).items()},
            devices={
                n: DeviceRecord(DeviceState(r["state"]), r.get("claim"), r.get("message", ""))
                for n, r in d.get("devices", {}).items()
            },
        )

    @classmethod
    def load(cls, path: Path, driver: str, node: str) -> Checkpoint:
        """The checkpoint at ``path``, or an empty one; a damaged file is an error, never reset silently."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(driver=driver, node=node)
        except OSError as exc:
            raise HarnessError(f"{path}: cannot read checkpoint: {exc.strerror or exc}") from exc
        try:
            return cls.from_json(jsonfast.loads(raw))
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointDamaged(
                f"{path}: checkpoint is damaged ({exc}); move it away to start with every device free"
            ) from exc

    def save(self, path: Path, crash: Callable[[str], None] | None = None, sync: Sync = "full") -> None:
        """Replace the checkpoint at ``path``. ``sync="file"`` leaves the directory sync to the caller
        (the driver syncs it once per call, :func:`sync_dir`, rather than once per write)."""
        # Compact JSON (an indented checkpoint took json's pure-Python encoder, a tenth of a fake
        # prepare's CPU): see jsonfast.
        atomic_write(path, jsonfast.dumps(self.to_json()), crash=crash, point="checkpoint", sync=sync)


def checkpoint_path(root: str | Path, node: str, driver: str = DEFAULT_DRIVER) -> Path:
    return NodeDirs(Path(root), node).plugin_dir(driver) / "checkpoint.json"


def read_checkpoint(root: str | Path, node: str, driver: str = DEFAULT_DRIVER) -> Checkpoint:
    """The prepared claims and device states of one node's fake driver, as last written to disk.

    Safe to call while the driver runs: the file is only ever replaced by rename.
    """
    return Checkpoint.load(checkpoint_path(root, node, driver), driver, node)
