"""What a hollow kubelet's container runtime did, told to the node's device truth.

On fake nodes the agent's own runtime (:class:`draguard.harness.nodes.runtime.ContainerRuntime`)
records in the device truth every container it starts on a device (so the hardware sees a device
shared without a sharing strategy, handed over dirty, or used while unhealthy) and every container
it could not create (its CDI devices did not resolve). Those records are what ``container-devices``,
``no-leak`` and ``sharing-explicit`` read. A hollow kubelet's runtime (``runtime.go``) enforces CDI
itself and writes ``<root>/<node>/containers/<id>.json`` per container; :class:`DeviceTruthFeed`
turns those records, and the ``CreateContainerError`` the kubelet posts when CDI injection fails,
into the same device-truth records: a container on an unhealthy device, a device handed to another
claim with no reset between, containers of two pods on one device at once, a container whose CDI
devices did not resolve.

A container stays on the device truth while it runs. The kubelet unprepares a pod's claims right
after its containers stopped (``pkg/kubelet/kubelet.go``, SyncTerminatingPod), so a stop must reach
the truth before the runtime's StopContainer returns, or the driver's reset would find a process on
the device (NVML_ERROR_IN_USE) where a real node has none. The two sides agree through a marker,
``containers/<id>.truth``: the feed writes it before it tells the truth a start (and tells none if
the record stopped running meanwhile); the runtime's StopContainer and RemoveContainer mark the
record not running and wait, at most 5 s, until the feed told the truth the stop and removed the
marker. Containers leave the truth when their record stops running or disappears, and when their
pod is gone from the API.

Watches the containers folder every 0.1 s and reads the node's pods every 0.5 s while the kubelet
runs; nothing happens on a node without device truth (a driver other than the fake one: no marker
is written and the runtime never waits). Talks to the API server (the node's pods and their claims)
and the node's files.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..cdi import CdiError, Registry
from ..devices.truth import DeviceTruth
from draguard.harness.core.errors import DraguardError
from ..kube import Kube, Obj
from draguard.harness.core.paths import NodeDirs

__all__ = ["DeviceTruthFeed"]

log = logging.getLogger("draguard.kubelet.feed")

CDI_FAILURE = "CDI device injection failed"
"""What the hollow kubelet's runtime puts in the error of a container whose CDI devices do not resolve."""


