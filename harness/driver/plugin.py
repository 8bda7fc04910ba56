"""The fake driver's behaviour: NodePrepareResources and NodeUnprepareResources on simulated devices.

:class:`FakeDriver` owns the checkpoint (:mod:`.state`), writes CDI specs (:mod:`draguard.harness.cdi`),
changes the devices only through NVML-like calls (:mod:`draguard.harness.devices.nvml`), asks fault
control (:mod:`.faults`) where a fault may strike and follows the active mutant (:mod:`.mutants`).
It reads ResourceClaims through a :class:`ClaimReader` (the API server via ``Kube`` in the driver
process). The gRPC layer (:mod:`.service`) only converts messages.

The correct driver:

* prepare reads the claim, checks UID, driver, pool (= this node) and device names, reserves the
  devices (``PrepareStarted``), writes the CDI spec, then records ``PrepareCompleted``; a second
  prepare returns the same devices; a prepare that was in flight while the claim was unprepared
  is rejected as stale; a device another claim holds is never handed out twice (unless it is
  published with ``allowMultipleAllocations``); MIG-like devices get their partition created and a
  claim whose opaque config names ``sharing.strategy`` gets time-slicing or MPS set up;
* unprepare needs only the claim UID: it resets and drains each device (prepared -> resetting ->
  free), removes the CDI spec and forgets the claim only after every reset succeeded; a failed
  reset leaves the device ``failed``, keeps the claim and reports an error for that claim so the
  kubelet retries; an unknown claim is success;
* unprepare tears sharing down before the reset and destroys the partition after it;
* errors are per claim, never for the whole batch;
* no lock is held while a device resets: other claims are prepared meanwhile;
* each call starts from the checkpoint on disk when another instance wrote it (a rolling update: two
  instances share the plugin directory, and either may get a claim's next call);
* claims left in ``PrepareStarted`` by a crash are unprepared when their ResourceClaim is gone;
* every checkpoint write is synced before its rename, and the checkpoint's directory is synced once
  per call before the reply: what a reply reports survives a power loss (:data:`.state.Sync`).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .. import cdi
from ..devices.nvml import SHARING_STRATEGIES, FakeNvml, NvmlError
from ..devices.truth import APPLICATION_XIDS, DeviceTruth, installed_devices
from ..grpcapi.plugin import ClaimRef
from draguard.harness.core.errors import HarnessError
from draguard.harness.core.fsio import cleanup_temporaries, sync_dir
from draguard.harness.core.paths import NodeDirs
from draguard.harness.driver.fault_control import FaultControl
from .mutants import Mutant
from .state import (
    Checkpoint,
    CheckpointDamaged,
    ClaimRecord,
    ClaimState,
    DeviceRecord,
    DeviceState,
    PreparedDevice,
)
from .topology import DeviceInfo, Inventory

__all__ = ["ClaimReader", "ClaimRecovery", "KubeClaims", "CHECKPOINT_CORRUPTED", "PrepareResult", "DeviceHealth", "FakeDriver", "ClaimError", "BatchAborted"]


class ClaimReader(Protocol):
    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None: ...


@runtime_checkable
class ClaimRecovery(Protocol):
    """What a driver needs of the API to rebuild its books when its checkpoint is damaged: every claim,
    and a way to say so on a claim."""

    def list_claims(self) -> list[dict[str, Any]]: ...

    def warn(self, claim: dict[str, Any], reason: str, message: str, source: str) -> None: ...


class KubeClaims:
    """Reads ResourceClaims from the API server, and records Warning events on them."""

    def __init__(self, kube: Any) -> None:
        self.kube = kube

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        obj: dict[str, Any] | None = self.kube.get("ResourceClaim", name, namespace)
        return obj

    def list_claims(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.kube.items("ResourceClaim")
        return items

    def warn(self, claim: dict[str, Any], reason: str, message: str, source: str) -> None:
        md = claim["metadata"]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.kube.create({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{md['name']}.", "namespace": md["namespace"]},
            "involvedObject": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "name": md["name"],
                               "namespace": md["namespace"], "uid": md["uid"]},
            "reason": reason, "message": message[:1024], "type": "Warning", "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": source}, "reportingComponent": source,
        })  # fmt: skip


@dataclass
class PrepareResult:
    devices: list[PreparedDevice] = field(default_factory=list)
    error: str = ""


@dataclass(frozen=True)
class DeviceHealth:
    device: str
    healthy: bool
    message: str = ""


CHECKPOINT_CORRUPTED = "CheckpointCorrupted"
"""The reason of the Warning event on each claim rebuilt from the API after the checkpoint was found damaged
(the reason kubernetes-sigs/dra-driver-nvidia-gpu PR #1259 gives its event, for issue #1100)."""


class ClaimError(Exception):
    """Prepare or unprepare of one claim failed; the message goes into that claim's response."""


class BatchAborted(Exception):
    """The batch-abort-on-error mutant gave up on the whole request: the RPC itself fails."""


class FakeDriver:
    """Simulated devices of one node, prepared and unprepared for claims."""

    def __init__(
        self,
        *,
        driver: str,
        node: str,
        dirs: NodeDirs,
        inventory: Inventory,
        claims: ClaimReader,
        mutant: type[Mutant] = Mutant,
        faults: FaultControl | None = None,
        reset_seconds: float = 0.005,
        log: logging.Logger | None = None,
        node_root: Path | None = None,
        instance: str | None = None,
    ) -> None:
        self.driver = driver
        self.instance = instance
        """The pod UID of this instance in a rolling update (None: the only instance)."""
        self.node = node
        self.dirs = dirs
        self.inventory = inventory
        self.claims = claims
        self.mutant = mutant
        self.reset_seconds = reset_seconds
        self.log = log or logging.getLogger("draguard.driver")
        self.plugin_dir: Path = dirs.plugin_dir(driver)
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        # The node's hardware and its CDI directory are the machine's, not the plugin's: with the
        # interposer in front, the sockets live under another root than these.
        machine = NodeDirs(node_root, node) if node_root is not None else dirs
        self.cdi_dir: Path = machine.cdi
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        self.faults = faults or FaultControl(self.plugin_dir, self.log)
        self.nvml = FakeNvml(DeviceTruth(machine.root, node), reset_fails=self.faults.reset_fails)
        self.nvml.install(installed_devices(inventory))
        self.checkpoint_path = self.plugin_dir / "checkpoint.json"
        if instance and mutant.ignore_predecessor_claims:  # see mutants.IgnorePredecessorClaims
            self.checkpoint_path = self.plugin_dir / f"checkpoint-{instance}.json"
        cleanup_temporaries(self.plugin_dir, "checkpoint.json.")
        cleanup_temporaries(self.cdi_dir, f"{driver}-")
        try:
            self.cp = Checkpoint.load(self.checkpoint_path, driver, node)
        except CheckpointDamaged as exc:
            self.cp = self._recover(exc)
        unknown = sorted(set(self.cp.devices) - set(inventory.names))
        if unknown:
            self.log.warning("checkpoint names devices the topology does not publish: %s", ", ".join(unknown))
        self._stamp = self._file_stamp()
        """The checkpoint file as this instance last read or wrote it (:meth:`_refresh`)."""
        self._lock = threading.RLock()
        self._unpreparing: set[str] = set()  # claims whose devices are being reset (lock released)
        self._seq = 0
        self._saves = 0  # checkpoint writes so far; a call that made any syncs the directory before replying
        self._failed: tuple[int, dict[str, str]] = (-1, {})
        """(saves when taken, device -> message of each device whose reset failed): :meth:`unhealthy`."""
        self._reprepared = 0
        self._unprepared_at: collections.OrderedDict[str, int] = collections.OrderedDict()
        self.log.info(
            "loaded checkpoint: %d claims, %d devices not free",
            len(self.cp.claims),
            sum(1 for r in self.cp.devices.values() if r.state is not DeviceState.FREE),
        )

    # -- a damaged checkpoint -------------------------------------------------------------------
    def _recover(self, damage: CheckpointDamaged) -> Checkpoint:
        """Start from a damaged checkpoint: neither refuse to start nor forget a prepared claim silently.

        A driver that fails on it crash-loops before it can report why (kubernetes-sigs/dra-driver-nvidia-gpu
        #1100). This one keeps the damaged file beside the checkpoint for whoever investigates, rebuilds its
        books from the API (every claim allocated devices of this driver from this node's pool is held
        prepared, with the same CDI IDs and its CDI spec written again if it is gone), saves them, and
        records a Warning event ``CheckpointCorrupted`` on each rebuilt claim. Reading the claims comes
        first: when the API cannot answer, the driver fails to start and the damaged file stays in place
        for the next start; the copy is made before the rebuilt checkpoint replaces it. The discard-corrupt-checkpoint mutant starts with every device free and
        says nothing.
        """
        reader = self.claims if isinstance(self.claims, ClaimRecovery) else None
        objs = reader.list_claims() if reader is not None and not self.mutant.discard_corrupt_checkpoint else []
        aside = self.checkpoint_path.with_name(f"checkpoint.json.damaged-{time.time_ns()}")
        shutil.copyfile(self.checkpoint_path, aside)  # replaced below, atomically: a crash meanwhile recovers again
        cp = Checkpoint(driver=self.driver, node=self.node)
        rebuilt = []
        for obj in objs:
            rec = self._rebuilt(obj, cp)
            if rec is not None:
                rebuilt.append((obj, rec))
        cp.save(self.checkpoint_path)
        if self.mutant.discard_corrupt_checkpoint:
            self.log.info("checkpoint unreadable; starting with every device free")
            return cp
        self.log.error("%s; moved to %s; %d claim(s) rebuilt from the API: %s", damage, aside.name, len(rebuilt),
                       ", ".join(f"{r.namespace}/{r.name}" for _, r in rebuilt) or "none")  # fmt: skip
        for obj, rec in rebuilt:
            message = (f"{self.driver} on {self.node}: checkpoint was damaged; this claim's prepared devices "
                       f"({', '.join(d.device for d in rec.devices)}) were rebuilt from its allocation; the damaged file "
                       f"is kept as {aside.name} ({damage.__cause__ or damage})")
            try:
                assert reader is not None
                reader.warn(obj, CHECKPOINT_CORRUPTED, message, self.driver)
            except Exception as exc:  # the books are rebuilt either way; the log says what happened
                self.log.warning("could not record the %s event on %s/%s: %s", CHECKPOINT_CORRUPTED, rec.namespace,
                                 rec.name, exc)  # fmt: skip
        return cp

    def _rebuilt(self, obj: dict[str, Any], cp: Checkpoint) -> ClaimRecord | None:
        """The record of one claim allocated from this node's pool, put into ``cp`` with its devices held;
        None for a claim of other drivers or nodes, or not allocated."""
        md = obj.get("metadata") or {}
        allocation = (obj.get("status") or {}).get("allocation") or {}
        results = [r for r in (allocation.get("devices") or {}).get("results") or []
                   if r.get("driver") == self.driver and r.get("pool") == self.node]  # fmt: skip
        allocated = [(r, info) for r in results if (info := self.inventory.get(str(r.get("device")))) is not None]
        if not allocated or not md.get("uid"):
            return None
        uid = str(md["uid"])
        devices = [PreparedDevice([str(r.get("request", ""))], self.node, info.name,
                                  [cdi.claim_device_id(self.driver, uid, info.name)]) for r, info in allocated]  # fmt: skip
        rec = ClaimRecord(uid, str(md.get("namespace", "")), str(md.get("name", "")), ClaimState.PREPARE_COMPLETED, devices)
        cp.claims[uid] = rec
        for r, info in allocated:
            if not (r.get("adminAccess") or info.allow_multiple):
                cp.devices[info.name] = DeviceRecord(DeviceState.PREPARED, uid)
        self._ensure_cdi(ClaimRef(namespace=rec.namespace, name=rec.name, uid=uid), rec)
        return rec

    # -- helpers --------------------------------------------------------------------------------
    def _crash(self, point: str) -> None:
        self.faults.crash(point)

    def _save(self) -> None:
        # Synced before the rename, so never torn; the rename is made durable once per call (_commit),
        # not once per write: a prepare writes PrepareStarted and PrepareCompleted, and two directory
        # syncs cost as much again as the two writes.
        self.cp.save(self.checkpoint_path, crash=self._crash, sync="file")
        self._stamp = self._file_stamp()
        self._saves += 1

    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = self.checkpoint_path.stat()
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _refresh(self) -> None:
        """Read the checkpoint again when another instance wrote it (called under the lock at the start of a call).

        In a rolling update two instances of the driver share the plugin directory, and the kubelet may
        send a claim's prepare to one and its unprepare to the other, or fall back to the first: the
        kubeletplugin helper's RollingUpdate asks each instance to load the shared state at the start of
        a call and store it again at the end (k8s.io/dynamic-resource-allocation/kubeletplugin,
        draplugin.go). Every write here replaces the file by rename, so a file that is not the one this
        instance last wrote or read is another's. One stat per call; a file that cannot be read keeps the
        books in memory (logged)."""
        stamp = self._file_stamp()
        if stamp == self._stamp or stamp is None:
            return
        try:
            cp = Checkpoint.load(self.checkpoint_path, self.driver, self.node)
        except (CheckpointDamaged, HarnessError) as exc:
            self.log.warning("checkpoint changed on disk but cannot be read; keeping the books in memory: %s", exc)
            self._stamp = stamp
            return
        self.log.info("checkpoint written by another instance: %d claims (was %d)", len(cp.claims), len(self.cp.claims))
        self.cp, self._stamp = cp, stamp

    @contextlib.contextmanager
    def _call(self) -> Iterator[None]:
        """One DRA call: the checkpoint writes it made are durable before it returns (one directory sync)."""
        with self._lock:
            self._refresh()
        saves = self._saves
        try:
            yield
        finally:
            if self._saves != saves:  # another call's write may count here too: one sync more, never one less
                sync_dir(self.plugin_dir)

    def snapshot(self) -> Checkpoint:
        """A copy of the current state (for tests and the health stream)."""
        with self._lock:
            return Checkpoint.from_json(self.cp.to_json())

    def _conflict(self, uid: str, info: DeviceInfo) -> str | None:
        for name, rec in self.cp.devices.items():
            if rec.state is DeviceState.FREE or (rec.claim == uid and rec.claim is not None):
                continue
            other = self.inventory.get(name)
            other_units = other.units if other else frozenset([name])
            if info.units & other_units:
                holder = f"claim {rec.claim}" if rec.claim else "no claim"
                what = "it" if name == info.name else f"overlapping device {name}"
                return f"device {info.name} is not available: {what} is {rec.state.value} for {holder}"
        return None

    # -- prepare --------------------------------------------------------------------------------
    def prepare(self, refs: Sequence[ClaimRef]) -> dict[str, PrepareResult]:
        """Prepare each claim; every claim gets a result, failures are per claim."""
        with self._lock:
            start = self._seq
        with self._call():
            return self._prepare_all(refs, start)

    def _prepare_all(self, refs: Sequence[ClaimRef], start: int) -> dict[str, PrepareResult]:
        out: dict[str, PrepareResult] = {}
        for ref in refs:
            try:
                out[ref.uid] = PrepareResult(devices=self._prepare_one(ref, start))
                self.log.info("prepared %s: %s", ref, ", ".join(d.device for d in out[ref.uid].devices))
            except ClaimError as exc:
                self.log.warning("prepare %s failed: %s", ref, exc)
                out[ref.uid] = PrepareResult(error=str(exc))
            except Exception as exc:  # a bug or an I/O error: still only this claim fails
                self.log.exception("prepare %s failed unexpectedly", ref)
                out[ref.uid] = PrepareResult(error=f"internal error preparing {ref}: {exc}")
            if self.mutant.abort_batch_on_error and out[ref.uid].error:
                raise BatchAborted(f"prepare {ref}: {out[ref.uid].error}")
        return out

    def _read_allocation(self, ref: ClaimRef) -> tuple[list[tuple[dict[str, Any], DeviceInfo]], dict[str, str]]:
        """The claim's devices of this driver on this node, and the sharing strategy per request."""
        obj = self.claims.get_claim(ref.namespace, ref.name)
        what = f"ResourceClaim {ref.namespace}/{ref.name}"
        if obj is None:
            raise ClaimError(f"{what} not found in the API server")
        api_uid = obj.get("metadata", {}).get("uid", "")
        if api_uid != ref.uid:
            raise ClaimError(f"{what}: UID mismatch: the API server has {api_uid}, the request names {ref.uid}")
        allocation = (obj.get("status") or {}).get("allocation")
        if not allocation:
            raise ClaimError(f"{what} is not allocated")
        for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms", []):
            for f in term.get("matchFields", []):
                if f.get("key") == "metadata.name" and f.get("operator") == "In" and self.node not in f.get("values", []):
                    raise ClaimError(f"{what} is allocated to node(s) {', '.join(f.get('values', []))}, not {self.node}")
        results = (allocation.get("devices") or {}).get("results") or []
        mine = [r for r in results if r.get("driver") == self.driver]
        if not mine:
            drivers = sorted({str(r.get("driver")) for r in results})
            raise ClaimError(
                f"{what} has no device of driver {self.driver} (allocated from: {', '.join(drivers) or 'nothing'})"
            )
        out = []
        for r in mine:
            if r.get("pool") != self.node:
                raise ClaimError(
                    f"{what}: device {r.get('device')} is from pool {r.get('pool')!r}, not this node's pool {self.node!r}"
                )
            info = self.inventory.get(str(r.get("device")))
            if info is None:
                raise ClaimError(f"{what}: device {r.get('device')!r} is not published by {self.driver} on {self.node}")
            out.append((r, info))
        return out, self._sharing(what, allocation, mine)

    def _sharing(self, what: str, allocation: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, str]:
        """Request -> sharing strategy, from the opaque configs for this driver (``parameters.sharing.strategy``,
        the shape of NVIDIA's GpuConfig); an unknown strategy fails the claim, as a real driver's
        config validation does."""
        out: dict[str, str] = {}
        for entry in (allocation.get("devices") or {}).get("config") or []:
            opaque = entry.get("opaque") or {}
            if opaque.get("driver") != self.driver:
                continue
            params = opaque.get("parameters") or {}
            sharing = params.get("sharing") if isinstance(params, dict) else None
            strategy = sharing.get("strategy") if isinstance(sharing, dict) else None
            if strategy is None:
                continue
            if strategy not in SHARING_STRATEGIES:
                raise ClaimError(f"{what}: sharing strategy {strategy!r} is not supported; "
                                 f"known: {', '.join(SHARING_STRATEGIES)}")  # fmt: skip
            for r in results:
                request = str(r.get("request", ""))
                names = entry.get("requests") or []
                if not names or request in names or request.split("/")[0] in names:
                    out.setdefault(request, strategy)
        return out

    def _prepare_one(self, ref: ClaimRef, start: int) -> list[PreparedDevice]:
        self._crash("prepare.begin")
        with self._lock:
            rec = self.cp.claims.get(ref.uid)
            if rec is not None and rec.state is ClaimState.PREPARE_COMPLETED:
                if self.mutant.reprepare_completed:
                    return self._reprepare(ref, rec)
                self._ensure_cdi(ref, rec)
                return rec.devices  # idempotent: no API read, same devices and CDI IDs
        allocated, sharing = self._read_allocation(ref)
        self._crash("prepare.after_read")
        if self.faults.prepare_fails(ref.uid, ref.namespace, ref.name):
            raise ClaimError(f"injected prepare failure for {ref}")
        hang = self.faults.prepare_hang(ref.uid, ref.namespace, ref.name)
        if hang:
            self.log.warning("prepare %s: injected hang of %.1fs", ref, hang)
            time.sleep(hang)
        with self._lock:
            if not self.mutant.accept_stale_prepare and self._unprepared_at.get(ref.uid, -1) > start:
                raise ClaimError(f"stale prepare of {ref}: the claim was unprepared while this call was in flight")
            rec = self.cp.claims.get(ref.uid)
            if rec is not None and rec.state is ClaimState.PREPARE_COMPLETED:
                self._ensure_cdi(ref, rec)
                return rec.devices
            if rec is not None and rec.state is ClaimState.UNPREPARE_STARTED:
                raise ClaimError(f"{ref} is being unprepared (a device reset failed or was interrupted); unprepare it again")
            if not self.mutant.allow_double_allocation:
                for r, info in allocated:
                    if r.get("adminAccess") or info.allow_multiple:
                        continue
                    problem = self._conflict(ref.uid, info)
                    if problem:
                        raise ClaimError(f"{ref}: {problem}")
            devices = [PreparedDevice([str(r.get("request", ""))], self.node, info.name) for r, info in allocated]
            # Admin access and devices that allow multiple allocations are not held exclusively.
            shared = {info.name for r, info in allocated if r.get("adminAccess") or info.allow_multiple}
            rec = ClaimRecord(ref.uid, ref.namespace, ref.name, ClaimState.PREPARE_STARTED, devices)
            self.cp.claims[ref.uid] = rec
            wanted = {d.device for d in devices} - shared
            for name in self.cp.held_by(ref.uid):
                if name not in wanted:  # left over from an earlier attempt with other devices
                    self.cp.devices[name] = DeviceRecord()
            for name in wanted:
                self.cp.devices[name] = DeviceRecord(DeviceState.PREPARED, ref.uid)
            self._save()
            self._crash("prepare.after_started")
            for r, info in allocated:
                if r.get("adminAccess"):
                    continue
                if info.parent:
                    self.nvml.create_partition(info.parent, info.name)
                strategy = sharing.get(str(r.get("request", "")))
                if strategy:
                    self.nvml.configure_sharing(info.name, strategy, ref.uid)
            paths = self.nvml.device_paths()
            spec = cdi.claim_spec(
                self.driver,
                ref.uid,
                [cdi.ClaimDevice(info.name, info.uuid, str(r.get("request", "")), paths.get(info.name, ""))
                 for r, info in allocated],
            )  # fmt: skip
            path = cdi.spec_path(self.cdi_dir, self.driver, ref.uid)
            if self.mutant.incomplete_cdi:
                # The incomplete-cdi mutant: the spec exists but names none of the devices, as a driver
                # that writes its spec before the device nodes exist (dra-driver-nvidia-gpu#1380).
                cdi.write_raw(path, {**spec, "devices": []})
            else:
                cdi.write_spec(path, spec)
            self._crash("prepare.after_cdi")
            for d in devices:
                d.cdi_device_ids = [cdi.claim_device_id(self.driver, ref.uid, d.device)]
            rec.state = ClaimState.PREPARE_COMPLETED
            self._save()
            self._crash("prepare.after_completed")
            return devices

    def _ensure_cdi(self, ref: ClaimRef, rec: ClaimRecord) -> None:
        """A repeated prepare of a prepared claim: write its CDI spec again when it is gone.

        The CDI directory (``/var/run/cdi``) is on tmpfs and empty after a node reboot, while the
        checkpoint survives; the kubelet then prepares every running pod's claims again
        (kubernetes/kubernetes PR #141966 documents it), and a driver that answers from its checkpoint
        without the spec leaves the next container in CreateContainerError (kubernetes/kubernetes#141433;
        dra-example-driver PR #259 re-creates the spec on that path). The cdi-not-recreated mutant skips it.
        """
        if self.mutant.cdi_not_recreated:
            return
        path = cdi.spec_path(self.cdi_dir, self.driver, ref.uid)
        if path.exists():
            return
        paths = self.nvml.device_paths()
        spec = cdi.claim_spec(self.driver, ref.uid, [
            cdi.ClaimDevice(d.device, self._uuid(d.device), d.requests[0] if d.requests else "", paths.get(d.device, ""))
            for d in rec.devices
        ])  # fmt: skip
        cdi.write_spec(path, spec)
        self.log.info("prepare %s: CDI spec was gone (a reboot?); written again", ref)

    def _reprepare(self, ref: ClaimRef, rec: ClaimRecord) -> list[PreparedDevice]:
        """The non-idempotent-prepare mutant (see mutants.NonIdempotentPrepare): prepare again under
        new CDI IDs in a new spec file, leaving the previous spec where it is."""
        self._reprepared += 1
        name = f"{ref.uid}-r{self._reprepared}"
        paths = self.nvml.device_paths()
        spec = cdi.claim_spec(self.driver, name, [
            cdi.ClaimDevice(d.device, self._uuid(d.device), ",".join(d.requests), paths.get(d.device, ""))
            for d in rec.devices
        ])  # fmt: skip
        cdi.write_spec(cdi.spec_path(self.cdi_dir, self.driver, name), spec)
        for d in rec.devices:
            d.cdi_device_ids = [cdi.claim_device_id(self.driver, name, d.device)]
        self._save()
        return rec.devices

    def _uuid(self, device: str) -> str:
        info = self.inventory.get(device)
        return info.uuid if info else ""

    # -- unprepare ------------------------------------------------------------------------------
    def unprepare(self, refs: Sequence[ClaimRef]) -> dict[str, str]:
        """Unprepare each claim; the value is that claim's error, ``""`` on success."""
        with self._call():
            return self._unprepare_all(refs)

    def _unprepare_all(self, refs: Sequence[ClaimRef]) -> dict[str, str]:
        out: dict[str, str] = {}
        for ref in refs:
            try:
                self._unprepare_one(ref)
                out[ref.uid] = ""
            except ClaimError as exc:
                self.log.warning("unprepare %s failed: %s", ref, exc)
                out[ref.uid] = str(exc)
            except Exception as exc:
                self.log.exception("unprepare %s failed unexpectedly", ref)
                out[ref.uid] = f"internal error unpreparing {ref}: {exc}"
            if self.mutant.abort_batch_on_error and out[ref.uid]:
                raise BatchAborted(f"unprepare {ref}: {out[ref.uid]}")
        return out

    def _reset(self, name: str) -> str:
        """Reset and drain one device through NVML; returns an error message, empty on success."""
        self._crash("unprepare.during_reset")
        with self._unlocked():
            delay = self.reset_seconds + self.faults.reset_slow(name)
            if delay > 0:  # sleep(0) still gives up the GIL and the core: half a millisecond on a busy machine
                time.sleep(delay)
            try:
                self.nvml.reset(name)
            except NvmlError as exc:
                return str(exc)
        return ""

    @contextlib.contextmanager
    def _unlocked(self) -> Iterator[None]:
        """Let other calls in while a device resets (the caller marked it resetting under the lock).

        The lock guards the driver's tables, never the hardware: a reset takes seconds to minutes,
        and holding the lock across it stalls every other prepare on the node. The lock-across-reset
        mutant keeps it. Released once: a caller nesting the lock deeper keeps it (no concurrency, no harm).
        """
        if self.mutant.lock_across_reset:
            yield
            return
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()

    def _shared_to_release(self, rec: ClaimRecord) -> list[str]:
        """Devices of the claim held non-exclusively (multiple allocations) that no other claim uses."""
        others = {d.device for uid, c in self.cp.claims.items() if uid != rec.uid for d in c.devices}
        out = []
        for d in rec.devices:
            info = self.inventory.get(d.device)
            if info is not None and info.allow_multiple and d.device not in others and d.device not in out:
                out.append(d.device)
        return out

    def _teardown(self, uid: str, name: str) -> None:
        """Undo what prepare set up on a device besides holding it: sharing, then the partition."""
        if not self.mutant.keep_sharing_state:
            self.nvml.configure_sharing(name, None)
        info = self.inventory.get(name)
        if info is not None and info.parent:
            self.nvml.destroy_partition(info.parent, name)

    def _unprepare_one(self, ref: ClaimRef) -> None:
        self._crash("unprepare.begin")
        if self.faults.unprepare_fails(ref.uid, ref.namespace, ref.name):
            raise ClaimError(f"injected unprepare failure for {ref}")
        if self.mutant.unprepare_needs_claim:
            obj = self.claims.get_claim(ref.namespace, ref.name)
            if obj is None or obj.get("metadata", {}).get("uid") != ref.uid:
                raise ClaimError(f"cannot unprepare {ref}: ResourceClaim not found in the API server")
        with self._lock:
            self._seq += 1
            self._unprepared_at[ref.uid] = self._seq
            self._unprepared_at.move_to_end(ref.uid)
            while len(self._unprepared_at) > 10000:
                self._unprepared_at.popitem(last=False)
            rec = self.cp.claims.get(ref.uid)
            if rec is None:
                if self.mutant.unknown_unprepare_error:
                    raise ClaimError(f"cannot unprepare {ref}: claim not found in the checkpoint")
                self.log.info("unprepare %s: unknown claim, nothing to do", ref)
                return
            if self.mutant.keep_prepare_started and rec.state is ClaimState.PREPARE_STARTED:
                return
            if self.mutant.forget_before_reset:
                self._unprepare_forget_first(ref)
                return
            if ref.uid in self._unpreparing:  # its devices are resetting in another call (lock released)
                raise ClaimError(f"{ref} is already being unprepared (a device reset is running); retry")
            held = self.cp.held_by(ref.uid)
            targets = held + self._shared_to_release(rec)
            rec.state = ClaimState.UNPREPARE_STARTED
            for name in held:
                self.cp.devices[name] = DeviceRecord(DeviceState.RESETTING, ref.uid)
            self._save()
            self._crash("unprepare.after_started")
            errors = []
            self._unpreparing.add(ref.uid)
            try:
                resets = {}
                for name in targets:
                    if not self.mutant.keep_sharing_state:
                        self.nvml.configure_sharing(name, None)
                    resets[name] = self._reset(name)
            finally:
                self._unpreparing.discard(ref.uid)
            for name in targets:
                error = resets[name]
                if error:
                    errors.append(error)
                    if name in held:
                        self.cp.devices[name] = DeviceRecord(DeviceState.FAILED, ref.uid, error)
                else:
                    self._teardown(ref.uid, name)
                    if name in held:
                        self.cp.devices[name] = DeviceRecord()
            if errors:
                self._save()
                raise ClaimError(f"{ref}: {'; '.join(errors)}; the claim stays prepared, retry unprepare")
            self._crash("unprepare.after_reset")
            cdi.remove_spec(cdi.spec_path(self.cdi_dir, self.driver, ref.uid))
            self._crash("unprepare.after_cdi_removed")
            del self.cp.claims[ref.uid]
            self._save()
            self._crash("unprepare.after_forget")
            self.log.info("unprepared %s: reset %s", ref, ", ".join(targets) or "no devices")

    def _unprepare_forget_first(self, ref: ClaimRef) -> None:
        """The forget-before-reset mutant (see mutants.ForgetBeforeReset), as the guardrail's bad example:
        the claim and its devices leave the books first, then the first failed reset returns the error."""
        rec = self.cp.claims[ref.uid]
        held = self.cp.held_by(ref.uid) + self._shared_to_release(rec)
        del self.cp.claims[ref.uid]
        for name in held:
            self.cp.devices.pop(name, None)
        cdi.remove_spec(cdi.spec_path(self.cdi_dir, self.driver, ref.uid))
        self._save()
        self._crash("unprepare.after_forget")
        for name in held:
            error = self._reset(name)
            if error:
                raise ClaimError(f"{ref}: {error}")
            self._teardown(ref.uid, name)

    # -- background -----------------------------------------------------------------------------
    def cleanup_stale(self) -> list[str]:
        """Unprepare claims a crash left in ``PrepareStarted`` whose ResourceClaim is gone or replaced."""
        if self.mutant.keep_prepare_started:
            return []
        with self._lock:
            self._refresh()
            started = [r for r in self.cp.claims.values() if r.state is ClaimState.PREPARE_STARTED]
        cleaned = []
        for rec in started:
            try:
                obj = self.claims.get_claim(rec.namespace, rec.name)
            except Exception as exc:  # the API is down: try again next round
                self.log.warning("stale-claim cleanup: cannot read %s/%s: %s", rec.namespace, rec.name, exc)
                continue
            if obj is not None and obj.get("metadata", {}).get("uid") == rec.uid:
                continue
            ref = ClaimRef(namespace=rec.namespace, name=rec.name, uid=rec.uid)
            with self._lock:
                current = self.cp.claims.get(rec.uid)
                if current is None or current.state is not ClaimState.PREPARE_STARTED:
                    continue
            try:
                with self._call():
                    self._unprepare_one(ref)
                cleaned.append(rec.uid)
                self.log.info("stale-claim cleanup: unprepared %s", ref)
            except ClaimError as exc:
                self.log.warning("stale-claim cleanup of %s failed: %s", ref, exc)
        return cleaned

    def unhealthy(self) -> dict[str, str]:
        """The devices reported unhealthy now, with the message (what the host's sync loop asks of every
        node every second: only these, no record for each healthy device)."""
        if self.mutant.silent_health:  # see mutants.SilentHealth: the health check is blind
            return {}
        # What the hardware says (NVML over the node's device truth), then the fault file's declarations,
        # then a reset that failed here.
        # The application's Xids leave the GPU working (see mutants.XidOverreaction for the bug of not skipping them).
        skip = frozenset() if self.mutant.xid_overreaction else APPLICATION_XIDS
        reported = {**self.nvml.unhealthy(skip), **self.faults.unhealthy()}
        with self._lock:
            # The books change only in a call, which saves them before it returns: read again after a save.
            if self._failed[0] != self._saves:
                self._failed = (self._saves, {n: r.message or "device reset failed" for n, r in self.cp.devices.items()
                                              if r.state is DeviceState.FAILED})  # fmt: skip
            failed = self._failed[1]
        if not reported and not failed:
            return {}
        out = {}
        for d in self.inventory.devices:
            message = reported.get(d.name) if d.name in reported else failed.get(d.name)
            if message is not None:
                out[d.name] = message
        return out

    def health(self) -> list[DeviceHealth]:
        unhealthy = self.unhealthy()
        return [DeviceHealth(d.name, False, unhealthy[d.name]) if d.name in unhealthy else DeviceHealth(d.name, True)
                for d in self.inventory.devices]  # fmt: skip
