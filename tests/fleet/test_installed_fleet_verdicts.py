"""The installed fleet never says it did what it did not, and puts back exactly what it changed: the
DaemonSet after driver-down (each original shape, and two steps down on one node), driver-down on a node
where the DaemonSet has no pod, and a kind node's CDI specs that could not be read.

The DaemonSet is a dict that JSON merge patches (RFC 7386, what ``application/merge-patch+json`` does on
the API server) are applied to: the logic under test is which patches the fleet sends. The docker CLI is
an object answering ``run``. Against a kind cluster with real kubelets: tests/kind/test_kind_chaos.py."""

from __future__ import annotations

import copy
import threading
import time
import subprocess
from typing import Any, cast

import pytest

from draguard.harness.cluster.kind.cluster import KindNodes
from draguard.harness.core.errors import HarnessError
from draguard.harness.driver.external import TEST_DRIVER_NAME
from draguard.harness.fleet.installed import InstalledFleet, _DaemonSetDriver
from draguard.harness.kube import Kube

UID = "5f3a0000-0000-4000-8000-000000000001"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class DaemonSetStore:
    """One DaemonSet, read and merge-patched as the fleet does through its Kube."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.ds: dict[str, Any] = {"metadata": {"namespace": "drv", "name": "plugin"}, "spec": spec}
        self.patches: list[Any] = []

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        return copy.deepcopy(self.ds)

    def patch(self, kind: str, name: str, patch: Any, namespace: str | None = None, patch_type: str = "merge") -> Any:
        assert patch_type == "merge"
        self.patches.append(patch)
        self.ds = merge_patch(self.ds, patch)
        return self.ds


def _fleet(spec: dict[str, Any]) -> tuple[InstalledFleet, DaemonSetStore, list[tuple[str, dict[str, Any]]]]:
    store = DaemonSetStore(spec)
    fleet = InstalledFleet()
    fleet.kube = cast(Kube, store)
    fleet.daemonset = store.get("DaemonSet", "plugin", "drv")
    journal: list[tuple[str, dict[str, Any]]] = []
    return fleet, store, journal


PREFERRED = {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}]}
REQUIRED = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]}]}}
ROLLING = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}


@pytest.mark.parametrize("affinity, strategy", [
    (None, ROLLING),
    ({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}, {"type": "OnDelete"}),
    ({"nodeAffinity": PREFERRED}, ROLLING),  # no required terms: the exclusion adds some
    ({"nodeAffinity": REQUIRED}, ROLLING),
    ({"nodeAffinity": {**PREFERRED, **REQUIRED}, "podAffinity": {"x": 1}}, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "10%"}}),
], ids=["none", "pod-anti-affinity", "preferred-only", "required", "both-and-pod-affinity"])
def test_the_daemonset_is_back_exactly_after_driver_down_by_the_step_and_by_the_journal(
        affinity: Any, strategy: Any) -> None:
    template_spec: dict[str, Any] = {"containers": [{"name": "plugin"}]}
    if affinity is not None:
        template_spec["affinity"] = affinity
    original = {"selector": {"matchLabels": {"app": "plugin"}}, "updateStrategy": strategy, "template": {"spec": template_spec}}
    fleet, store, journal = _fleet(copy.deepcopy(original))
    fleet.exclude("w1", lambda kind, args: journal.append((kind, args)))
    excluded = store.ds["spec"]
    assert excluded["updateStrategy"] == {"type": "OnDelete"}
    assert excluded["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchFields"][-1]["values"] == ["w1"]
    # draguard cleanup after a crash: the journaled patch alone
    [(kind, args)] = journal
    assert kind == "patch-object" and args["patchType"] == "merge"
    assert merge_patch({"spec": copy.deepcopy(excluded)}, args["patch"])["spec"] == original
    # the step bringing the driver back
    fleet.include("w1")
    assert store.ds["spec"] == original


def test_two_steps_down_on_one_node_each_bring_back_their_own() -> None:
    original = {"updateStrategy": ROLLING, "template": {"spec": {"containers": [{"name": "plugin"}]}}}
    fleet, store, journal = _fleet(copy.deepcopy(original))
    fleet.exclude("w1", lambda kind, args: journal.append((kind, args)))
    fleet.exclude("w1", lambda kind, args: journal.append((kind, args)))
    waits: list[str] = []
    fleet.wait = lambda what, predicate, timeout=0.0: waits.append(what)  # type: ignore[method-assign]
    _DaemonSetDriver(fleet, "w1", lambda kind, args: None).up()  # the first step's duration ended; the second's goes on
    assert waits == [], "the first step waited for a driver the second step keeps down"
    terms = store.ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchFields"][-1]["values"] == ["w1"], "the driver came back while a step still had it down"
    fleet.include("w1")
    assert store.ds["spec"] == original


class _NoPods(InstalledFleet):
    def driver_pods(self, node: str) -> list[Any]:
        return []


def test_driver_down_on_a_node_without_the_drivers_pod_is_an_error_and_changes_nothing() -> None:
    store = DaemonSetStore({"updateStrategy": ROLLING, "template": {"spec": {}}})
    fleet = _NoPods()
    fleet.kube = cast(Kube, store)
    fleet.daemonset = store.get("DaemonSet", "plugin", "drv")
    journal: list[Any] = []
    driver = _DaemonSetDriver(fleet, "w3", lambda kind, args: journal.append((kind, args)))
    with pytest.raises(HarnessError, match="no Ready pod of the driver's DaemonSet on node w3 to take down"):
        driver.down()
    assert store.patches == [] and journal == []


class DockerCli:
    """What ``docker exec NODE ls -1 /var/run/cdi`` answers, per node."""

    provider, cli, env = "docker", "docker", {}

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, str, str]] = {}

    def run(self, args: list[str], timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        rc, out, err = self.answers[args[1]]
        return subprocess.CompletedProcess(args, rc, out, err)


def _kind_fleet() -> tuple[InstalledFleet, DockerCli]:
    docker = DockerCli()
    fleet = InstalledFleet()
    fleet.kind_nodes = KindNodes("default", cast(Any, docker))
    fleet._driver = TEST_DRIVER_NAME
    fleet._nodes = ("w1",)
    return fleet, docker


def test_cdi_specs_that_could_not_be_read_are_not_read_as_none() -> None:
    fleet, docker = _kind_fleet()
    spec = f"{TEST_DRIVER_NAME}-{UID}-gpu.json"
    docker.answers["w1"] = (0, spec + "\n", "")
    [state] = fleet.external_states()
    assert state.cdi_specs == frozenset({UID})
    fleet._cdi_cache = None
    docker.answers["w1"] = (1, "", "Error response from daemon: cannot exec in a stopped container")
    with pytest.raises(HarnessError, match="node w1: cannot list the driver's CDI specs in /var/run/cdi"):
        fleet.external_states()
    fleet._cdi_cache = None
    docker.answers["w1"] = (2, "", "ls: cannot access '/var/run/cdi': No such file or directory")
    [state] = fleet.external_states()
    assert state.cdi_specs == frozenset()  # no folder: no spec


def test_a_paused_nodes_cdi_specs_are_those_last_read() -> None:
    fleet, docker = _kind_fleet()
    docker.answers["w1"] = (0, f"{TEST_DRIVER_NAME}-{UID}-gpu.json\n", "")
    fleet.external_states()
    fleet._paused.add("w1")  # node-loss: the container frozen, its files as they were
    fleet._cdi_cache = None
    docker.answers["w1"] = (1, "", "Error response from daemon: container w1 is paused, unpause the container before exec")
    [state] = fleet.external_states()
    assert state.cdi_specs == frozenset({UID})


class NodeSystemd:
    """systemd's kubelet.service in a kind node, as ``docker exec NODE systemctl ...`` answers: a kill of a
    running kubelet ends it and systemd starts another (a new main pid); a kill with none running does nothing
    and succeeds, as ``systemctl kill`` does."""

    provider, cli, env = "docker", "docker", {}

    def __init__(self, main_pid: int, active: list[str]) -> None:
        self.main_pid, self.active = main_pid, active
        self.calls: list[str] = []
        self.next_pid = 500

    def run(self, args: list[str], timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = args[2:]
        self.calls.append(" ".join(command))
        out = ""
        if command[:2] == ["systemctl", "kill"] and self.main_pid:
            self.next_pid += 1
            self.main_pid = self.next_pid
        elif command[:2] == ["systemctl", "show"]:
            out = str(self.main_pid)
        elif command[:2] == ["systemctl", "is-active"]:
            out = self.active.pop(0) if len(self.active) > 1 else self.active[0]
            if out == "active" and not self.main_pid:  # systemd's restart after its back-off
                self.next_pid += 1
                self.main_pid = self.next_pid
        return subprocess.CompletedProcess(args, 0, out + "\n", "")


def _kind_node(systemd: NodeSystemd) -> tuple[Any, list[Any]]:
    from draguard.harness.fleet.installed import _KindNode

    fleet = InstalledFleet()
    fleet.kind_nodes = KindNodes("default", cast(Any, systemd))
    journal: list[Any] = []
    return _KindNode(fleet, "w1", lambda kind, args: journal.append((kind, args))), journal


def test_node_restart_with_no_kubelet_running_is_an_error_not_a_restart() -> None:
    """The kubelet in systemd's restart back-off: `systemctl kill` kills nothing and succeeds, and systemd
    starts a kubelet of its own accord; the step did not restart it."""
    node, journal = _kind_node(NodeSystemd(main_pid=0, active=["activating", "active"]))
    with pytest.raises(HarnessError, match="no kubelet running in node w1 to restart"):
        node.restart_agent(kill=True)
    assert journal == []


def test_node_restart_returns_once_another_kubelet_runs() -> None:
    systemd = NodeSystemd(main_pid=100, active=["active"])
    node, journal = _kind_node(systemd)
    node.restart_agent(kill=True)
    assert systemd.main_pid == 501 and [k for k, _ in journal] == ["none"]
    assert "systemctl kill --signal=SIGKILL kubelet" in systemd.calls


def test_node_loss_reads_the_nodes_cdi_specs_as_it_freezes_it() -> None:
    """A node paused before any judging round read it still shows what it holds, not an error or nothing."""
    from draguard.harness.fleet.installed import _KindNode

    fleet, docker = _kind_fleet()
    docker.answers["w1"] = (0, f"{TEST_DRIVER_NAME}-{UID}-gpu.json\n", "")
    _KindNode(fleet, "w1", lambda kind, args: None).lose()
    assert "w1" in fleet._paused
    docker.answers["w1"] = (1, "", "Error response from daemon: container w1 is paused, unpause the container before exec")
    [state] = fleet.external_states()
    assert state.cdi_specs == frozenset({UID})


class PodList:
    """The pods a label and node selector lists in the driver's namespace."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.deleted: list[str] = []

    def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        return list(self.pods), "1"

    def delete(self, kind: str, name: str, namespace: str | None = None, grace_seconds: int | None = None) -> None:
        self.deleted.append(name)