class DeviceTruthFeed:
    """One kubelet node's container starts, stops and CDI failures, recorded in its device truth."""

    def __init__(self, dirs: NodeDirs, cdi_dir: Path, kube: Kube, interval: float = 0.5,
                 watch_interval: float = 0.1) -> None:  # fmt: skip
        self.dirs = dirs
        self.cdi_dir = cdi_dir
        self.kube = kube
        self.interval = interval
        """Seconds between full rounds (the node's pods read from the API for CDI failures)."""
        self.watch_interval = watch_interval
        """Seconds between looks at the containers folder; a change starts a round at once."""
        self.truth = DeviceTruth(dirs.root, dirs.node)
        self._untold: set[str] = set()  # running container record ids with no device the truth knows
        self._failed: set[tuple[str, str, str]] = set()  # (pod uid, container, message) told as failed
        self._claim_uids: dict[tuple[str, str], str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> DeviceTruthFeed:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"truth-feed-{self.dirs.node}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        # The containers folder is watched closely (its mtime changes with every record the runtime
        # writes, by rename): a start should reach the device truth before anything resets the device.
        seen: int | None = None
        next_full = 0.0
        while not self._stop.wait(self.watch_interval):
            try:
                stamp = (self.dirs.base / "containers").stat().st_mtime_ns
            except OSError:
                stamp = None
            now = time.monotonic()
            if stamp == seen and now < next_full:
                continue
            seen, next_full = stamp, now + self.interval
            try:
                self.poll()
            except Exception as exc:  # the API or a file may be away for a moment: next round
                log.debug("node %s: device truth feed: %s", self.dirs.node, exc)

    # -- one round ----------------------------------------------------------------------------
    def _records(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted((self.dirs.base / "containers").glob("*.json")):
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return out

    def _claims(self, pod: Obj) -> dict[str, str]:
        """Pod claim name -> ResourceClaim UID."""
        ns = pod["metadata"].get("namespace", "")
        generated = {s["name"]: s.get("resourceClaimName") for s in pod.get("status", {}).get("resourceClaimStatuses") or []}
        out: dict[str, str] = {}
        for pc in pod.get("spec", {}).get("resourceClaims") or []:
            name = pc.get("resourceClaimName") or generated.get(pc["name"])
            if not name:
                continue
            uid = self._claim_uids.get((ns, name))
            if uid is None:
                claim = self.kube.get("ResourceClaim", name, ns)
                if claim is None:
                    continue
                uid = self._claim_uids[(ns, name)] = claim["metadata"]["uid"]
            out[pc["name"]] = uid
        return out

    @staticmethod
    def _claims_of(pod: Obj, container: str, claim_uids: Mapping[str, str]) -> list[str]:
        for c in pod.get("spec", {}).get("containers") or []:
            if c["name"] == container:
                return sorted({claim_uids[r["name"]] for r in (c.get("resources") or {}).get("claims") or []
                               if r.get("name") in claim_uids})  # fmt: skip
        return []

    def _marker(self, record_id: str) -> Path:
        """The acknowledgement the runtime's StopContainer waits on (``runtime.go``, markerPath)."""
        return self.dirs.base / "containers" / f"{Path(record_id).name}.truth"

    def _still_running(self, record_id: str) -> bool:
        try:
            return bool(json.loads((self.dirs.base / "containers" / f"{Path(record_id).name}.json").read_text())
                        .get("running"))  # fmt: skip
        except (OSError, ValueError):
            return False

    def _acknowledge(self, record_id: str, cid: str) -> bool:
        """Make sure the runtime's stop of the container will wait for this feed; False if it stopped already.

        The marker first, then the record again: a StopContainer that marked the record not running
        before the marker was written did not wait, so the truth must not get (or keep) the container.
        """
        marker = self._marker(record_id)
        if marker.exists():
            return True
        marker.write_text(cid + "\n")
        if self._still_running(record_id):
            return True
        marker.unlink(missing_ok=True)
        return False

    def poll(self) -> None:
        """One round: containers started since the last round go onto the device truth, those that
        stopped (or whose pod is gone) come off it and their markers go, and CDI failures are told."""
        if not self.truth.exists:
            return
        records = [r for r in self._records() if r.get("running")]
        pods = {p["metadata"]["uid"]: p for p in
                self.kube.list("Pod", field_selector=f"spec.nodeName={self.dirs.node}")[0]}  # fmt: skip
        running = {r["id"] for r in records}
        self._untold &= running
        truth = self.truth.read()
        on_truth = {c.id for d in truth.devices.values() for c in d.containers}
        desired: set[str] = set()  # truth container ids (<pod uid>/<container>) of running records
        backing: set[str] = set()  # the records of those, whose markers stay
        by_path: dict[str, str] | None = None  # the device truth's devices by device node, read once a round
        for rec in records:
            pod = pods.get(rec.get("podUID", ""))
            if pod is None or not rec.get("cdiDevices") or rec["id"] in self._untold:
                continue
            cid = f"{rec['podUID']}/{rec['container']}"
            if cid in on_truth or cid in desired:  # told already, maybe for an earlier container of that name
                if self._acknowledge(rec["id"], cid):
                    desired.add(cid)
                    backing.add(rec["id"])
                continue
            try:
                edits = Registry([self.cdi_dir]).resolve(rec["cdiDevices"])
            except CdiError:
                continue  # the kubelet's runtime resolved them when it created the container; changed since
            if by_path is None:
                by_path = truth.by_path()
            devices = [by_path[n.source] for n in edits.device_nodes if n.source in by_path]
            if not devices:
                self._untold.add(rec["id"])  # nothing the hardware sees
                continue
            if not self._acknowledge(rec["id"], cid):
                continue
            try:
                claims = self._claims_of(pod, rec["container"], self._claims(pod))
                name = f"{rec['podNamespace']}/{rec['podName']}"
                self.truth.start_container(cid, name, claims, devices)
            except Exception:
                self._marker(rec["id"]).unlink(missing_ok=True)
                raise
            desired.add(cid)
            backing.add(rec["id"])
        for cid in sorted(on_truth - desired):
            self.truth.stop_container(cid)
        # Only now, with the stops on the truth, may the waiting StopContainer calls return.
        for marker in (self.dirs.base / "containers").glob("*.truth"):
            if marker.name.removesuffix(".truth") not in backing:
                marker.unlink(missing_ok=True)
        for uid, pod in pods.items():
            self._failures(uid, pod)

    def _failures(self, uid: str, pod: Obj) -> None:
        md = pod["metadata"]
        for cs in pod.get("status", {}).get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            message = str(waiting.get("message", ""))
            if waiting.get("reason") != "CreateContainerError" or CDI_FAILURE not in message:
                continue
            key = (uid, cs["name"], message)
            if key in self._failed:
                continue
            self._failed.add(key)
            name = f"{md.get('namespace', '')}/{md['name']}"
            try:
                claims = sorted(set(self._claims(pod).values()))
            except DraguardError:
                claims = []
            self.truth.container_failed(name, f"container {cs['name']} of pod {name}: {message}", claims)
