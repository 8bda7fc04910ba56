"""Fake nodes: one process plays the kubelet's DRA role for many nodes without machines.

:class:`NodeAgent` is one node: its directories, its plugin registry, its DRA manager and checkpoint,
its heartbeat, and a "lost" switch. :class:`FakeNodes` hosts many agents in one process and shares
among them one pod watch (all pods, filtered to its nodes), one work queue with a few workers for
pod syncs, one heartbeat timer and one thread pool. Pod sync, per pod:

- bound and not started: resolve claims, prepare them (one call per driver), then post Running;
  on failure record ``FailedPrepareDynamicResources`` and retry with exponential backoff;
- Running when the agent (re)starts: prepare its claims again (the manager trusts no prepare of an
  earlier life, as the kubelet), without restarting its containers;
- being deleted: unprepare (one call per driver) its claims no other pod on the node uses, then delete
  it (grace 0, UID precondition);
- Succeeded/Failed, or gone from the API: unprepare.

Talks to the API server through :class:`~draguard.harness.kube.Kube` and to plugins over gRPC.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.grpcapi.plugin import CALL_TIMEOUT
from draguard.harness.kube import ApiError, Kube, Obj
from draguard.harness.core.paths import NodeDirs
from draguard.harness.core.process import check_dns_subdomain

from . import node as nodeobj
from .heartbeat import Heartbeats
from .manager import DraManager, PrepareError
from .node import NodeSpec
from .plugins import NodePlugins, PluginWatcher
from .pods import FAILED_PREPARE, FAILED_UNPREPARE, EventRecorder, resolve_claims, running_status, terminal
from .runtime import CREATE_CONTAINER_ERROR, FAILED_CONTAINER, ContainerError, ContainerRuntime, pod_claim_names
from .workqueue import WorkQueue

__all__ = ["NodeAgent", "FakeNodes", "LOST_FILE", "validate_node_name"]

log = logging.getLogger("draguard.nodes")

LOST_FILE = "lost"
"""A file ``<root>/<node>/lost``: while it exists the node stops heartbeats and pod syncs (node loss)."""
STATUS_EVERY = 30
"""Post node status every this many heartbeats (5 min at the default 10 s), and at once after a loss: the
kubelet's default ``nodeStatusReportFrequency`` is 5m while the Lease carries liveness
(pkg/kubelet/apis/config/v1beta1/defaults.go; KEP-589 efficient node heartbeats). A fake node's status
never changes, so posting it every minute only made every Node write fan out to the scheduler and the
controllers: at 500 nodes 8 Node updates a second on top of 50 Lease renewals."""

def validate_node_name(name: str) -> str:
    return check_dns_subdomain("node name", name, 253)


class NodeAgent:
    """One fake node. Created by :class:`FakeNodes`; holds the node's directory lock while alive."""

    def __init__(self, spec: NodeSpec, root: Path, kube: Kube, call_timeout: float = CALL_TIMEOUT) -> None:
        self.spec = spec
        self.name = spec.name
        self.kube = kube
        self.dirs = NodeDirs(root, spec.name)
        self.plugins = NodePlugins(spec.name, self.dirs.registry, call_timeout)
        self.manager: DraManager | None = None
        self.runtime = ContainerRuntime(self.dirs)
        self.node_uid: str | None = None
        self._lost = False
        self._was_lost = False
        self._beats = 0
        self._lock_file: IO[str] | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self) -> None:
        """Create the directories, take the node's lock and load its checkpoint."""
        self.dirs.create()
        lock_path = self.dirs.base / "agent.lock"
        f = open(lock_path, "a+")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise UsageError(
                f"node {self.name}: already served by another draguard nodes process (lock {lock_path} is taken)"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._lock_file = f
        self.manager = DraManager(self.name, self.plugins, self.dirs.base, self.runtime.stop_pod)

    def register(self) -> None:
        node = nodeobj.register_node(self.kube, self.spec)
        self.node_uid = node.get("metadata", {}).get("uid")
        nodeobj.renew_lease(self.kube, self.spec, self.node_uid)

    def close(self) -> None:
        self.plugins.close()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    # -- node loss ---------------------------------------------------------------------------
    @property
    def lost(self) -> bool:
        return self._lost or (self.dirs.base / LOST_FILE).exists()

    def set_lost(self, lost: bool) -> None:
        """Switch node loss on or off (heartbeats and pod syncs stop while lost)."""
        self._lost = lost
        if not lost:
            (self.dirs.base / LOST_FILE).unlink(missing_ok=True)

    def heartbeat(self) -> None:
        if self.lost:
            self._was_lost = True
            return
        nodeobj.renew_lease(self.kube, self.spec, self.node_uid)
        self._beats += 1
        if self._was_lost or self._beats % STATUS_EVERY == 0:
            nodeobj.patch_status(self.kube, self.spec)
            self._was_lost = False


class FakeNodes:
    """Many fake nodes in one process. ``start()`` returns once nodes exist and pods were listed."""

    def __init__(
        self,
        kube: Kube,
        specs: Iterable[NodeSpec],
        root: Path,
        *,
        workers: int = 8,
        heartbeat_interval: float = 10.0,
        call_timeout: float = CALL_TIMEOUT,
        registry_interval: float = 0.5,
        reconcile_interval: float = 5.0,
        backoff_base: float = 0.5,
        backoff_max: float = 10.0,
    ) -> None:
        self.kube = kube
        self.root = Path(root)
        self.agents: dict[str, NodeAgent] = {}
        for spec in specs:
            validate_node_name(spec.name)
            if spec.name in self.agents:
                raise UsageError(f"node {spec.name!r} is given twice")
            self.agents[spec.name] = NodeAgent(spec, self.root, kube, call_timeout)
        if not self.agents:
            raise UsageError("no nodes to run: give --node NAME or --count N")
        self.workers = workers
        self.reconcile_interval = reconcile_interval
        self.executor = ThreadPoolExecutor(max_workers=max(4, workers), thread_name_prefix="fake-nodes")
        self.heartbeats = Heartbeats(self.executor, heartbeat_interval)
        self.watcher = PluginWatcher(self.executor, registry_interval)
        self.queue = WorkQueue(backoff_base, backoff_max)
        self.events = EventRecorder(kube)
        self._pods: dict[str, Obj] = {}
        self._pod_node: dict[str, str] = {}
        self._started: set[str] = set()
        self._pods_lock = threading.Lock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._watch_error: BaseException | None = None
        self._threads: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> FakeNodes:
        opened: list[NodeAgent] = []
        try:
            for agent in self.agents.values():
                agent.open()
                opened.append(agent)
        except BaseException:
            for agent in opened:
                agent.close()
            self.executor.shutdown(wait=False)
            raise
        try:
            for future in [self.executor.submit(a.register) for a in self.agents.values()]:
                future.result()
            for agent in self.agents.values():
                agent.plugins.on_change = lambda _driver, n=agent.name: self._requeue_node(n)
                self.watcher.add(agent.plugins)
            self.watcher.scan_once()
            self.watcher.start()
            self.heartbeats.add_all({a.name: a.heartbeat for a in self.agents.values()})
            self.heartbeats.start()
            self._spawn(self._watch_pods, "pod-watch")
            for i in range(self.workers):
                self._spawn(self._work, f"pod-sync-{i}")
            self._spawn(self._reconcile, "reconcile")
            deadline = time.monotonic() + timeout
            while not self._synced.wait(0.1):
                if self._watch_error is not None:
                    raise HarnessError(f"fake nodes: cannot list pods: {self._watch_error}") from self._watch_error
                if time.monotonic() > deadline:
                    raise HarnessError(f"fake nodes: pods not listed within {timeout:.0f}s")
        except BaseException:
            self.stop()
            raise
        log.info("fake nodes ready: %d nodes under %s", len(self.agents), self.root)
        return self

    def stop(self) -> None:
        """Stop heartbeats, watches and workers; nodes and checkpoints stay (a restart resumes)."""
        self._stop.set()
        self.queue.shutdown()
        self.heartbeats.stop()
        self.watcher.stop()
        deadline = time.monotonic() + 5.0  # a worker stuck in a DRA call must not hold shutdown for 45 s
        for t in self._threads:
            t.join(max(0.0, min(0.5 if t.name == "pod-watch" else 5.0, deadline - time.monotonic())))
        self.executor.shutdown(wait=False, cancel_futures=True)
        for agent in self.agents.values():
            agent.close()

    def __enter__(self) -> FakeNodes:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def delete_nodes(self) -> None:
        """Delete the Node objects and leases of this process's nodes."""
        for name in self.agents:
            self.kube.delete("Node", name)
            self.kube.delete("Lease", name, nodeobj.LEASE_NAMESPACE)

    def agent(self, name: str) -> NodeAgent:
        try:
            return self.agents[name]
        except KeyError:
            raise UsageError(f"node {name!r} is not served here; nodes: {', '.join(sorted(self.agents))}") from None

    def set_lost(self, name: str, lost: bool) -> None:
        self.agent(name).set_lost(lost)
        if not lost:
            self._requeue_node(name)

    def _spawn(self, fn: object, name: str) -> None:
        t = threading.Thread(target=fn, name=name, daemon=True)  # type: ignore[arg-type]
        t.start()
        self._threads.append(t)

    # -- pod watch ---------------------------------------------------------------------------
    def _watch_pods(self) -> None:
        while not self._stop.is_set():
            try:
                items, rv = self.kube.list("Pod")
                seen = set()
                for pod in items:
                    if self._accept(pod):
                        seen.add(pod["metadata"]["uid"])
                with self._pods_lock:
                    gone = [uid for uid in self._pods if uid not in seen]
                    for uid in gone:
                        self._pods.pop(uid, None)
                for uid in gone:
                    self.queue.add(uid)
                self._synced.set()
                while not self._stop.is_set():
                    for etype, obj in self.kube.watch("Pod", resource_version=rv, timeout_seconds=60, stop=self._stop):
                        rv = obj.get("metadata", {}).get("resourceVersion") or rv
                        if etype == "BOOKMARK":
                            continue
                        if etype == "DELETED":
                            self._forget(obj)
                        else:
                            self._accept(obj)
            except ApiError as exc:
                if exc.status != 410:
                    self._watch_failed(exc)
            except HarnessError as exc:
                self._watch_failed(exc)

    def _watch_failed(self, exc: BaseException) -> None:
        if self._stop.is_set():
            return
        if not self._synced.is_set():
            self._watch_error = exc
        log.warning("pod watch failed, re-listing: %s", exc)
        self._stop.wait(1.0)

    def _accept(self, pod: Obj) -> bool:
        node = pod.get("spec", {}).get("nodeName")
        if node not in self.agents:
            return False
        uid = pod["metadata"]["uid"]
        with self._pods_lock:
            self._pods[uid] = pod
            self._pod_node[uid] = node
        self.queue.add(uid)
        return True

    def _forget(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        with self._pods_lock:
            known = self._pods.pop(uid, None) is not None or uid in self._pod_node
        if known:
            self.queue.add(uid)

    def _requeue_node(self, name: str) -> None:
        with self._pods_lock:
            uids = [uid for uid, node in self._pod_node.items() if node == name]
        for uid in uids:
            self.queue.forget(uid)
            self.queue.add(uid)

    # -- pod sync ----------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            uid = self.queue.get()
            if uid is None:
                return
            try:
                self._sync(uid)
                self.queue.forget(uid)
            except Exception as exc:  # every failure of one pod is retried; none may stop the worker
                delay = self.queue.add_rate_limited(uid)
                level = logging.INFO if isinstance(exc, (PrepareError, HarnessError)) else logging.ERROR
                log.log(level, "sync of pod %s failed (retry in %.1fs): %s", uid, delay, exc, exc_info=level >= logging.ERROR)
            finally:
                self.queue.done(uid)

    def _sync(self, uid: str) -> None:
        with self._pods_lock:
            pod = self._pods.get(uid)
            node = self._pod_node.get(uid)
        if node is None:
            return
        agent = self.agents[node]
        assert agent.manager is not None
        if agent.lost:
            if not self._stop.is_set():
                self.queue.add_after(uid, 1.0)
            return
        if pod is None:  # gone from the API server
            agent.manager.unprepare_pod(uid)
            with self._pods_lock:
                if uid not in self._pods:
                    self._pod_node.pop(uid, None)
                    self._started.discard(uid)
            self.events.forget(uid)
            return
        md = pod["metadata"]
        if md.get("deletionTimestamp"):
            try:
                agent.manager.unprepare_pod(uid)
            except PrepareError as exc:
                self.events.warn(pod, node, FAILED_UNPREPARE, str(exc))
                raise
            try:
                self.kube.delete("Pod", md["name"], md["namespace"], grace_seconds=0, uid=uid)
            except ApiError as exc:
                if not exc.conflict:  # 409: replaced by a pod with the same name
                    raise
            return
        if terminal(pod):
            agent.manager.unprepare_pod(uid)
            return
        with self._pods_lock:
            if uid in self._started:
                return
        running = self._already_running(pod, agent)
        try:
            claims = resolve_claims(self.kube, pod)
            agent.manager.prepare_pod(uid, claims)
        except PrepareError as exc:
            self.events.warn(pod, node, FAILED_PREPARE, str(exc))
            raise
        uids = {c.ref.name: c.ref.uid for c in claims}
        names = {pc: uids[rc] for pc, rc in pod_claim_names(pod).items() if rc in uids}
        prepared = {pc: agent.manager.prepared_devices(u) for pc, u in names.items()}
        if running and not agent.runtime.lost(pod, prepared):
            # Prepared again after the agent's (re)start; its containers keep running. After a reboot
            # they are gone and are created again below, as the kubelet does.
            with self._pods_lock:
                self._started.add(uid)
            return
        try:
            agent.runtime.start_pod(pod, prepared, names)
        except ContainerError as exc:
            self.events.warn(pod, node, FAILED_CONTAINER, str(exc))
            self._container_waiting(pod, exc)
            raise
        try:
            self.kube.patch("Pod", md["name"], running_status(pod, agent.spec), md["namespace"], "strategic", "status")
        except ApiError as exc:
            if exc.not_found:
                return
            raise
        with self._pods_lock:
            self._started.add(uid)

    def _container_waiting(self, pod: Obj, exc: ContainerError) -> None:
        """Show the container waiting with CreateContainerError, as the kubelet does (the pod stays Pending)."""
        md = pod["metadata"]
        statuses = [
            {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "started": False,
             "restartCount": 0, "state": {"waiting": {"reason": CREATE_CONTAINER_ERROR, "message": str(exc)[:1024]}}}
            for c in pod.get("spec", {}).get("containers") or []
        ]  # fmt: skip
        try:
            self.kube.patch("Pod", md["name"], {"status": {"containerStatuses": statuses}}, md["namespace"],
                            "strategic", "status")  # fmt: skip
        except ApiError as exc2:
            if not exc2.not_found:
                raise

    @staticmethod
    def _already_running(pod: Obj, agent: NodeAgent) -> bool:
        """A pod this node started before a restart: Running, and its claims (if any) in the checkpoint.

        Its claims are still prepared again before it counts as synced, as a restarted kubelet does: the
        claim cache comes back from the checkpoint unprepared (pkg/kubelet/cm/dra/claiminfo.go,
        ``newClaimInfoFromState``) and the pod's next sync calls ``PrepareResources``, which skips only
        claims with ``isPrepared()`` (pkg/kubelet/cm/dra/manager.go, ``prepareResources``)."""
        status = pod.get("status", {})
        if status.get("phase") != "Running" or not status.get("containerStatuses"):
            return False
        if not pod.get("spec", {}).get("resourceClaims"):
            return True
        assert agent.manager is not None
        return pod["metadata"]["uid"] in agent.manager.pods()

    # -- reconcile ---------------------------------------------------------------------------
    def _reconcile(self) -> None:
        """Unprepare claims of pods that are no longer on the node (the kubelet's reconcile loop)."""
        while not self._stop.wait(self.reconcile_interval):
            if not self._synced.is_set():
                continue
            self.reconcile_once()

    def reconcile_once(self) -> None:
        with self._pods_lock:
            active: dict[str, set[str]] = {}
            for uid, pod in self._pods.items():
                if not terminal(pod):
                    active.setdefault(self._pod_node[uid], set()).add(uid)
        for name, agent in self.agents.items():
            if agent.lost or agent.manager is None:
                continue
            try:
                agent.manager.forget_inactive(active.get(name, set()))
            except PrepareError as exc:
                log.info("node %s: reconcile: %s", name, exc)
