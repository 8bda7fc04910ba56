"""``installed``: a DRA driver already installed in the cluster, on the cluster's own nodes; draguard
starts nothing, waits for the driver's slices and, where it finds them, reaches the driver's DaemonSet
through the Kubernetes API and the nodes through their kind containers.

This is how vendors ship a DRA driver: a kubelet plugin per node, run by a DaemonSet, on nodes with a
real kubelet, container runtime and CDI. When the scenario pins its pods to nodes, the inventory
``no-leak`` compares with is the driver's devices there that no claim held when the run started. What a
step may do to the driver and the nodes:

- **restart the driver on a node** (``driver-restart``): delete its pod there (``gracePeriodSeconds: 0``
  for a kill) and wait until the DaemonSet controller's replacement is Ready;
- **take the driver down on a node** (``driver-down``): a node-affinity term on the DaemonSet's pod
  template that excludes the node (``matchFields metadata.name NotIn``); the DaemonSet controller then
  deletes the pod there (pkg/controller/daemon: a node the template no longer fits does not keep its
  daemon pod). The same patch sets ``updateStrategy: OnDelete`` meanwhile, so that the new template
  does not roll the driver on every other node; bringing it back restores the template and the
  strategy exactly, whose hash is the original revision's, so nothing rolls then either. The restoring
  patch is journaled before the first change, so ``draguard cleanup`` puts the DaemonSet back after a
  crash, and :meth:`InstalledFleet.stop` does at teardown;
- on a draguard kind cluster (:class:`~draguard.harness.cluster.kind.cluster.KindNodes`):
  **restart a node's agent** (``node-restart``): its kubelet restarted inside the node container
  (SIGKILL for a kill; systemd starts it again, as on a real node), and **lose a node** (``node-loss``):
  its container paused (kubelet, containerd and the pods frozen: heartbeats stop, nothing runs) and
  thawed when it returns; the thaw is journaled before the pause.

Finding the DaemonSet: the one the scenario names (``driver.daemonSet``), else the one whose pod
template mounts the driver's plugin directory from the host, ``/var/lib/kubelet/plugins/<driver>``,
where a kubelet plugin keeps its DRA socket by convention (k8s.io/dynamic-resource-allocation
kubeletplugin: ``PluginDataDirectoryPath`` defaults to ``/var/lib/kubelet/plugins/<driver name>``).

Talks to: the cluster (DaemonSets, Pods, Nodes), the kind node containers.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from draguard.harness.core.errors import HarnessError, UsageError

from ..cluster.kind.cluster import KindCluster, KindNodes
from ..driver.external import TEST_DRIVER_NAME, claims_of_cdi_specs
from ..invariants import DeviceId, NodeDriverState
from ..kube import RUN_LABEL, ApiError, Kube, Obj
from .base import FLEETS, DriverControl, Fleet, FleetRun, NodeControl, Undoable
from .coverage import free_devices, pinned_nodes, runs_containers

__all__ = ["InstalledFleet", "find_daemonset", "controlled_pods", "PLUGINS_DIR"]

PLUGINS_DIR = "/var/lib/kubelet/plugins"
CDI_DIR = "/var/run/cdi"
CDI_READ_EVERY = 3.0
WAIT_S = 120.0
"""How long a driver pod may take to go or to come back Ready (image present; the DaemonSet controller
acts within seconds)."""


def find_daemonset(kube: Kube, driver: str, named: tuple[str, str] | None = None) -> Obj | None:
    """The DaemonSet running ``driver``'s kubelet plugin: ``named`` (namespace, name), else the one whose
    pod template mounts ``/var/lib/kubelet/plugins/<driver>`` from the host; None when there is none
    (UsageError when a named one is missing, or when several mount it)."""
    if named is not None:
        ds = kube.get("DaemonSet", named[1], named[0])
        if ds is None:
            raise UsageError(f"driver.daemonSet {named[0]}/{named[1]}: no such DaemonSet in the cluster")
        return ds
    plugin_dir = f"{PLUGINS_DIR}/{driver}"
    found = [ds for ds in kube.items("DaemonSet") if any(
        (path := ((v.get("hostPath") or {}).get("path") or "").rstrip("/")) == plugin_dir or path.startswith(plugin_dir + "/")
        for v in ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("volumes") or [])]
    if len(found) > 1:
        names = ", ".join(f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in found)
        raise UsageError(f"driver {driver}: several DaemonSets mount {plugin_dir} ({names}); name one in driver.daemonSet")
    return found[0] if found else None


def controlled_pods(pods: list[Obj], ds: Obj) -> list[Obj]:
    """Those of ``pods`` that DaemonSet ``ds`` controls (its selector's labels may be on other pods too: the
    driver's controller, or every pod of the namespace for a selector of matchExpressions alone)."""
    uid = ds.get("metadata", {}).get("uid")
    return [p for p in pods if any(o.get("controller") and o.get("kind") == "DaemonSet" and o.get("uid") == uid
                                   for o in p["metadata"].get("ownerReferences") or [])]


def _ready(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _exclusion(original: dict[str, Any] | None, nodes: set[str]) -> dict[str, Any]:
    """``original`` affinity with every required node-selector term also excluding ``nodes``."""
    affinity = dict(original or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [dict(t) for t in required.get("nodeSelectorTerms") or []] or [{}]
    out = {"key": "metadata.name", "operator": "NotIn", "values": sorted(nodes)}
    for term in terms:  # terms are ORed: each one must exclude the nodes
        term["matchFields"] = [*(term.get("matchFields") or []), out]
    required["nodeSelectorTerms"] = terms
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    return affinity


@FLEETS.register("installed", summary="nodes and a driver already in the cluster; draguard starts none; chaos through "
                                      "the API to its DaemonSet, and to the node containers on kind")
class InstalledFleet(Fleet):
    name = "installed"
    capabilities = frozenset({"restart-driver", "kill-node"})
    """At most these: :meth:`offers` says which this cluster has."""
    republish_grace = 90.0
    """A kubelet that starts wipes its node's ResourceSlices until the drivers register again
    (pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go, NewDRAPluginManager), and a driver built on
    k8s.io/dynamic-resource-allocation's resourceslice controller publishes a deleted slice again only
    after DefaultSyncDelay (30 s), trusting its mutation cache for DefaultMutationCacheTTL (1 min): on
    kind the upstream test driver's slices came back about 60 s after a kubelet restart. Devices that
    are back within this bound are not a leak; the cleanup phase logs how long they took."""

    def __init__(self) -> None:
        super().__init__()
        self.kube: Kube | None = None
        self.daemonset: Obj | None = None
        self.kind_nodes: KindNodes | None = None
        self._excluded: Counter[str] = Counter()
        """Node -> how many steps have the driver down there now (each step brings back its own)."""
        self._original: dict[str, Any] | None = None
        """The DaemonSet's template affinity and update strategy before the first exclusion."""
        self._ds_lock = threading.RLock()
        """Steps run on their own threads: one change of the DaemonSet at a time, each patch sent from the
        state it was computed from (else an exclusion computed before a restore could land after it)."""
        self._paused: set[str] = set()
        self._driver = ""
        self._nodes: tuple[str, ...] = ()
        self._cdi_cache: tuple[float, tuple[NodeDriverState, ...]] | None = None
        self._before_run: dict[str, frozenset[str]] = {}
        """Node -> claims whose CDI specs were there before the run started (another run's, or a leak)."""
        self._cdi_seen: dict[str, frozenset[str]] = {}
        """Node -> the claims of its CDI specs when last read (a paused node's files cannot change)."""
        self._run_id = ""
        self._foreign: set[str] = set()
        """UIDs of claims seen in the cluster that are not this run's (another run's, another user's)."""

    def start(self, run: FleetRun) -> None:
        sc = run.scenario
        run.log(f"external driver {sc.driver.name}: using the cluster's nodes and slices")
        self.wait_slices(run, set(), timeout=30)
        pinned = pinned_nodes(sc)
        if pinned:  # the inventory no-leak compares with: this run's nodes, what no one held at the start
            self.inventory = frozenset(DeviceId(*d) for d in free_devices(run.kube, sc.driver.name, pinned))
            run.log(f"pods pinned to {', '.join(pinned)}: {len(self.inventory)} free device(s) there")
        self.kube = run.kube
        self._driver = sc.driver.name
        self._run_id = run.run_id
        nodes = {n["metadata"]["name"]: n for n in run.kube.items("Node")}
        self._nodes = tuple(pinned or ()) or tuple(nodes)
        self.real_nodes = bool(self._nodes) and all(runs_containers(nodes.get(n) or {}) for n in self._nodes)
        named = run.scenario.driver.daemon_set
        try:
            self.daemonset = find_daemonset(run.kube, run.scenario.driver.name, named)
        except ApiError as exc:  # not allowed to list DaemonSets: the driver is still judged, without driver chaos
            run.log(f"cannot look for the driver's DaemonSet ({exc}); steps that restart the driver cannot run")
        kind = KindCluster.of_kubeconfig(run.kubeconfig) if str(run.kubeconfig) else None
        self.kind_nodes = kind.node_containers() if kind is not None else None
        if self.reads_node_files:  # what the driver held before this run is not this run's to judge
            self._before_run = {node: self._cdi_claims(node) for node in self._nodes}
            held = {node: len(uids) for node, uids in self._before_run.items() if uids}
            if held:
                run.log("CDI specs of the driver already on the nodes before the run, left out of no-leak: "
                        + ", ".join(f"{node}: {n}" for node, n in sorted(held.items())))
        ds = self.daemonset
        run.log(f"driver {run.scenario.driver.name}: "
                + (f"DaemonSet {ds['metadata']['namespace']}/{ds['metadata']['name']}" if ds else "no DaemonSet found")
                + (f"; nodes are containers of kind cluster {kind.name}" if kind else ""))

    def offers(self, capability: str) -> bool:
        if capability == "restart-driver":
            return self.daemonset is not None
        if capability == "kill-node":
            return self.kind_nodes is not None
        return False

    # -- the driver --------------------------------------------------------------------------------
    def driver_control(self, node: str, before: Undoable) -> DriverControl | None:
        return _DaemonSetDriver(self, node, before) if self.daemonset is not None else None

    def _ds(self) -> tuple[Kube, str, str]:
        assert self.kube is not None and self.daemonset is not None
        md = self.daemonset["metadata"]
        return self.kube, md["namespace"], md["name"]

    def driver_pods(self, node: str) -> list[Obj]:
        """The DaemonSet's pods on ``node`` (terminating ones included): those it controls, not every pod its
        selector's labels match (another workload of the driver may carry them; a selector of
        matchExpressions alone names no labels here)."""
        kube, ns, _ = self._ds()
        labels = ((self.daemonset or {}).get("spec") or {}).get("selector", {}).get("matchLabels") or {}
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        pods, _ = kube.list("Pod", ns, label_selector=selector or None, field_selector=f"spec.nodeName={node}")
        return controlled_pods(pods, self.daemonset or {})

    def wait(self, what: str, predicate: Callable[[], bool], timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise HarnessError(f"{what}: not after {timeout:.0f}s")
            time.sleep(0.5)

    def exclude(self, node: str, before: Undoable) -> None:
        """Take the driver's pod off ``node`` (see the module docstring); journaled before the patch."""
        kube, ns, name = self._ds()
        with self._ds_lock:
            if self._original is None:
                ds = kube.get("DaemonSet", name, ns) or {}
                spec = ds.get("spec") or {}
                self._original = {"affinity": ((spec.get("template") or {}).get("spec") or {}).get("affinity"),
                                  "updateStrategy": spec.get("updateStrategy")}
            before("patch-object", self.restore_undo())
            self._excluded[node] += 1
            self._patch(_exclusion(self._original["affinity"], set(self._excluded)), {"type": "OnDelete", "rollingUpdate": None})

    def include(self, node: str) -> None:
        """Let the driver's pod back onto ``node`` once no other step still has it down there; the DaemonSet
        restored exactly once no node is excluded."""
        with self._ds_lock:
            if self._excluded[node] > 1:  # another step took it down there too and brings it back itself
                self._excluded[node] -= 1
                return
            self._excluded.pop(node, None)
            if self._original is None:
                return
            if self._excluded:
                self._patch(_exclusion(self._original["affinity"], set(self._excluded)), {"type": "OnDelete", "rollingUpdate": None})
            else:
                self._restore()

    def restore_undo(self) -> dict[str, Any]:
        """The journal's ``patch-object`` arguments that put the DaemonSet back as it was."""
        _, ns, name = self._ds()
        return {"kind": "DaemonSet", "name": name, "namespace": ns, "patch": self._restore_patch(), "patchType": "merge"}

    def _restore_patch(self) -> dict[str, Any]:
        original = self._original or {}
        affinity = original.get("affinity")
        # A merge patch merges maps: put back the node affinity as it was (or remove it), and the strategy;
        # the required terms the exclusion added go (null) where the original had none.
        node_affinity = (affinity or {}).get("nodeAffinity")
        if node_affinity:
            node_affinity = {**node_affinity, REQUIRED: node_affinity.get(REQUIRED)}
        restored: Any = {"nodeAffinity": node_affinity} if affinity else None
        strategy = original.get("updateStrategy") or {"type": "RollingUpdate"}
        if strategy.get("type") == "OnDelete":
            strategy = {**strategy, "rollingUpdate": None}
        return {"spec": {"updateStrategy": strategy, "template": {"spec": {"affinity": restored}}}}

    def _patch(self, affinity: dict[str, Any], strategy: dict[str, Any]) -> None:
        kube, ns, name = self._ds()
        kube.patch("DaemonSet", name, {"spec": {"updateStrategy": strategy, "template": {"spec": {"affinity": affinity}}}}, ns)

    def _restore(self) -> None:
        kube, ns, name = self._ds()
        kube.patch("DaemonSet", name, self._restore_patch(), ns)
        self._original = None

    # -- the nodes ---------------------------------------------------------------------------------
    def node_control(self, node: str, before: Undoable) -> NodeControl | None:
        return _KindNode(self, node, before) if self.kind_nodes is not None else None

    def external_states(self) -> tuple[NodeDriverState, ...]:
        """On kind, what the upstream test driver holds prepared on each of the run's nodes, seen as its CDI
        spec files in the node's ``/var/run/cdi`` (one per claim and request, named
        ``<driver>-<claim UID>-<request>.json``, removed at unprepare: test/e2e/dra/test-driver/app/
        kubeletplugin.go); () for any other driver or cluster, whose files draguard cannot name. Specs
        that were there when the run started (another run's claims, or an earlier leak) are left out:
        they are not this run's to judge; so are those of claims the cluster has without this run's
        label (another user's pods on the same nodes, prepared while the run goes on). Read at most every :data:`CDI_READ_EVERY` seconds (each read
        is a command in every node container)."""
        if self.kind_nodes is None or self._driver != TEST_DRIVER_NAME:
            return ()
        now = time.monotonic()
        if self._cdi_cache is not None and now - self._cdi_cache[0] < CDI_READ_EVERY:
            return self._cdi_cache[1]
        states = []
        foreign = self._foreign_claims()
        for node in self._nodes:
            if node in self._paused and node in self._cdi_seen:  # frozen: its files are as last read
                seen = self._cdi_seen[node]
            else:
                seen = self._cdi_seen[node] = self._cdi_claims(node)
            uids = seen - self._before_run.get(node, frozenset()) - foreign
            states.append(NodeDriverState(node=node, driver=self._driver, prepared={u: () for u in uids}, cdi_specs=uids))
        self._cdi_cache = (now, tuple(states))
        return self._cdi_cache[1]

    def _foreign_claims(self) -> frozenset[str]:
        """UIDs of every claim seen so far that does not carry this run's label (kept once seen: a claim
        deleted since may still have its spec on a node)."""
        if self.kube is not None:
            self._foreign.update(c["metadata"]["uid"] for c in self.kube.items("ResourceClaim")
                                 if (c["metadata"].get("labels") or {}).get(RUN_LABEL) != self._run_id)
        return frozenset(self._foreign)

    def _cdi_claims(self, node: str) -> frozenset[str]:
        assert self.kind_nodes is not None
        try:
            listing = self.kind_nodes.engine.run(["exec", node, "ls", "-1", CDI_DIR], timeout=20, check=False)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"node {node}: listing {CDI_DIR} did not answer in {exc.timeout:.0f}s") from exc
        if listing.returncode != 0 and "No such file" not in listing.stderr:  # unread is not empty
            raise HarnessError(f"node {node}: cannot list the driver's CDI specs in {CDI_DIR}: "
                               f"{(listing.stderr or listing.stdout).strip()[-300:]}")
        return claims_of_cdi_specs(self._driver, listing.stdout.split())

    @property
    def reads_node_files(self) -> bool:
        return self.kind_nodes is not None and self._driver == TEST_DRIVER_NAME

    def stop(self) -> None:
        """Thaw every node still paused and put the DaemonSet back (a step cut short leaves them so)."""
        errors = []
        for node in sorted(self._paused):
            try:
                assert self.kind_nodes is not None
                self.kind_nodes.unpause(node)
                self._paused.discard(node)
            except HarnessError as exc:
                errors.append(f"node {node} stays paused: {exc}")
        with self._ds_lock:
            if self._original is not None:
                self._excluded.clear()
                try:
                    self._restore()
                except HarnessError as exc:
                    errors.append(f"DaemonSet not restored: {exc}")
        super().stop()
        if errors:
            raise HarnessError("; ".join(errors) + " (`draguard cleanup` replays the journal)")


class _DaemonSetDriver:
    """The driver's pod on one node, as a step uses it."""

    def __init__(self, fleet: InstalledFleet, node: str, before: Undoable) -> None:
        self.fleet = fleet
        self.node = node
        self._before = before

    def _running(self) -> list[Obj]:
        return [p for p in self.fleet.driver_pods(self.node) if _ready(p)]

    def restart(self, kill: bool = True) -> None:
        pods = self._running()
        if not pods:
            raise HarnessError(f"no Ready pod of the driver's DaemonSet on node {self.node} to restart")
        self._before("none", {"why": f"the DaemonSet starts the driver's pod on {self.node} again"})
        kube, ns, _ = self.fleet._ds()
        gone = {p["metadata"]["uid"] for p in pods}
        for pod in pods:
            kube.delete("Pod", pod["metadata"]["name"], ns, grace_seconds=0 if kill else None)
        self.fleet.wait(f"the driver's new pod on {self.node} Ready",
                        lambda: any(p["metadata"]["uid"] not in gone for p in self._running()))

    def down(self) -> None:
        if not self._running():  # nothing to take down: the step must not say it did
            raise HarnessError(f"no Ready pod of the driver's DaemonSet on node {self.node} to take down")
        self.fleet.exclude(self.node, self._before)
        self.fleet.wait(f"the driver's pod gone from {self.node}", lambda: not self.fleet.driver_pods(self.node))

    def up(self) -> None:
        self.fleet.include(self.node)
        if self.fleet._excluded[self.node]:  # another step still has it down here, and brings it back itself
            return
        self.fleet.wait(f"the driver's pod on {self.node} Ready again", lambda: bool(self._running()))


class _KindNode:
    """A kind node container, as a step uses it."""

    def __init__(self, fleet: InstalledFleet, node: str, before: Undoable) -> None:
        assert fleet.kind_nodes is not None
        self.fleet = fleet
        self.nodes = fleet.kind_nodes
        self.node = node
        self._before = before

    def restart_agent(self, kill: bool = True) -> None:
        """Restart the node's kubelet; returns once another kubelet process (a new main pid) is active.
        HarnessError when none runs to restart (``systemctl kill`` of a unit with no process succeeds)."""
        old = self._main_pid()
        if not old:
            raise HarnessError(f"no kubelet running in node {self.node} to restart (systemd's kubelet.service has no main process)")
        self._before("none", {"why": f"systemd in node {self.node} starts its kubelet again"})
        if kill:  # kind's kubelet.service restarts it (Restart=always)
            self.nodes.exec(self.node, ["systemctl", "kill", "--signal=SIGKILL", "kubelet"])
        else:
            self.nodes.exec(self.node, ["systemctl", "restart", "kubelet"])
        self.fleet.wait(f"a new kubelet of {self.node} active (the old one was pid {old})",
                        lambda: self._active() and self._main_pid() not in (0, old))

    def _main_pid(self) -> int:
        """The kubelet unit's main process in the node (0: none, or it could not be read)."""
        shown = self.nodes.engine.run(["exec", self.node, "systemctl", "show", "--property=MainPID", "--value", "kubelet"],
                                      timeout=20, check=False)
        value = shown.stdout.strip()
        return int(value) if shown.returncode == 0 and value.isdigit() else 0

    def _active(self) -> bool:
        state = self.nodes.engine.run(["exec", self.node, "systemctl", "is-active", "kubelet"], timeout=20, check=False)
        return state.stdout.strip() == "active"

    def lose(self) -> None:
        self._before("kind-node", {**self.nodes.undo_args(self.node), "action": "unpause"})
        if self.fleet.reads_node_files:  # what the frozen node holds: its files cannot be read while paused
            self.fleet._cdi_seen[self.node] = self.fleet._cdi_claims(self.node)
        self.fleet._paused.add(self.node)  # before the pause: its CDI specs are read as last seen from then on
        self.nodes.pause(self.node)

    def back(self) -> None:
        self.nodes.unpause(self.node)
        self.fleet._paused.discard(self.node)
