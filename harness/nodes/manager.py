"""The DRA manager of one fake node: prepares and unprepares a pod's claims like the kubelet does.

- One ``NodePrepareResources`` call per driver per pod, holding all of the pod's claims of that driver
  that are not prepared yet; claims already prepared for another pod on the node are skipped.
- "Prepared" counts only for this agent's life: a restarted agent prepares a claim again once for the
  next pod that needs it, running pods included, as the kubelet does (its claim cache comes back from the
  checkpoint with every claim unprepared: ``newClaimInfoFromState`` in pkg/kubelet/cm/dra/claiminfo.go;
  ``prepareResources`` in pkg/kubelet/cm/dra/manager.go skips only claims with ``isPrepared()``).
- Every claim must come back, without error; otherwise the pod's preparation fails (and is retried by
  the caller with backoff).
- Unprepare is per pod: one ``NodeUnprepareResources`` per driver holding the pod's claims that no other
  pod on the node uses, in the order they were first prepared (the pod's spec). The pod's reference on
  such a claim stays until its driver unprepared it, so a failed call is retried for that pod (the
  kubelet's ``unprepareResources`` in pkg/kubelet/cm/dra/manager.go drops the last reference only after
  the calls succeeded); a shared claim loses its pod's reference at once.
- Every change goes to the node's :class:`~.checkpoint.Checkpoint` before and after the call.

It knows nothing about the API server: :mod:`.pods` resolves claims and writes pod status and events.
Talks to plugins through :class:`~.plugins.NodePlugins`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from draguard.harness.grpcapi.plugin import ClaimRef, PluginCallError

from .checkpoint import CHECKPOINT_FILE, Checkpoint, ClaimRecord, DriverState
from .plugins import NodePlugins

__all__ = ["PodClaim", "PrepareError", "DraManager"]

log = logging.getLogger("draguard.nodes")


@dataclass(frozen=True)
class PodClaim:
    """A claim a pod uses, with the drivers of its allocated devices."""

    ref: ClaimRef
    drivers: tuple[str, ...]


class PrepareError(Exception):
    """Preparing or unpreparing failed; the message goes into the pod's event."""


