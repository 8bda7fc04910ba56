"""The installed fleet never says it did what it did not, and puts back exactly what it changed: the
DaemonSet after driver-down (each original shape, and two steps down on one node), driver-down on a node
where the DaemonSet has no pod, and a kind node's CDI specs that could not be read.

The DaemonSet is a dict that JSON merge patches (RFC 7386, what ``application/merge-patch+json`` does on
the API server) are applied to: the logic under test is which patches the fleet sends. The docker CLI is
an object answering ``run``. Against a kind cluster with real kubelets: tests/kind/test_kind_chaos.py."""

from __future__ import annotations

import copy
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
    fleet.include("w1")  # the first step's duration ended; the second's goes on
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
