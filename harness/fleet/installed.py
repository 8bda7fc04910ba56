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

- against draguard's fake driver (deploy/fake-driver.yaml), through its pod on the node with the API's exec
  (:mod:`draguard.harness.cluster.podfiles`): **its faults** (``prepare-failure``, ``unprepare-failure``,
  ``reset-failure``... :data:`FAKE_DRIVER_FAULTS`), written into the fault file it watches (the previous
  file journaled first), and **a device failure**, in its device truth; the judge reads that truth there
  too (:meth:`InstalledFleet.node_truths`), with what this fleet saw of the run's running containers
  (:class:`_Containers`: the devices their environment names, read through an ephemeral container, and
  whether one had failed when they started). A mutant's run puts each node's device truth back after it.

Finding the DaemonSet: the one the scenario names (``driver.daemonSet``), else the one whose pod
template mounts the driver's plugin directory from the host, ``/var/lib/kubelet/plugins/<driver>``,
where a kubelet plugin keeps its DRA socket by convention (k8s.io/dynamic-resource-allocation
kubeletplugin: ``PluginDataDirectoryPath`` defaults to ``/var/lib/kubelet/plugins/<driver name>``).

Talks to: the cluster (DaemonSets, Pods and their exec and ephemeral containers, Nodes, ResourceClaims), the
kind node containers.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from draguard.harness.core.commands import run_restart_command
from draguard.harness.core.errors import HarnessError, UsageError

from ..cluster.kind.cluster import KindCluster, KindNodes
from ..cluster.kind.driverimage import FAKE_DRIVER_REPO
from ..cluster.podfiles import PodFiles
from ..devices.truth import HardwareFault, Incident, NodeTruth, truth_dir, TRUTH_FILE
from ..driver import fault_control
from ..driver.external import TEST_DRIVER_NAME, claims_of_cdi_specs
from ..driver.state import Checkpoint
from ..invariants import DeviceId, DeviceState, NodeDriverState
from ..kube import RUN_LABEL, ApiError, Kube, Obj
from .base import FLEETS, DriverControl, FaultFile, Fleet, FleetRun, NodeControl, NodeDevices, Undoable
from .coverage import free_devices, pinned_nodes, runs_containers

__all__ = ["InstalledFleet", "find_daemonset", "controlled_pods", "fake_driver_container", "fake_driver_paths",
           "installed_offers", "FAKE_DRIVER_FAULTS", "PLUGINS_DIR"]

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


def fake_driver_container(ds: Obj) -> str | None:
    """The name of the container of ``ds``'s pod template that runs draguard's fake driver (its image,
    deploy/fake-driver.yaml's, or its entry point in the command), or None."""
    for c in ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []:
        image = str(c.get("image") or "")
        if image.rsplit(":", 1)[0] == FAKE_DRIVER_REPO or "draguard.harness.driver.main" in (c.get("command") or []):
            return str(c.get("name") or "")
    return None


FAKE_DRIVER_FAULTS: Mapping[str, str] = {
    "prepare-failure": "driver-faults",
    "prepare-hang": "driver-faults",
    "unprepare-failure": "driver-faults",
    "reset-failure": "driver-faults",
    "reset-slow": "driver-faults",
    "device-failure": "device-truth",
}
"""Faults of draguard's fake driver (they need ``fake-driver``, or ``rpc-faults`` without the gRPC interposer)
that an installed fake driver takes through the files its pod shares with the node -> the capability of
this fleet that carries them: its fault file, or its device truth. Crash points and checkpoint damage are
not among them: they need the driver's process kept down and started by the run, which the DaemonSet's
kubelet does instead."""


def installed_offers(daemonset: bool, kind_nodes: bool, fake_driver: bool) -> set[str]:
    """What this fleet gives a run's steps on a cluster (:data:`~.base.FLEET_CAPABILITIES` names): the
    driver's restarts and stops through its DaemonSet, the nodes of draguard's kind cluster, and, where
    the DaemonSet runs draguard's fake driver, its fault file and device truth through its pods."""
    return ({"restart-driver", "stop-driver"} if daemonset else set()) | ({"kill-node"} if kind_nodes else set()) | (
        {"driver-faults", "device-truth"} if daemonset and fake_driver else set())