class DraManager:
    """Claims prepared on one node, their pods, and the calls that change them. Thread-safe."""

    def __init__(
        self, node: str, plugins: NodePlugins, state_dir: Path, stop_containers: Callable[[str], None] | None = None
    ) -> None:
        self.node = node
        self.stop_containers = stop_containers or (lambda pod_uid: None)
        """Called with a pod UID before its claims may be unprepared: its containers exit first."""
        self.plugins = plugins
        self.checkpoint = Checkpoint(state_dir / CHECKPOINT_FILE, node).load()
        self._cond = threading.Condition()
        self._inflight: set[tuple[str, str]] = set()  # (claim uid, driver)
        self._confirmed: set[tuple[str, str]] = set()
        """(claim uid, driver) prepared by the driver since this manager was created; the checkpoint's
        ``prepared`` is not trusted across a restart (claiminfo.go ``newClaimInfoFromState``)."""

    # -- queries -----------------------------------------------------------------------------
    def claims(self) -> dict[str, ClaimRecord]:
        with self._cond:
            return dict(self.checkpoint.claims)

    def pods(self) -> set[str]:
        with self._cond:
            return {p for c in self.checkpoint.claims.values() for p in c.pods}

    def prepared_devices(self, claim_uid: str) -> list[dict[str, Any]]:
        """The devices every driver prepared for a claim (``requestNames``, ``cdiDeviceIDs``, ...)."""
        with self._cond:
            rec = self.checkpoint.claims.get(claim_uid)
            return [d for s in (rec.drivers.values() if rec else ()) for d in s.devices]

    def is_prepared(self, pod_uid: str, claims: Iterable[PodClaim]) -> bool:
        with self._cond:
            for c in claims:
                rec = self.checkpoint.claims.get(c.ref.uid)
                if rec is None or pod_uid not in rec.pods or not rec.prepared:
                    return False
                if any((c.ref.uid, d) not in self._confirmed for d in rec.drivers):
                    return False
            return True

    # -- prepare -----------------------------------------------------------------------------
    def prepare_pod(self, pod_uid: str, claims: list[PodClaim]) -> None:
        """Prepare every claim of the pod; returns only when all are prepared, else raises PrepareError."""
        if not claims:
            return
        for c in claims:
            for driver in c.drivers:
                if self.plugins.client(driver) is None:
                    raise PrepareError(
                        f"DRA driver {driver} is not registered on node {self.node} "
                        f"(claim {c.ref.namespace}/{c.ref.name})"
                    )
        with self._cond:
            for c in claims:
                rec = self.checkpoint.claims.get(c.ref.uid)
                if rec is None:
                    rec = self.checkpoint.claims[c.ref.uid] = ClaimRecord(c.ref.uid, c.ref.name, c.ref.namespace)
                rec.pods.add(pod_uid)
                for driver in c.drivers:
                    rec.drivers.setdefault(driver, DriverState())
        # Saved with the first driver's "sent" marks, before its call (_prepare_driver): the kubelet too
        # writes its checkpoint once before the calls and once after (prepareResources in
        # pkg/kubelet/cm/dra/manager.go). Lost before that save, the references name no call made.
        drivers = sorted({d for c in claims for d in c.drivers})
        for driver in drivers:
            self._prepare_driver(driver, [c for c in claims if driver in c.drivers])

    def _prepare_driver(self, driver: str, claims: list[PodClaim]) -> None:
        keys = {(c.ref.uid, driver) for c in claims}
        with self._cond:
            while keys & self._inflight:  # a shared claim being prepared or unprepared for another pod
                self._cond.wait(1.0)
            todo = []
            for c in claims:
                rec = self.checkpoint.claims[c.ref.uid]
                state = rec.drivers.setdefault(driver, DriverState())
                if not state.prepared or (c.ref.uid, driver) not in self._confirmed:
                    todo.append(c.ref)
                    state.sent = True
            self.checkpoint.save()  # the pod's references (prepare_pod) and the marks of the calls to come
            if not todo:
                return
            self._inflight |= {(r.uid, driver) for r in todo}
        try:
            client = self.plugins.client(driver)
            if client is None:
                raise PrepareError(f"DRA driver {driver} is not registered on node {self.node}")
            try:
                results = client.prepare(todo)
            except PluginCallError as exc:
                raise PrepareError(f"prepare dynamic resources: {exc}") from exc
            errors: list[str] = []
            skipped = [r for r in todo if r.uid not in results]
            with self._cond:
                for ref in todo:
                    if ref.uid not in results:
                        continue
                    result = results[ref.uid]
                    devices = [d.as_dict() for d in result.devices]
                    if result.error:
                        errors.append(f"claim {ref.namespace}/{ref.name}: {result.error}")
                        continue
                    record = self.checkpoint.claims.get(ref.uid)
                    if record is not None:
                        record.drivers[driver] = DriverState(sent=True, prepared=True, devices=devices)
                        self._confirmed.add((ref.uid, driver))
                self.checkpoint.save()
            if skipped:
                names = ", ".join(f"{r.namespace}/{r.name}" for r in skipped)
                errors.append(f"NodePrepareResources of {driver} skipped {len(skipped)} ResourceClaims: {names}")
            if errors:
                raise PrepareError(f"prepare dynamic resources with {driver}: " + "; ".join(errors))
        finally:
            with self._cond:
                self._inflight -= {(r.uid, driver) for r in todo}
                self._cond.notify_all()

    # -- unprepare ---------------------------------------------------------------------------
    def unprepare_pod(self, pod_uid: str) -> None:
        """Unprepare the pod's claims that no other pod on the node uses (one call per driver); drop its
        references on the others. Raises PrepareError if a call failed (the reference then stays)."""
        self.stop_containers(pod_uid)
        groups: dict[str, list[ClaimRecord]] = {}
        with self._cond:
            changed = False
            for uid, rec in list(self.checkpoint.claims.items()):  # insertion order: the pod's spec
                if pod_uid not in rec.pods:
                    continue
                if len(rec.pods) > 1:  # still used here: only this pod's reference goes (manager.go)
                    rec.pods.discard(pod_uid)
                    changed = True
                    continue
                for driver, state in list(rec.drivers.items()):
                    if (uid, driver) in self._inflight:  # its prepare is under way; a later sync retries
                        continue
                    if not state.sent:  # nothing was ever asked of this driver: nothing to undo
                        del rec.drivers[driver]
                        changed = True
                        continue
                    groups.setdefault(driver, []).append(rec)
                    self._inflight.add((uid, driver))
                if self._release(pod_uid, rec):
                    changed = True
            if changed:
                self.checkpoint.save()
        errors: list[str] = []
        for driver, recs in sorted(groups.items()):
            try:
                self._unprepare_driver(driver, pod_uid, recs)
            except PrepareError as exc:
                errors.append(str(exc))
        if errors:
            raise PrepareError("; ".join(errors))

    def forget_inactive(self, active: set[str]) -> None:
        """Reconcile: unprepare for each pod that is no longer active on the node, one pod at a time (the
        kubelet's reconcile loop calls ``unprepareResourcesForPod`` per inactive pod: manager.go
        ``reconcileLoop``); a claim without pods (a checkpoint of an older agent) goes alone."""
        with self._cond:
            gone = {p for rec in self.checkpoint.claims.values() for p in rec.pods - active}
            orphans = [uid for uid, rec in self.checkpoint.claims.items() if not rec.pods]
            if orphans:  # give each its own owner so that the per-pod path unprepares it
                for uid in orphans:
                    self.checkpoint.claims[uid].pods.add(f"orphan:{uid}")
                    gone.add(f"orphan:{uid}")
                self.checkpoint.save()
        errors: list[str] = []
        for pod_uid in sorted(gone):
            try:
                self.unprepare_pod(pod_uid)
            except PrepareError as exc:
                errors.append(str(exc))
        if errors:
            raise PrepareError("; ".join(errors))

    def _release(self, pod_uid: str, rec: ClaimRecord) -> bool:
        """Drop the pod's reference once none of the claim's drivers is left to unprepare; forget the
        claim once no pod uses it. Call with the lock held; True if the checkpoint changed."""
        if any(k[0] == rec.uid for k in self._inflight) or any(s.sent for s in rec.drivers.values()):
            return False
        rec.pods.discard(pod_uid)
        if not rec.pods:
            del self.checkpoint.claims[rec.uid]
        return True

    def _unprepare_driver(self, driver: str, pod_uid: str, recs: list[ClaimRecord]) -> None:
        refs = [ClaimRef(namespace=r.namespace, name=r.name, uid=r.uid) for r in recs]
        results: dict[str, str] = {}
        try:
            client = self.plugins.client(driver)
            if client is None:
                raise PrepareError(f"unprepare dynamic resources: DRA driver {driver} is not registered on {self.node}")
            try:
                results = client.unprepare(refs)
            except PluginCallError as exc:
                raise PrepareError(f"unprepare dynamic resources: {exc}") from exc
        finally:
            errors = []
            with self._cond:
                for ref in refs:
                    self._inflight.discard((ref.uid, driver))
                    if ref.uid not in results:
                        continue
                    if results[ref.uid]:
                        errors.append(f"claim {ref.namespace}/{ref.name}: {results[ref.uid]}")
                        continue
                    self._confirmed.discard((ref.uid, driver))
                    rec = self.checkpoint.claims.get(ref.uid)
                    if rec is None:
                        continue
                    if rec.pods - {pod_uid}:  # a pod started using it meanwhile: it must be prepared again
                        rec.drivers[driver] = DriverState()
                    else:
                        rec.drivers.pop(driver, None)
                    self._release(pod_uid, rec)
                self.checkpoint.save()
                self._cond.notify_all()
        missing = [r for r in refs if r.uid not in results]
        if missing:
            errors.append(f"NodeUnprepareResources of {driver} skipped {len(missing)} ResourceClaims")
        if errors:
            raise PrepareError(f"unprepare dynamic resources with {driver}: " + "; ".join(errors))
