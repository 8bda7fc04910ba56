"""The installed fleet and draguard's fake driver in a DaemonSet (deploy/fake-driver.yaml): a mutant is
switched on by patching the DaemonSet's container args, the restoring patch journaled before, and the
DaemonSet is exactly as before once the run stops; the driver's books are read in the node containers,
and what is not this run's is left out, devices included.

The DaemonSet is a dict that JSON merge patches are applied to (as in test_installed_fleet_verdicts.py);
the docker CLI is an object answering ``run``. Against kind: tests/kind/test_kind_fake_driver.py."""

from __future__ import annotations

import copy
import json
import subprocess
from typing import Any, cast

import pytest
from test_installed_fleet_verdicts import DaemonSetStore

from draguard.harness.cluster.kind.cluster import KindNodes
from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.core.paths import DEFAULT_DRIVER
from draguard.harness.fleet.installed import InstalledFleet, _with_mutant, fake_driver_container

MINE = "5f3a0000-0000-4000-8000-000000000001"
OTHERS = "5f3a0000-0000-4000-8000-000000000002"
CONTAINERS = [
    {"name": "kubelet-plugin", "image": "draguard.dev/fake-driver:0.1.0",
     "args": ["fake", "--in-cluster", "--kubelet-dirs", "--devices=4"]},
    {"name": "sidecar", "image": "busybox", "args": ["sleep", "inf"]},
]


class RolledOut(DaemonSetStore):
    """A DaemonSet whose controller has rolled out every template it was patched to."""

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        ds = copy.deepcopy(self.ds)
        ds["metadata"]["generation"] = len(self.patches) + 1
        ds["status"] = {"observedGeneration": len(self.patches) + 1, "desiredNumberScheduled": 2,
                        "updatedNumberScheduled": 2, "numberReady": 2}
        return ds

    def items(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        assert kind in ("ResourceClaim", "Pod")  # claims of others; the driver's pods (none: no device truth kept)
        return []


class Run:
    def __init__(self, store: RolledOut) -> None:
        self.store = store
        self.events: list[str] = []
        self.journaled: list[tuple[str, dict[str, Any]]] = []

    def journal_undo(self, kind: str, args: dict[str, Any]) -> None:
        assert not self.store.patches, "journaled after the DaemonSet was patched"
        self.events.append("journal")
        self.journaled.append((kind, copy.deepcopy(args)))

    def log(self, text: str) -> None:
        self.events.append(text)


def _fleet() -> tuple[InstalledFleet, RolledOut, Run]:
    store = RolledOut({"template": {"spec": {"containers": copy.deepcopy(CONTAINERS)}}})
    fleet = InstalledFleet()
    fleet.kube = cast(Any, store)
    fleet.daemonset = store.get("DaemonSet", "plugin", "drv")
    fleet.fake = fake_driver_container(fleet.daemonset)
    fleet._driver = DEFAULT_DRIVER
    return fleet, store, Run(store)


def test_the_fake_drivers_container_is_found_by_its_image() -> None:
    assert fake_driver_container({"spec": {"template": {"spec": {"containers": CONTAINERS}}}}) == "kubelet-plugin"
    assert fake_driver_container({"spec": {"template": {"spec": {"containers": CONTAINERS[1:]}}}}) is None


def test_with_mutant_replaces_an_earlier_one() -> None:
    assert _with_mutant(["fake", "--mutant", "a", "--devices=4", "--mutant=b"], "c") == ["fake", "--devices=4", "--mutant=c"]


def test_a_mutant_is_journaled_patched_and_restored_exactly() -> None:
    fleet, store, run = _fleet()
    original = copy.deepcopy(store.ds)
    fleet._run_mutant(cast(Any, run), "incomplete-cdi")
    assert run.events[0] == "journal"
    [(kind, args)] = run.journaled
    assert kind == "patch-object" and args["kind"] == "DaemonSet" and args["patchType"] == "merge"
    containers = store.ds["spec"]["template"]["spec"]["containers"]
    assert containers[0]["args"] == [*CONTAINERS[0]["args"], "--mutant=incomplete-cdi"]
    assert containers[1] == CONTAINERS[1]  # the other container untouched
    fleet.stop()
    assert store.ds == original
    # The journaled patch alone (draguard cleanup after a crash) gives back the original too.
    fleet, store, run = _fleet()
    fleet._run_mutant(cast(Any, run), "double-allocation")
    store.patch("DaemonSet", "plugin", run.journaled[0][1]["patch"], "drv")
    assert store.ds == original


def test_a_mutant_without_the_fake_driver_installed_is_refused_before_any_change() -> None:
    fleet, store, run = _fleet()
    fleet.fake = None
    with pytest.raises(UsageError, match="mutants are draguard's fake driver's"):
        fleet._run_mutant(cast(Any, run), "incomplete-cdi")
    assert store.patches == [] and run.journaled == []


class DockerCli:
    provider, cli, env = "docker", "docker", {}

    def __init__(self, rc: int, out: str, err: str = "") -> None:
        self.answer = (rc, out, err)

    def run(self, args: list[str], timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, *self.answer)


def _books(uid_devices: dict[str, str]) -> str:
    return json.dumps({
        "version": 1, "driver": DEFAULT_DRIVER, "node": "w1",
        "claims": {uid: {"uid": uid, "namespace": "ns", "name": "c", "state": "PrepareCompleted",
                         "devices": [{"requests": ["gpu"], "pool": "w1", "device": dev}]}
                   for uid, dev in uid_devices.items()},
        "devices": {dev: {"state": "prepared", "claim": uid} for uid, dev in uid_devices.items()},
    })


def test_the_books_read_in_a_node_leave_out_other_claims_and_their_devices() -> None:
    fleet, _, _ = _fleet()
    listing = f"{DEFAULT_DRIVER}-{MINE}.json\n{DEFAULT_DRIVER}-{OTHERS}.json\n"
    fleet.kind_nodes = KindNodes("default", cast(Any, DockerCli(0, listing + "--draguard-books--\n" + _books(
        {MINE: "gpu-0", OTHERS: "gpu-1"}))))
    fleet._nodes = ("w1",)
    fleet._foreign = {OTHERS}
    assert fleet.reads_node_files
    (state,) = fleet.external_states()
    assert state.cdi_specs == frozenset({MINE})
    assert {uid: [d.device for d in devs] for uid, devs in state.prepared.items()} == {MINE: ["gpu-0"]}
    assert {name: (d.state, d.claims) for name, d in state.devices.items()} == {"gpu-0": ("prepared", (MINE,))}


def test_unreadable_books_are_an_error_not_an_empty_node() -> None:
    fleet, _, _ = _fleet()
    fleet.kind_nodes = KindNodes("default", cast(Any, DockerCli(1, "", "Error response from daemon: container w1 is paused")))
    fleet._nodes = ("w1",)
    with pytest.raises(HarnessError, match="node w1: cannot read the fake driver's CDI specs"):
        fleet.external_states()
    fleet.kind_nodes = KindNodes("default", cast(Any, DockerCli(
        0, "ls: cannot access '/var/run/cdi': No such file or directory\n--draguard-books--\n"
           "cat: /var/lib/kubelet/plugins/gpu.draguard.dev/checkpoint.json: No such file or directory\n")))
    fleet._cdi_cache = None
    (state,) = fleet.external_states()  # nothing there yet: none, read
    assert state.prepared == {} and state.cdi_specs == frozenset()