class _NoWait(InstalledFleet):
    def wait(self, what: str, predicate: Any, timeout: float = 0.0) -> None:
        """The replacement pod is the DaemonSet controller's to make; not this test's."""


def _pod(name: str, owner_kind: str, owner_uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "labels": {"app.kubernetes.io/name": "gpu-driver"},
                         "ownerReferences": [{"kind": owner_kind, "uid": owner_uid, "controller": True, "name": "x"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def test_the_drivers_pods_are_those_its_daemonset_controls_not_every_pod_with_its_labels() -> None:
    """The driver's controller (a Deployment's pod) carries the DaemonSet selector's labels too: driver-restart
    must not delete it, nor driver-down wait for it to go."""
    pods = PodList([_pod("plugin-abc", "DaemonSet", "ds-uid"), _pod("controller-7f9-xyz", "ReplicaSet", "rs-uid")])
    fleet = _NoWait()
    fleet.kube = cast(Kube, pods)
    fleet.daemonset = {"metadata": {"namespace": "gpu", "name": "plugin", "uid": "ds-uid"},
                       "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "gpu-driver"}}}}
    assert [p["metadata"]["name"] for p in fleet.driver_pods("w1")] == ["plugin-abc"]
    _DaemonSetDriver(fleet, "w1", lambda kind, args: None).restart(kill=True)
    assert pods.deleted == ["plugin-abc"]


class SlowPatches(DaemonSetStore):
    """The API server answering the first patch that still excludes a node only after another patch arrived
    (or 1 s passed): two steps' patches crossing on the wire."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        self.crossing = threading.Event()
        self.held = False

    def patch(self, kind: str, name: str, patch: Any, namespace: str | None = None, patch_type: str = "merge") -> Any:
        excluding = (patch["spec"]["template"]["spec"].get("affinity") or {}).get("nodeAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        if excluding and not self.held and len(self.patches) >= 2:  # the first include, after both excludes
            self.held = True
            self.crossing.wait(1.0)
        elif self.held:
            self.crossing.set()
        return super().patch(kind, name, patch, namespace, patch_type)


def test_two_steps_ending_at_once_on_two_nodes_leave_the_daemonset_as_it_was() -> None:
    """driver-down on w1 and on w2, each its own step with the same duration: both bring their driver back at
    the same moment, from their own threads. The last patch to land must be the restoring one."""
    original = {"updateStrategy": ROLLING, "template": {"spec": {"containers": [{"name": "plugin"}]}}}
    store = SlowPatches(copy.deepcopy(original))
    fleet = InstalledFleet()
    fleet.kube = cast(Kube, store)
    fleet.daemonset = store.get("DaemonSet", "plugin", "drv")
    fleet.exclude("w1", lambda kind, args: None)
    fleet.exclude("w2", lambda kind, args: None)
    first = threading.Thread(target=fleet.include, args=("w1",))
    first.start()
    time.sleep(0.2)  # w1's include is on the wire, still excluding w2
    fleet.include("w2")
    first.join()
    assert store.ds["spec"] == original
    assert fleet._original is None and not fleet._excluded


class Claims:
    """The cluster's ResourceClaims, as a cluster-wide list answers."""

    def __init__(self, claims: list[dict[str, Any]]) -> None:
        self.claims = claims

    def items(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict[str, Any]]:
        assert kind == "ResourceClaim" and namespace is None
        return list(self.claims)


def test_cdi_specs_of_another_users_claims_prepared_during_the_run_are_not_this_runs() -> None:
    """Someone else's pod on the run's node gets a device of the same driver while the run goes on: its
    claim's spec is not this run's (no-leak would blame the driver for a claim it rightly holds)."""
    from draguard.harness.kube import RUN_LABEL

    other = "7c1e0000-0000-4000-8000-000000000002"
    gone = "9d2f0000-0000-4000-8000-000000000003"  # another user's claim, deleted since it was seen
    fleet, docker = _kind_fleet()
    fleet._run_id = "run1"
    claims = Claims([{"metadata": {"uid": UID, "namespace": "dg-s-run1", "labels": {RUN_LABEL: "run1"}}},
                     {"metadata": {"uid": other, "namespace": "team-a"}},
                     {"metadata": {"uid": gone, "namespace": "team-b", "labels": {RUN_LABEL: "run0"}}}])
    fleet.kube = cast(Kube, claims)
    docker.answers["w1"] = (0, "".join(f"{TEST_DRIVER_NAME}-{u}-gpu.json\n" for u in (UID, other)), "")
    [state] = fleet.external_states()
    assert state.cdi_specs == frozenset({UID})
    claims.claims = claims.claims[:2]
    fleet._cdi_cache = None
    docker.answers["w1"] = (0, "".join(f"{TEST_DRIVER_NAME}-{u}-gpu.json\n" for u in (UID, other, gone)), "")
    [state] = fleet.external_states()
    assert state.cdi_specs == frozenset({UID})


class SmallCluster:
    """What retargeting's detection reads of a cluster: one DeviceClass, one node with a device of the
    driver, the driver's DaemonSet, and in its namespace the DaemonSet's pod and the driver's controller
    (a ReplicaSet's pod) with the same labels."""

    DS = {"metadata": {"namespace": "gpu", "name": "plugin", "uid": "ds-uid"},
          "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "gpu-driver"}},
                   "template": {"spec": {"volumes": [{"hostPath": {"path": "/var/lib/kubelet/plugins/gpu.example.com"}}]}}}}

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return {"metadata": {"name": name}} if kind == "DeviceClass" else None

    def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        assert kind == "ResourceSlice"
        return [{"spec": {"driver": "gpu.example.com", "nodeName": "w1", "pool": {"name": "w1"},
                          "devices": [{"name": "gpu-0"}]}}], "1"

    def items(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict[str, Any]]:
        if kind == "Node":
            return [{"metadata": {"name": "w1"}, "spec": {}, "status": {}}]
        if kind == "DaemonSet":
            return [self.DS]
        if kind == "Pod":
            return [{**_pod("plugin-abc", "DaemonSet", "ds-uid"), "spec": {"nodeName": "w1"}},
                    {**_pod("controller-7f9-xyz", "ReplicaSet", "rs-uid"), "spec": {"nodeName": "w1"}}]
        return []

    def request(self, method: str, url: str) -> dict[str, Any]:
        return {"resources": []}


def test_a_dry_run_names_the_drivers_pods_as_those_its_daemonset_controls() -> None:
    from draguard.harness.campaign.retarget import RunTarget, detect

    facts = detect(cast(Kube, SmallCluster()), RunTarget("gpu.example.com", "gpu"))
    assert facts.daemonset == "gpu/plugin"
    assert facts.driver_pods == {"w1": ("gpu/plugin-abc",)}