def fake_driver_paths(ds: Obj, container: str, driver: str, node: str) -> tuple[str, str] | None:
    """Where the fake driver of ``ds``'s ``container`` keeps, on ``node``, its fault file's directory (its
    plugin directory) and its device truth's root: from its args (``--kubelet-dirs``: the kubelet's plugin
    directory, as deploy/fake-driver.yaml runs it; ``--root``: the device truth's root). None when its args
    do not say (no ``--root``)."""
    args: list[str] = []
    for c in ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []:
        if c.get("name") == container:
            args = [str(a) for a in c.get("args") or []]
    root = None
    for i, a in enumerate(args):
        if a.startswith("--root="):
            root = a.split("=", 1)[1]
        elif a == "--root" and i + 1 < len(args):
            root = args[i + 1]
    if not root:
        return None
    plugin = f"{PLUGINS_DIR}/{driver}" if "--kubelet-dirs" in args else f"{root.rstrip('/')}/{node}/plugins/{driver}"
    return plugin, root.rstrip("/")


def _with_mutant(args: list[str], mutant: str) -> list[str]:
    """The fake driver's container args with ``--mutant`` set to ``mutant`` (any earlier one dropped)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "--mutant":
            skip = True
            continue
        if not a.startswith("--mutant="):
            out.append(a)
    return [*out, f"--mutant={mutant}"]


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
    capabilities = frozenset({"restart-driver", "stop-driver", "kill-node", "driver-faults", "device-truth"})
    """At most these: :meth:`offers` says which this cluster has."""
    retry_grace = 90.0
    """A real kubelet prepares again a pod whose prepare failed (its driver down, a prepare failure) only when
    its pod worker syncs the pod again: after a back-off of 10 to 15 s (pkg/kubelet/pod_workers.go,
    workerBackOffPeriodJitterFactor), or at its periodic resync (1 min, jittered up to 1.5 min:
    workerResyncIntervalJitterFactor). On kind a newcomer whose prepare failed while its driver was down
    ("DRA driver gpu.draguard.dev is not registered") was not Running 60 s after the driver was back, when the
    fake node agents retry at once: expected progress is awaited this much longer than the scenario's settle."""
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
        self._books_seen: dict[str, _Books] = {}
        """Node -> the driver's CDI specs (and books) there when last read (a paused node's files cannot change)."""
        self._run_id = ""
        self._foreign: set[str] = set()
        """UIDs of claims seen in the cluster that are not this run's (another run's, another user's)."""
        self.fake: str | None = None
        """The DaemonSet's container that runs draguard's fake driver (its books are read in the nodes)."""
        self._mutant_restore: dict[str, Any] | None = None
        self._restart_command: str | None = None
        """``driver.restartCommand``: how steps restart the driver where no DaemonSet of it is found."""
        self._fault_files: dict[str, _PodFaultFile] = {}
        self._node_devices: dict[str, _PodDevices] = {}
        self._faults_root: Path | None = None
        """Where the fault files are composed before they are copied into the driver's pods."""
        self._truth_cache: tuple[float, tuple[NodeTruth, ...]] | None = None
        self._truth_seen: dict[str, NodeTruth] = {}
        """Node -> its device truth when last read (a paused node's, or one whose driver pod is being replaced)."""
        self._containers = _Containers(self)
        self._broken_before: dict[str, frozenset[str]] = {}
        """Node -> devices its device truth had failed, or not reset, when the run started (not this run's to judge)."""
        self._truth_restore: dict[str, tuple[PodFiles, str, str | None]] = {}
        """Node -> (its files, the truth's path, its content before a mutant ran), put back after the mutant."""
        self._log: Callable[[str], None] | None = None
        """The merge patch that puts the DaemonSet's containers back, while a mutant runs."""

    def start(self, run: FleetRun) -> None:
        sc = run.scenario
        run.log(f"external driver {sc.driver.name}: using the cluster's nodes and slices")
        self.kube = run.kube
        self._log = run.log
        self._driver = sc.driver.name
        self._run_id = run.run_id
        self._restart_command = sc.driver.restart_command
        named = run.scenario.driver.daemon_set
        try:
            self.daemonset = find_daemonset(run.kube, run.scenario.driver.name, named)
        except ApiError as exc:  # not allowed to list DaemonSets: the driver is still judged, without driver chaos
            run.log(f"cannot look for the driver's DaemonSet ({exc}); steps that restart the driver cannot run")
        self.fake = fake_driver_container(self.daemonset) if self.daemonset is not None else None
        self._faults_root = run.node_root / "installed-faults"
        if sc.driver.mutant:
            self._run_mutant(run, sc.driver.mutant)
        pinned = pinned_nodes(sc)
        self.wait_slices(run, set(pinned) if self.fake and pinned else set(), timeout=60 if self.fake else 30)
        if pinned:  # the inventory no-leak compares with: this run's nodes, what no one held at the start
            self.inventory = frozenset(DeviceId(*d) for d in free_devices(run.kube, sc.driver.name, pinned))
            run.log(f"pods pinned to {', '.join(pinned)}: {len(self.inventory)} free device(s) there")
        nodes = {n["metadata"]["name"]: n for n in run.kube.items("Node")}
        self._nodes = tuple(pinned or ()) or tuple(nodes)
        self.real_nodes = bool(self._nodes) and all(runs_containers(nodes.get(n) or {}) for n in self._nodes)
        kind = KindCluster.of_kubeconfig(run.kubeconfig) if str(run.kubeconfig) else None
        self.kind_nodes = kind.node_containers() if kind is not None else None
        self.reads_books = self.fake is not None and self.kind_nodes is not None
        if self.reads_node_files:  # what the driver held before this run is not this run's to judge
            self._before_run = {node: self._node_books(node).claims() for node in self._nodes}
            held = {node: len(uids) for node, uids in self._before_run.items() if uids}
            if held:
                run.log("claims of the driver already on the nodes before the run (its CDI specs"
                        + (" and books" if self.fake else "") + "), left out of no-leak: "
                        + ", ".join(f"{node}: {n}" for node, n in sorted(held.items())))
        if self.reads_books:  # the fake hardware as the run found it: what was already broken is not this run's
            for node in self._nodes:
                devices = self.node_devices(node)
                if devices is not None:
                    self._broken_before[node] = frozenset(
                        name for name, rec in devices.read().devices.items()
                        if rec.reset != "clean" or rec.health != "healthy" or rec.lost)
            broken = {node: names for node, names in self._broken_before.items() if names}
            if broken:
                run.log("devices already failed or not reset on the nodes before the run (their device truth), left "
                        "out of the judgment: " + "; ".join(f"{n}: {', '.join(sorted(d))}" for n, d in sorted(broken.items())))
        ds = self.daemonset
        run.log(f"driver {run.scenario.driver.name}: "
                + (f"DaemonSet {ds['metadata']['namespace']}/{ds['metadata']['name']}" if ds else "no DaemonSet found")
                + (" (draguard's fake driver: its books read in the nodes)" if self.fake and kind else "")
                + (f"; nodes are containers of kind cluster {kind.name}" if kind else ""))

    # -- a mutant of draguard's fake driver --------------------------------------------------------
    def _run_mutant(self, run: FleetRun, mutant: str) -> None:
        """Switch the installed fake driver to ``mutant``: its DaemonSet's container args get ``--mutant``
        (the restoring patch journaled first) and every pod is replaced; :meth:`stop` puts it back."""
        if self.daemonset is None or self.fake is None:
            raise UsageError(f"driver.mutant {mutant}: mutants are draguard's fake driver's, and no DaemonSet of the "
                             f"cluster runs it for driver {self._driver} (deploy/fake-driver.yaml installs it)")
        kube, ns, name = self._ds()
        containers = ((self.daemonset.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        self._mutant_restore = {"spec": {"template": {"spec": {"containers": containers}}}}
        if run.journal_undo is None:
            raise HarnessError("the installed fleet cannot journal the mutant's DaemonSet patch")
        run.journal_undo("patch-object", {"kind": "DaemonSet", "name": name, "namespace": ns,
                                          "patch": self._mutant_restore, "patchType": "merge"})
        self._save_truths(run)
        patched = [{**c, "args": _with_mutant(list(c.get("args") or []), mutant)} if c.get("name") == self.fake else c
                   for c in containers]
        run.log(f"mutant {mutant}: DaemonSet {ns}/{name} runs the fake driver with --mutant={mutant}")
        self.daemonset = kube.patch("DaemonSet", name, {"spec": {"template": {"spec": {"containers": patched}}}}, ns)
        self._rolled_out(f"the mutant {mutant} on every node")

    def _rolled_out(self, what: str, timeout: float = 240.0) -> None:
        """Wait until the DaemonSet's controller replaced every pod with one of its current template, Ready."""
        kube, ns, name = self._ds()

        def done() -> bool:
            ds = kube.get("DaemonSet", name, ns) or {}
            st, generation = ds.get("status") or {}, (ds.get("metadata") or {}).get("generation", 0)
            desired = st.get("desiredNumberScheduled", -1)
            return (st.get("observedGeneration", 0) >= generation and st.get("updatedNumberScheduled") == desired
                    and st.get("numberReady") == desired and not st.get("numberUnavailable"))

        self.wait(what, done, timeout)

    def _save_truths(self, run: FleetRun) -> None:
        """Keep each node's device truth as the mutant finds it (journaled first): a mutant's run may leave
        devices failed that no correct driver would (a reset failure after its claim was forgotten), and the
        hardware must be as it was for the next run, as each run of the fake fleet starts with new hardware."""
        kube, ns, _ = self._ds()
        assert self.daemonset is not None and run.journal_undo is not None
        for pod in controlled_pods(kube.items("Pod", ns), self.daemonset):
            node = (pod.get("spec") or {}).get("nodeName")
            found = self._pod_files(node) if node else None
            if found is None or node is None:
                continue
            files, (_, root) = found
            path = str(truth_dir(Path(root), node) / TRUTH_FILE)
            content = files.read(path)
            run.journal_undo("pod-file", files.undo_args(path, content))
            self._truth_restore[node] = (files, path, content)

    def _restore_mutant(self) -> None:
        if self._mutant_restore is None:
            return
        kube, ns, name = self._ds()
        self.daemonset = kube.patch("DaemonSet", name, self._mutant_restore, ns)
        self._mutant_restore = None
        self._rolled_out("the correct fake driver back on every node")
        for node, (files, path, content) in sorted(self._truth_restore.items()):
            files.write(path, content)
            if self._log is not None:
                self._log(f"device truth of {node} put back as it was before the mutant ran")
        self._truth_restore.clear()

    def offers(self, capability: str) -> bool:
        if capability == "restart-driver":
            return self.daemonset is not None or self._restart_command is not None
        return capability in installed_offers(self.daemonset is not None, self.kind_nodes is not None,
                                              self.fake is not None)

    # -- the fake driver's files on its nodes, through its pods ------------------------------------
    def _pod_files(self, node: str) -> tuple[PodFiles, tuple[str, str]] | None:
        if self.daemonset is None or self.fake is None or self.kube is None:
            return None
        paths = fake_driver_paths(self.daemonset, self.fake, self._driver, node)
        if paths is None:
            return None
        _, ns, name = self._ds()
        return PodFiles(self.kube, ns, name, node, self.fake), paths

    def fault_file(self, node: str) -> FaultFile | None:
        """The fake driver's fault file on ``node``, written inside its pod there through the API's exec (the
        pod mounts the plugin directory from the node, so the file outlasts the pod)."""
        if node not in self._fault_files:
            found = self._pod_files(node)
            if found is None or self._faults_root is None:
                return None
            files, (plugin_dir, _) = found
            self._fault_files[node] = _PodFaultFile(files, plugin_dir, self._faults_root, self._driver)
        return self._fault_files[node]

    def node_devices(self, node: str) -> NodeDevices | None:
        """The fake driver's device truth on ``node``, read and changed inside its pod there (the pod mounts
        the truth's root from the node)."""
        if node not in self._node_devices:
            found = self._pod_files(node)
            if found is None:
                return None
            files, (_, truth_root) = found
            self._node_devices[node] = _PodDevices(files, truth_root)
        return self._node_devices[node]

    # -- the driver --------------------------------------------------------------------------------
    def driver_control(self, node: str, before: Undoable) -> DriverControl | None:
        if self.daemonset is not None:
            return _DaemonSetDriver(self, node, before)
        if self._restart_command is not None:
            return _CommandDriver(self._restart_command, node, before)
        return None

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
        """On kind, what the driver holds prepared on each of the run's nodes, read in the node containers:
        for the upstream test driver its CDI spec files in ``/var/run/cdi`` (one per claim and request, named
        ``<driver>-<claim UID>-<request>.json``, removed at unprepare: test/e2e/dra/test-driver/app/
        kubeletplugin.go), its only record; for draguard's fake driver its books too (the checkpoint in its
        plugin directory: each claim's devices, each device's state) and its specs ``<driver>-<claim UID>.json``.
        () for any other driver or cluster, whose files draguard cannot name. Claims that were there when the
        run started (another run's, or an earlier leak) are left out: they are not this run's to judge; so are
        claims the cluster has without this run's label (another user's pods on the same nodes, prepared
        while the run goes on). Read at most every :data:`CDI_READ_EVERY` seconds (each read is a command
        in every node container)."""
        if not self.reads_node_files:
            return ()
        now = time.monotonic()
        if self._cdi_cache is not None and now - self._cdi_cache[0] < CDI_READ_EVERY:
            return self._cdi_cache[1]
        states = []
        foreign = self._foreign_claims()
        for node in self._nodes:
            if node in self._paused and node in self._books_seen:  # frozen: its files are as last read
                books = self._books_seen[node]
            else:
                books = self._books_seen[node] = self._node_books(node)
            states.append(books.state(self._before_run.get(node, frozenset()) | foreign))
        self._cdi_cache = (now, tuple(states))
        return self._cdi_cache[1]

    def _foreign_claims(self) -> frozenset[str]:
        """UIDs of every claim seen so far that does not carry this run's label (kept once seen: a claim
        deleted since may still have its spec on a node)."""
        if self.kube is not None:
            self._foreign.update(c["metadata"]["uid"] for c in self.kube.items("ResourceClaim")
                                 if (c["metadata"].get("labels") or {}).get(RUN_LABEL) != self._run_id)
        return frozenset(self._foreign)

    def _node_books(self, node: str) -> _Books:
        """The driver's CDI specs in ``node`` (and the fake driver's checkpoint, in the same command), read in
        its container; HarnessError when they cannot be read (unread is not empty; a missing /var/run/cdi or
        checkpoint is none)."""
        assert self.kind_nodes is not None
        checkpoint = f"{PLUGINS_DIR}/{self._driver}/checkpoint.json"
        args = (["sh", "-c", f"ls -1 {CDI_DIR} 2>&1 || test ! -e {CDI_DIR}; echo {_SEP}; cat {checkpoint} 2>&1 || "
                             f"test ! -e {checkpoint}"] if self.fake else ["ls", "-1", CDI_DIR])  # fmt: skip
        try:
            read = self.kind_nodes.engine.run(["exec", node, *args], timeout=20, check=False)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"node {node}: listing {CDI_DIR} did not answer in {exc.timeout:.0f}s") from exc
        if not self.fake:
            if read.returncode != 0 and "No such file" not in read.stderr:  # unread is not empty
                raise HarnessError(f"node {node}: cannot list the driver's CDI specs in {CDI_DIR}: "
                                   f"{(read.stderr or read.stdout).strip()[-300:]}")
            return _Books(node, self._driver, claims_of_cdi_specs(self._driver, read.stdout.split()), None)
        if read.returncode != 0 or _SEP not in read.stdout:
            raise HarnessError(f"node {node}: cannot read the fake driver's CDI specs in {CDI_DIR} and its checkpoint "
                               f"{checkpoint}: {(read.stderr or read.stdout).strip()[-300:]}")
        listing, _, raw = read.stdout.partition(_SEP)
        names = [] if "No such file" in listing else listing.split()
        prefix = f"{self._driver}-"
        specs = frozenset(n[len(prefix):-len(".json")] for n in names if n.startswith(prefix) and n.endswith(".json"))
        try:
            cp = (Checkpoint.from_json(json.loads(raw)) if raw.strip() and "No such file" not in raw
                  else Checkpoint(driver=self._driver, node=node))
        except (ValueError, KeyError, TypeError) as exc:
            raise HarnessError(f"node {node}: the fake driver's checkpoint {checkpoint} cannot be read: {exc}") from exc
        return _Books(node, self._driver, specs, cp)

    def node_truths(self) -> tuple[NodeTruth, ...]:
        """The fake driver's device truth on each of the run's nodes, read inside its pod there (at most every
        :data:`CDI_READ_EVERY` seconds; a node that cannot be read now, paused or its driver's pod being
        replaced, as last read), with what this fleet saw of the run's running containers there as incidents
        (:class:`_Containers`): no draguard runtime records them on a real node (``recorded`` False)."""
        if self.fake is None or self.daemonset is None or self.kube is None or not self.reads_books:
            return ()
        now = time.monotonic()
        if self._truth_cache is not None and now - self._truth_cache[0] < CDI_READ_EVERY:
            return self._truth_cache[1]
        out = []
        for node in self._nodes:
            devices = self.node_devices(node)
            if devices is None:
                continue
            if node not in self._paused or node not in self._truth_seen:
                try:
                    self._truth_seen[node] = devices.read(wait=False) if isinstance(devices, _PodDevices) else devices.read()
                except HarnessError:
                    if node not in self._truth_seen:
                        continue
            truth = self._truth_seen[node]
            before = self._broken_before.get(node, frozenset())
            out.append(dataclasses.replace(
                truth, devices={n: rec for n, rec in truth.devices.items() if n not in before},
                incidents=(*truth.incidents, *self._containers.incidents(node, truth)), recorded=False))
        self._truth_cache = (now, tuple(out))
        return self._truth_cache[1]

    @property
    def reads_node_files(self) -> bool:
        return self.kind_nodes is not None and (self._driver == TEST_DRIVER_NAME or self.fake is not None)

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
            try:
                self._restore_mutant()
            except HarnessError as exc:
                errors.append(f"DaemonSet not restored from the mutant: {exc}")
        self._containers.stop()
        summary = self._containers.summary()
        if summary is not None and self._log is not None:
            self._log(summary)
        super().stop()
        if errors:
            raise HarnessError("; ".join(errors) + " (`draguard cleanup` replays the journal)")


_SEP = "--draguard-books--"


class _PodFaultFile:
    """The fake driver's fault file on one node, reached through its pod (:class:`~.base.FaultFile`)."""

    def __init__(self, files: PodFiles, plugin_dir: str, root: Path, driver: str) -> None:
        self.files = files
        self.node = files.node
        self.driver = driver
        self.root = root
        self.remote = f"{plugin_dir}/{fault_control.FAULTS_FILE}"
        self._remote_used = f"{plugin_dir}/{fault_control.USED_FILE}"
        self.local = fault_control.faults_path(root, self.node, driver)
        self._fired: dict[str, int] = {}

    def pull(self) -> None:
        self.local.parent.mkdir(parents=True, exist_ok=True)
        for remote, local in ((self.remote, self.local), (self._remote_used, self.local.with_name(fault_control.USED_FILE))):
            content = self.files.read(remote)
            if content is None:
                local.unlink(missing_ok=True)
            else:
                local.write_text(content)

    def push(self) -> None:
        self.files.write(self.remote, self.local.read_text() if self.local.exists() else None)

    def undo(self, previous: str | None) -> tuple[str, dict[str, Any]]:
        return "pod-file", self.files.undo_args(self.remote, previous)

    def fired(self, kind: str) -> int:
        try:
            self.pull()
        except HarnessError:  # the driver's pod is being replaced: what was read last
            return self._fired.get(kind, 0)
        self._fired[kind] = fault_control.fired(self.root, self.node, self.driver, kind)
        return self._fired[kind]


_TRUTH_CHANGE = """
import sys
from draguard.harness.devices.truth import DeviceTruth, HardwareFault
root, node, op, device = sys.argv[1:5]
truth = DeviceTruth(root, node)
if op == "repair":
    truth.repair(device)
else:
    truth.raise_fault(device, HardwareFault(sys.argv[5], int(sys.argv[6]), sys.argv[7]))
"""
"""Changes the device truth inside the fake driver's pod with the driver's own code (the truth's lock and
atomic replace, as every writer on the node takes them)."""


class _PodDevices:
    """The fake driver's device truth on one node, reached through its pod (:class:`~.base.NodeDevices`)."""

    def __init__(self, files: PodFiles, truth_root: str) -> None:
        self.files = files
        self.node = files.node
        self.truth_root = truth_root
        self.path = str(truth_dir(Path(truth_root), self.node) / TRUTH_FILE)

    def _text(self) -> str | None:
        return self.files.read(self.path)

    def read(self, wait: bool = True) -> NodeTruth:
        """The node's device truth; with ``wait`` False, HarnessError at once when no pod of the driver runs there."""
        text = self._text() if wait else dataclasses.replace(self.files, wait=0.0).read(self.path)
        if text is None:
            return NodeTruth(self.node)
        try:
            return NodeTruth.from_json(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            raise HarnessError(f"node {self.node}: the device truth {self.path} cannot be read: {exc}") from exc

    def _change(self, *args: str) -> None:
        code, _, err = self.files.run(["python3", "-c", _TRUTH_CHANGE, self.truth_root, self.node, *args])
        if code != 0:
            raise HarnessError(f"node {self.node}: cannot change the device truth {self.path}: {err.strip()[-300:]}")

    def raise_fault(self, device: str, fault: HardwareFault) -> None:
        self._change("fault", device, fault.kind, str(fault.xid), fault.message)

    def repair(self, device: str) -> None:
        self._change("repair", device)

    def undo(self) -> tuple[str, dict[str, Any]]:
        return "pod-file", self.files.undo_args(self.path, self._text())


class _Books:
    """What the driver holds on one node as read there: the claims of its CDI specs and, for draguard's
    fake driver, its checkpoint (None for a driver whose only record is its specs)."""

    def __init__(self, node: str, driver: str, specs: frozenset[str], checkpoint: Checkpoint | None) -> None:
        self.node, self.driver, self.specs, self.checkpoint = node, driver, specs, checkpoint

    def claims(self) -> frozenset[str]:
        """Every claim UID the driver's files on the node name."""
        return self.specs | (frozenset(self.checkpoint.claims) if self.checkpoint is not None else frozenset())

    def state(self, others: frozenset[str]) -> NodeDriverState:
        """The judge's view, without the claims in ``others`` (not this run's) and their devices."""
        specs = self.specs - others
        if self.checkpoint is None:
            return NodeDriverState(node=self.node, driver=self.driver, prepared={u: () for u in specs}, cdi_specs=specs)
        prepared = {uid: tuple(DeviceId(self.driver, d.pool, d.device) for d in rec.devices)
                    for uid, rec in self.checkpoint.claims.items() if uid not in others}
        devices = {name: DeviceState(rec.state.value, (rec.claim,) if rec.claim else ())
                   for name, rec in self.checkpoint.devices.items() if rec.claim not in others}
        return NodeDriverState(node=self.node, driver=self.driver, prepared=prepared, devices=devices, cdi_specs=specs)


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


class _CommandDriver:
    """The driver on one node restarted by the user's command (``driver.restartCommand``, ``run
    --restart-command``), which returns once the driver is back; it cannot keep the driver down."""

    TIMEOUT = 300.0
    """Seconds the command may take."""

    def __init__(self, command: str, node: str, before: Undoable) -> None:
        self.command = command
        self.node = node
        self._before = before

    def restart(self, kill: bool = True) -> None:
        self._before("none", {"why": f"the restart command brings the driver on {self.node} back itself"})
        try:
            run_restart_command(self.command, self.node, self.TIMEOUT)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            raise HarnessError(f"restarting the driver on {self.node}: {exc}") from exc

    def down(self) -> None:
        raise UsageError("a restart command cannot keep the driver down: driver-down needs its DaemonSet")

    def up(self) -> None:
        raise UsageError("a restart command cannot keep the driver down: driver-down needs its DaemonSet")


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
            self.fleet._books_seen[self.node] = self.fleet._node_books(self.node)
        self.fleet._paused.add(self.node)  # before the pause: its CDI specs are read as last seen from then on
        self.nodes.pause(self.node)

    def back(self) -> None:
        self.nodes.unpause(self.node)
        self.fleet._paused.discard(self.node)


INSPECTOR = "draguard-inspect"
"""The name prefix of the ephemeral container through which a run container's environment is read."""
_ENV_DEVICE = "DRAGUARD_DEVICE_"
_ENV_UUID = "_UUID"


class _Containers:
    """What the installed fleet sees of the run's running containers on the nodes of draguard's fake driver,
    as the fake node agent records it as their runtime: for each container, once, the devices its environment
    names (the fake driver's CDI edits, ``DRAGUARD_DEVICE_<name>_UUID``: harness/cdi.py ``claim_spec``) against
    the devices allocated to the claims it uses, and whether a device it got was broken (unhealthy, or its last
    reset failed) in the device truth when the container was first seen running.

    A run's workload containers run the pause image by default, which has no command to read an environment
    with: the environment is read through an ephemeral container added to the pod through the API
    (``pods/ephemeralcontainers``), with the fake driver's image (on every node already), in the target
    container's process namespace (``targetContainerName``), from ``/proc/1/environ`` with ``CAP_SYS_PTRACE``
    (reading another user's process environment needs it). It goes with the pod. Reads run on a thread of
    their own, so the judge does not wait for them; an environment that cannot be read is noted, not judged."""

    WAIT = 30.0
    """Seconds an ephemeral container may take to run."""

    def __init__(self, fleet: InstalledFleet) -> None:
        self.fleet = fleet
        self._first: dict[str, tuple[str, ...]] = {}
        """Container key -> incidents' messages decided at its first sighting (broken devices)."""
        self._found: dict[str, list[Incident]] = {}
        """Node -> incidents found so far."""
        self._reads: dict[str, Future[None]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.unread: dict[str, str] = {}
        """Container key -> why its environment could not be read."""
        self.read = 0
        """Containers whose environment was read."""

    def summary(self) -> str | None:
        """What was inspected, for the run's log (None when no container was)."""
        if not self._first:
            return None
        found = sum(len(v) for v in self._found.values())
        return (f"containers of the run inspected through the API: {len(self._first)} seen running, {self.read} "
                f"environment(s) read, {found} incident(s)"
                + (f"; {len(self.unread)} environment(s) unread: " + "; ".join(sorted(set(self.unread.values())))[:600]
                   if self.unread else ""))

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def incidents(self, node: str, truth: NodeTruth) -> tuple[Incident, ...]:
        fleet = self.fleet
        assert fleet.kube is not None
        pods, _ = fleet.kube.list("Pod", label_selector=f"{RUN_LABEL}={fleet._run_id}", field_selector=f"spec.nodeName={node}")
        claims: dict[tuple[str, str], Obj] = {}
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp") or (pod.get("status") or {}).get("phase") != "Running":
                continue
            by_name = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
            statuses = {c.get("name"): c for c in (pod.get("status") or {}).get("containerStatuses") or []}
            for c in (pod.get("spec") or {}).get("containers") or []:
                used = [r for r in (c.get("resources") or {}).get("claims") or [] if by_name.get(r.get("name"))]
                st = statuses.get(c.get("name")) or {}
                if not used or not (st.get("state") or {}).get("running"):
                    continue
                key = f"{pod['metadata']['uid']}/{c['name']}/{st.get('restartCount', 0)}"
                if key in self._first:
                    continue
                expected: dict[str, str] = {}  # device -> claim UID
                for ref in used:
                    ns, name = pod["metadata"]["namespace"], str(by_name[ref["name"]])
                    claim = claims.get((ns, name))
                    if claim is None:
                        claim = claims[(ns, name)] = fleet.kube.get("ResourceClaim", name, ns) or {}
                    for r in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
                        if r.get("driver") == fleet._driver and r.get("pool") == node and (
                                not ref.get("request") or r.get("request") == ref["request"]):
                            expected[str(r["device"])] = str(claim["metadata"]["uid"])
                self._first[key] = self._broken(node, pod, c["name"], expected, truth)
                self._read_later(node, key, pod, c["name"], expected, truth)
        with self._lock:
            return tuple(self._found.get(node, ()))

    def _add(self, node: str, incident: Incident) -> None:
        with self._lock:
            self._found.setdefault(node, []).append(incident)

    def _broken(self, node: str, pod: Obj, container: str, expected: dict[str, str], truth: NodeTruth) -> tuple[str, ...]:
        """Incidents for the devices of a container first seen running now that the device truth has failed."""
        out = []
        where = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        for device, claim in sorted(expected.items()):
            rec = truth.devices.get(device)
            if rec is None or (rec.health == "healthy" and rec.reset != "failed"):
                continue
            state = rec.health_message or "unhealthy" if rec.health != "healthy" else f"its last reset failed ({rec.reset_error})"
            message = (f"container {container} of pod {where} runs on device {device}, which the hardware had failed "
                       f"when the container was first seen running: {state}")
            self._add(node, Incident("unhealthy-in-use", device, message, (claim,), where, time.time()))
            out.append(message)
        return tuple(out)

    def _read_later(self, node: str, key: str, pod: Obj, container: str, expected: dict[str, str],
                    truth: NodeTruth) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="draguard-inspect")
        uuids = {rec.uuid: name for name, rec in truth.devices.items()}
        self._reads[key] = self._pool.submit(self._read, node, key, pod, container, expected, uuids)

    def _read(self, node: str, key: str, pod: Obj, container: str, expected: dict[str, str],
              uuids: dict[str, str]) -> None:
        try:
            env = self._environment(pod, container)
        except HarnessError as exc:
            self.unread[key] = str(exc)
            return
        self.read += 1
        got = {uuids.get(v, v) for k, v in env.items() if k.startswith(_ENV_DEVICE) and k.endswith(_ENV_UUID)}
        want = set(expected)
        if got == want:
            return
        where = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        missing, extra = sorted(want - got), sorted(got - want)
        message = (f"container {container} of pod {where} got device(s) {', '.join(sorted(got)) or 'none'} through its "
                   f"CDI edits (its environment, read through the API), but its claims hold "
                   f"{', '.join(sorted(want)) or 'none'} on node {node}"
                   + (f": missing {', '.join(missing)}" if missing else "") + (f"; not its claims' {', '.join(extra)}" if extra else ""))
        self._add(node, Incident("container-failed", (missing or extra)[0], message, tuple(sorted(set(expected.values()))),
                                 where, time.time()))

    def _environment(self, pod: Obj, container: str) -> dict[str, str]:
        """``container``'s environment: ``/proc/1/environ`` in its process namespace, through an ephemeral
        container added to the pod."""
        fleet = self.fleet
        assert fleet.kube is not None and fleet.daemonset is not None
        image = next((c.get("image") for c in fleet.daemonset["spec"]["template"]["spec"]["containers"]
                      if c.get("name") == fleet.fake), None)
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        inspector = f"{INSPECTOR}-{container}"[:63]
        try:
            fleet.kube.patch("Pod", name, {"spec": {"ephemeralContainers": [{
                "name": inspector, "image": image, "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"],
                "targetContainerName": container, "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}]}},
                ns, patch_type="strategic", subresource="ephemeralcontainers")
        except ApiError as exc:
            raise HarnessError(f"pod {ns}/{name}: cannot add an ephemeral container to read container {container}'s "
                               f"environment: {exc}") from exc
        deadline = time.monotonic() + self.WAIT
        while True:
            current = fleet.kube.get("Pod", name, ns) or {}
            running = any(s.get("name") == inspector and (s.get("state") or {}).get("running")
                          for s in (current.get("status") or {}).get("ephemeralContainerStatuses") or [])
            if running:
                break
            if not current or current["metadata"].get("deletionTimestamp") or time.monotonic() > deadline:
                raise HarnessError(f"pod {ns}/{name}: its ephemeral container {inspector} did not run")
            time.sleep(0.5)
        code, out, err = fleet.kube.exec(name, ns, ["cat", "/proc/1/environ"], container=inspector, timeout=30)
        if code != 0:
            raise HarnessError(f"pod {ns}/{name}: cannot read container {container}'s environment: {err.strip()[-200:]}")
        env = {}
        for item in out.split(b"\0"):
            k, sep, v = item.decode(errors="replace").partition("=")
            if sep:
                env[k] = v
        return env
