"""Device truth: the state of a fake node's accelerators as the hardware (and NVML) would report it.

The fake driver keeps its own books (its checkpoint); a buggy driver's books can look clean while
the hardware is not. This module is the hardware: one file per node,
``<root>/<node>/devices/truth.json``, shared by the processes that touch the devices and read by
the runner. Each device records:

- ``health`` (whether the hardware works) and what the hardware raised: ``xids`` (the Xid events
  since the device was last repaired), ``eccUncorrected`` (uncorrectable ECC errors) and ``lost`` (fallen
  off the bus: NVML cannot reach it);
- the ``reset`` state (``clean``: reset since its last user; ``dirty``: a container
  used it and no reset followed; ``failed``: the last reset failed) with the claims that used it
  since the last reset (``usedBy``);
- the ``containers`` running on it (pod, claim, process id, memory in use);
- its MIG-like ``partitions`` (on a parent: the partition devices created on it);
- its ``sharing`` state (``TimeSlicing`` or ``MPS``, and the claim that configured it).

Plus ``incidents``: things the hardware saw happen that can never be right (a container started
on a device still dirty from another claim, containers of two claims on one unshared device, a
reset of a device in use, a container that could not get its device). They stay in the file, so
an invariant judging a later snapshot still sees them.

Writers take an exclusive ``flock`` on ``devices/.lock``, read, change, and replace the file
atomically; readers just read (a rename is atomic). The file is not synced to disk: it is the
hardware's state, which a power loss of the machine ends anyway (the lock and the rename are what
keep the processes that share it consistent). Who writes what:

- the runner (or the driver, if absent) installs the devices: the hardware exists before any driver;
- the fake driver, only through :class:`~.nvml.FakeNvml` (reset, partition, configure sharing);
- the fake node agent, through :meth:`DeviceTruth.start_container` / :meth:`stop_containers`, as a
  container runtime; on a hollow kubelet's node its device-truth feed, which stops containers one by
  one (:meth:`DeviceTruth.stop_container`).
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from draguard.harness.core import jsonfast
from draguard.harness.core.errors import HarnessError
from draguard.harness.core.fsio import atomic_write

__all__ = [
    "TRUTH_FILE",
    "ResetState",
    "IncidentKind",
    "InstalledDevice",
    "ContainerRecord",
    "DeviceRecord",
    "Incident",
    "NodeTruth",
    "DeviceTruth",
    "HardwareFault",
    "HardwareFaultKind",
    "HARDWARE_FAULTS",
    "APPLICATION_XIDS",
    "truth_dir",
    "installed_devices",
    "quantity_bytes",
]

TRUTH_VERSION = 1
TRUTH_FILE = "truth.json"
MAX_INCIDENTS = 1000

ResetState = Literal["clean", "dirty", "resetting", "failed"]
IncidentKind = Literal[
    "dirty-handoff",  # a container started on a device another claim used and no reset followed
    "shared-without-sharing",  # containers of two claims on one device that allows no sharing
    "reset-in-use",  # a reset was attempted while containers ran on the device
    "container-failed",  # a container could not be created (its CDI devices did not resolve)
    "unhealthy-in-use",  # a container started on a device whose last reset failed, or that is unhealthy
    "unshared-pods",  # containers of several pods on one device with no sharing set up on it
]


HardwareFaultKind = Literal["fallen-off-bus", "ecc", "xid"]
HARDWARE_FAULTS: Mapping[str, str] = {
    "fallen-off-bus": "the GPU falls off the bus (Xid 79): NVML can no longer reach it",
    "ecc": "an uncorrectable (double-bit) ECC error in the GPU's memory (Xid 48)",
    "xid": "the GPU raises the given Xid error",
}
"""The failures a fake node's hardware can raise (the ``device-failure`` fault's ``kind``)."""

APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68})
"""Xid errors caused by the application, after which the GPU still works: Graphics Engine Exception (13),
GPU memory page fault (31), GPU stopped processing (43), preemptive cleanup after earlier errors (45),
video processor exception (68). NVIDIA's device plugin skips exactly these in its health check
(NVIDIA/k8s-device-plugin, internal/rm/health.go, ``applicationErrorXids``; the meanings are NVIDIA's Xid
catalogue, docs.nvidia.com/deploy/xid-errors). Any other Xid leaves the GPU in doubt: a health check
reports it unhealthy."""


@dataclass(frozen=True)
class HardwareFault:
    """What the hardware of one device raises: the device truth records it, NVML reports it."""

    kind: HardwareFaultKind
    xid: int
    message: str

    @property
    def breaks(self) -> bool:
        """Whether the device no longer works (an application's Xid leaves it working)."""
        return self.kind != "xid" or self.xid not in APPLICATION_XIDS

    @classmethod
    def of(cls, kind: HardwareFaultKind, xid: int | None = None, message: str | None = None) -> HardwareFault:
        """The fault of ``kind``: fallen off the bus is Xid 79, an uncorrectable ECC error Xid 48 (a
        double-bit error), ``xid`` the given one (required)."""
        if kind == "xid":
            if xid is None:
                raise HarnessError("a hardware fault of kind xid needs its Xid number")
            code = xid
            default = f"Xid {xid}" + (" (an application error: the GPU still works)" if xid in APPLICATION_XIDS else "")
        else:
            code = 79 if kind == "fallen-off-bus" else 48
            default = ("Xid 79: GPU has fallen off the bus" if kind == "fallen-off-bus"
                       else "Xid 48: uncorrectable (double-bit) ECC error")
        return cls(kind, code, message or default)


def truth_dir(root: Path, node: str) -> Path:
    return Path(root) / node / "devices"


@dataclass(frozen=True)
class InstalledDevice:
    """A device as it is installed in the machine (from the node's topology)."""

    name: str
    uuid: str
    kind: str = "gpu"
    parent: str | None = None
    memory_bytes: int = 0
    allow_multiple: bool = False
    """The device may serve several claims at once (consumable capacity)."""


@dataclass(frozen=True)
class ContainerRecord:
    id: str
    """``<pod uid>/<container name>``."""
    pod: str
    """``namespace/name`` of the pod."""
    claims: tuple[str, ...]
    """UIDs of the claims through which the container got the device."""
    pid: int
    memory_bytes: int


@dataclass(frozen=True)
class DeviceRecord:
    name: str
    uuid: str
    kind: str = "gpu"
    parent: str | None = None
    memory_total: int = 0
    allow_multiple: bool = False
    dev_path: str = ""
    health: Literal["healthy", "unhealthy"] = "healthy"
    health_message: str = ""
    reset: ResetState = "clean"
    reset_error: str = ""
    used_by: tuple[str, ...] = ()
    """Claims whose containers used the device since its last successful reset."""
    containers: tuple[ContainerRecord, ...] = ()
    partitions: tuple[str, ...] = ()
    sharing: str | None = None
    sharing_claim: str | None = None
    xids: tuple[int, ...] = ()
    """The Xid errors the device raised since it was last repaired, in order."""
    ecc_uncorrected: int = 0
    """Uncorrectable ECC errors counted since it was last repaired (NVML's volatile count)."""
    lost: bool = False
    """Fallen off the bus: NVML cannot reach the device (``NVML_ERROR_GPU_IS_LOST``)."""

    @property
    def processes(self) -> tuple[int, ...]:
        return tuple(c.pid for c in self.containers)

    @property
    def memory_used(self) -> int:
        return sum(c.memory_bytes for c in self.containers)

    @property
    def running_claims(self) -> frozenset[str]:
        return frozenset(u for c in self.containers for u in c.claims)

    def to_json(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "kind": self.kind,
            "parent": self.parent,
            "memoryTotal": self.memory_total,
            "allowMultiple": self.allow_multiple,
            "devPath": self.dev_path,
            "health": self.health,
            "healthMessage": self.health_message,
            "reset": self.reset,
            "resetError": self.reset_error,
            "usedBy": list(self.used_by),
            "containers": [
                {"id": c.id, "pod": c.pod, "claims": list(c.claims), "pid": c.pid, "memory": c.memory_bytes}
                for c in self.containers
            ],
            "partitions": list(self.partitions),
            "sharing": {"strategy": self.sharing, "claim": self.sharing_claim} if self.sharing else None,
            "xids": list(self.xids),
            "eccUncorrected": self.ecc_uncorrected,
            "lost": self.lost,
        }

    @classmethod
    def from_json(cls, name: str, d: Mapping[str, Any]) -> DeviceRecord:
        sharing = d.get("sharing") or {}
        return cls(
            name=name,
            uuid=str(d.get("uuid", "")),
            kind=str(d.get("kind", "gpu")),
            parent=d.get("parent"),
            memory_total=int(d.get("memoryTotal", 0)),
            allow_multiple=bool(d.get("allowMultiple", False)),
            dev_path=str(d.get("devPath", "")),
            health="unhealthy" if d.get("health") == "unhealthy" else "healthy",
            health_message=str(d.get("healthMessage", "")),
            reset=d.get("reset", "clean"),
            reset_error=str(d.get("resetError", "")),
            used_by=tuple(d.get("usedBy", ())),
            containers=tuple(
                ContainerRecord(c["id"], c.get("pod", ""), tuple(c.get("claims", ())), int(c.get("pid", 0)),
                                int(c.get("memory", 0)))  # fmt: skip
                for c in d.get("containers", ())
            ),
            partitions=tuple(d.get("partitions", ())),
            sharing=sharing.get("strategy"),
            sharing_claim=sharing.get("claim"),
            xids=tuple(int(x) for x in d.get("xids") or ()),
            ecc_uncorrected=int(d.get("eccUncorrected", 0)),
            lost=bool(d.get("lost", False)),
        )


@dataclass(frozen=True)
class Incident:
    kind: IncidentKind
    device: str
    message: str
    claims: tuple[str, ...] = ()
    pod: str = ""
    time: float = 0.0
    """Wall-clock time (seconds since the epoch)."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "device": self.device, "message": self.message, "claims": list(self.claims),
                "pod": self.pod, "time": self.time}  # fmt: skip

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Incident:
        return cls(d["kind"], d.get("device", ""), d.get("message", ""), tuple(d.get("claims", ())), d.get("pod", ""),
                   float(d.get("time", 0.0)))  # fmt: skip


@dataclass(frozen=True)
class NodeTruth:
    """One node's devices as the hardware reports them, at one moment."""

    node: str
    devices: Mapping[str, DeviceRecord] = field(default_factory=dict)
    incidents: tuple[Incident, ...] = ()
    recorded: bool = True
    """Whether draguard's runtime records this node's containers and their incidents here (the fake node
    agent, a hollow kubelet's device-truth feed); False for a real node's truth as an installed fleet reads
    it (:mod:`draguard.harness.fleet.installed`): containerd runs the containers and says what it could not
    do in the pods' statuses, and the incidents are what the fleet saw of the run's containers. Not stored."""

    def by_path(self) -> dict[str, str]:
        """Device node path on the host -> device name."""
        return {d.dev_path: n for n, d in self.devices.items() if d.dev_path}

    def to_json(self) -> dict[str, Any]:
        return {
            "version": TRUTH_VERSION,
            "node": self.node,
            "devices": {n: d.to_json() for n, d in sorted(self.devices.items())},
            "incidents": [i.to_json() for i in self.incidents],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> NodeTruth:
        if d.get("version") != TRUTH_VERSION:
            raise ValueError(f"unsupported device truth version {d.get('version')!r}")
        return cls(
            node=str(d.get("node", "")),
            devices={n: DeviceRecord.from_json(n, r) for n, r in (d.get("devices") or {}).items()},
            incidents=tuple(Incident.from_json(i) for i in d.get("incidents") or ()),
        )


class _Draft:
    """A mutable copy of the truth inside one locked update."""

    def __init__(self, truth: NodeTruth) -> None:
        self.node = truth.node
        self.devices: dict[str, DeviceRecord] = dict(truth.devices)
        self.incidents: list[Incident] = list(truth.incidents)

    def get(self, name: str) -> DeviceRecord:
        try:
            return self.devices[name]
        except KeyError:
            raise HarnessError(f"node {self.node}: no device {name!r} is installed") from None

    def put(self, rec: DeviceRecord) -> None:
        self.devices[rec.name] = rec

    def incident(self, kind: IncidentKind, device: str, message: str, claims: Iterable[str] = (), pod: str = "") -> None:
        self.incidents.append(Incident(kind, device, message, tuple(sorted(set(claims))), pod, time.time()))
        del self.incidents[:-MAX_INCIDENTS]

    def freeze(self) -> NodeTruth:
        return NodeTruth(self.node, dict(self.devices), tuple(self.incidents))


def _pid(container_id: str, device: str) -> int:
    return 1000 + int(hashlib.sha256(f"{container_id}@{device}".encode()).hexdigest()[:6], 16) % 4_000_000


class DeviceTruth:
    """The device truth file of one node: locked updates, lock-free reads."""

    def __init__(self, root: str | Path, node: str) -> None:
        self.root = Path(root)
        self.node = node
        self.dir = truth_dir(self.root, node)
        self.path = self.dir / TRUTH_FILE
        self.lock_path = self.dir / ".lock"
        self.dev_dir = self.dir / "dev"
        self._parsed: tuple[bytes, NodeTruth] | None = None
        """The last content read or written and what it parses to: the driver and the agent read the
        file several times per call, mostly unchanged, and parsing costs ten times reading."""

    # -- reading ------------------------------------------------------------------------------
    @property
    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> NodeTruth:
        """The truth as last written; an empty one when no device was installed yet."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return NodeTruth(self.node)
        except OSError as exc:
            raise HarnessError(f"{self.path}: cannot read device truth: {exc.strerror or exc}") from exc
        parsed = self._parsed
        if parsed is not None and parsed[0] == raw:  # the same bytes: the same truth (a NodeTruth is never changed)
            return parsed[1]
        try:
            truth = NodeTruth.from_json(jsonfast.loads(raw))
        except (ValueError, KeyError, TypeError) as exc:
            raise HarnessError(f"{self.path}: device truth is damaged: {exc}") from exc
        self._parsed = (raw, truth)
        return truth

    # -- writing ------------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[_Draft]:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                before = self.read()
                draft = _Draft(before)
                draft.node = self.node
                yield draft
                after = draft.freeze()
                if after != before or not self.path.exists():
                    data = jsonfast.dumps(after.to_json())  # compact: an indented write cost five times more
                    atomic_write(self.path, data, point="truth", sync="none")
                    self._parsed = (data, after)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def update(self, fn: Callable[[_Draft], Any]) -> Any:
        with self._locked() as draft:
            return fn(draft)

    def install(self, devices: Sequence[InstalledDevice]) -> None:
        """Put devices into the machine (idempotent: installed devices keep their state).

        Each gets a device file ``devices/dev/<name>``, the node a container runtime hands in.
        """
        self.dev_dir.mkdir(parents=True, exist_ok=True)
        with self._locked() as draft:
            for d in devices:
                dev = self.dev_dir / d.name
                if not dev.exists():
                    dev.write_text(f"{d.uuid}\n")
                old = draft.devices.get(d.name)
                if old is None:
                    draft.put(DeviceRecord(d.name, d.uuid, d.kind, d.parent, d.memory_bytes, d.allow_multiple,
                                           str(dev.absolute())))  # fmt: skip

    def set_health(self, device: str, message: str | None) -> None:
        """The hardware fails ``device`` (an XID error, a GPU fallen off the bus: ``message``) or, with
        None, it is repaired. What a driver's health check sees through NVML; its reset state is kept."""

        def change(draft: _Draft) -> None:
            rec = draft.get(device)
            draft.put(_replace(rec, health="unhealthy" if message else "healthy", health_message=message or ""))

        self.update(change)

    def raise_fault(self, device: str, fault: HardwareFault) -> None:
        """The hardware of ``device`` raises ``fault``: its Xid is recorded (an ECC error counted, a fallen
        GPU marked lost), and unless it is an application's Xid the device no longer works."""

        def change(draft: _Draft) -> None:
            rec = draft.get(device)
            broken = fault.breaks or rec.health == "unhealthy"
            draft.put(_replace(rec, xids=(*rec.xids, fault.xid)[-32:],
                               ecc_uncorrected=rec.ecc_uncorrected + (fault.kind == "ecc"),
                               lost=rec.lost or fault.kind == "fallen-off-bus",
                               health="unhealthy" if broken else "healthy",
                               health_message=fault.message if fault.breaks else rec.health_message))

        self.update(change)

    def repair(self, device: str) -> None:
        """The device is repaired (replaced, or the node rebooted): healthy, no Xid, no ECC count, reachable."""

        def change(draft: _Draft) -> None:
            draft.put(_replace(draft.get(device), health="healthy", health_message="", xids=(), ecc_uncorrected=0,
                               lost=False))

        self.update(change)

    # -- the container runtime's side (the fake node agent) ---------------------------------------
    def start_container(
        self, container_id: str, pod: str, claims: Sequence[str], devices: Sequence[str]
    ) -> list[Incident]:
        """A container starts with ``devices``: record it, and any incident the hardware sees."""
        claims_t = tuple(sorted(set(claims)))

        def change(draft: _Draft) -> list[Incident]:
            before = len(draft.incidents)
            for name in devices:
                rec = draft.get(name)
                if any(c.id == container_id for c in rec.containers):
                    continue
                others = sorted(rec.running_claims - set(claims_t))
                if others and not rec.allow_multiple:
                    draft.incident("shared-without-sharing", name,
                                   f"container {container_id} of pod {pod} (claim {', '.join(claims_t)}) started on "
                                   f"{name} while containers of claim {', '.join(others)} run there, and the device "
                                   "allows no sharing", others + list(claims_t), pod)  # fmt: skip
                stale = sorted(set(rec.used_by) - set(claims_t) - rec.running_claims)
                if stale and not rec.allow_multiple:
                    draft.incident("dirty-handoff", name,
                                   f"container {container_id} of pod {pod} (claim {', '.join(claims_t)}) got {name}, "
                                   f"which claim {', '.join(stale)} used and no reset followed",
                                   stale + list(claims_t), pod)  # fmt: skip
                mates = [c for c in rec.containers if set(c.claims) & set(claims_t)]
                pods = {c.id.split("/")[0] for c in mates} - {container_id.split("/")[0]}
                if pods and not rec.sharing and not rec.allow_multiple:
                    names = sorted({c.pod for c in mates} | {pod})
                    draft.incident("unshared-pods", name,
                                   f"{name} runs containers of {len(pods) + 1} pods ({', '.join(names)}) with no sharing "
                                   "strategy set up on it", claims_t, pod)  # fmt: skip
                if rec.reset == "failed":
                    draft.incident("unhealthy-in-use", name,
                                   f"container {container_id} of pod {pod} started on {name}, whose last reset failed "
                                   f"({rec.reset_error})", claims_t, pod)  # fmt: skip
                elif rec.health == "unhealthy":
                    draft.incident("unhealthy-in-use", name,
                                   f"container {container_id} of pod {pod} started on {name}, which the hardware "
                                   f"reports unhealthy ({rec.health_message})", claims_t, pod)  # fmt: skip
                memory = rec.memory_total // 8 if rec.memory_total else 0
                container = ContainerRecord(container_id, pod, claims_t, _pid(container_id, name), memory)
                draft.put(_replace(rec, containers=rec.containers + (container,),
                                   used_by=tuple(sorted(set(rec.used_by) | set(claims_t))),
                                   reset="dirty" if rec.reset == "clean" else rec.reset))  # fmt: skip
            return draft.incidents[before:]

        result: list[Incident] = self.update(change)
        return result

    def stop_containers(self, pod_uid: str) -> list[str]:
        """The pod's containers exit: their processes end and their memory is freed; the devices stay
        dirty until a reset. Returns the devices they were on."""
        prefix = f"{pod_uid}/"
        return self._stop(lambda cid: cid.startswith(prefix))

    def stop_container(self, container_id: str) -> list[str]:
        """One container (``<pod uid>/<container name>``) exits, as :meth:`stop_containers` has a pod's."""
        return self._stop(lambda cid: cid == container_id)

    def _stop(self, stops: Callable[[str], bool]) -> list[str]:
        # Nothing to stop in the truth as last written: no lock, no rewrite. A container is started only
        # by the one that stops it (the node's runtime, one pod at a time), so none can appear meanwhile;
        # the fake nodes ask to stop a pod's containers twice (when it is deleted, again once it is gone).
        if not any(stops(c.id) for rec in self.read().devices.values() for c in rec.containers):
            return []

        def change(draft: _Draft) -> list[str]:
            touched = []
            for name, rec in list(draft.devices.items()):
                kept = tuple(c for c in rec.containers if not stops(c.id))
                if len(kept) != len(rec.containers):
                    touched.append(name)
                    draft.put(_replace(rec, containers=kept))
            return touched

        result: list[str] = self.update(change)
        return result

    def container_failed(self, pod: str, message: str, claims: Sequence[str] = ()) -> None:
        """A container could not be created (e.g. its CDI devices did not resolve)."""
        self.update(lambda draft: draft.incident("container-failed", "", message, claims, pod))


def _replace(rec: DeviceRecord, **changes: Any) -> DeviceRecord:
    return replace(rec, **changes)


_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}  # fmt: skip


def quantity_bytes(quantity: str) -> int:
    """``81559Mi`` -> bytes (0 when it is not a plain quantity)."""
    m = re.match(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$", quantity.strip())
    if not m:
        return 0
    return int(float(m.group(1)) * _UNITS[m.group(2) or ""])


def installed_devices(inventory: Any) -> list[InstalledDevice]:
    """The devices of a fake driver :class:`~draguard.harness.driver.topology.Inventory`."""
    return [
        InstalledDevice(d.name, d.uuid, d.kind, d.parent, quantity_bytes(str(d.capacity.get("memory", "0"))),
                        bool(getattr(d, "allow_multiple", False)))  # fmt: skip
        for d in inventory.devices
    ]
