"""The device-truth feed of a hollow kubelet's node (harness/kubelet/feed.py), one round at a time: the
runtime's container records are written here as runtime.go writes them, the API is a dict of pods.

A container stays on the device truth while its record says running, and its stop reaches the truth
(and its acknowledgement marker goes, releasing the runtime's waiting StopContainer) in the round
that sees it; the start handshake tells no start for a record that stopped meanwhile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from draguard.harness.devices.nvml import FakeNvml, NvmlError
from draguard.harness.devices.probe import FakeProbe
from draguard.harness.devices.truth import DeviceTruth, InstalledDevice
from draguard.harness.kubelet.feed import DeviceTruthFeed
from draguard.harness.core.paths import NodeDirs

NODE = "gpu-node-0"


class Api:
    """The few API reads the feed makes: the node's pods and their claims."""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}

    def list(self, kind: str, field_selector: str = "") -> tuple[list[dict[str, Any]], str]:
        assert (kind, field_selector) == ("Pod", f"spec.nodeName={NODE}")
        return list(self.pods.values()), "1"

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        assert kind == "ResourceClaim"
        return self.claims.get((namespace or "", name))

    def add_pod(self, name: str, claim: str = "shared") -> str:
        uid = f"uid-{name}"
        self.claims[("ns", claim)] = {"metadata": {"name": claim, "namespace": "ns", "uid": f"claim-{claim}"}}
        self.pods[uid] = {
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {"nodeName": NODE, "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                     "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}]},
        }  # fmt: skip
        return uid


class Node:
    """One node's files: its device truth with gpu-0, a CDI spec for it, and the runtime's records."""

    def __init__(self, root: Path, with_truth: bool = True) -> None:
        self.dirs = NodeDirs(root, NODE).create()
        self.containers = self.dirs.base / "containers"
        self.containers.mkdir()
        self.truth = DeviceTruth(root, NODE)
        dev = self.truth.dev_dir / "gpu-0"
        if with_truth:
            self.truth.install([InstalledDevice("gpu-0", "GPU-0", memory_bytes=8 << 30)])
        spec = {"cdiVersion": "0.6.0", "kind": "gpu.draguard.dev/gpu", "devices": [
            {"name": "gpu-0", "containerEdits": {"deviceNodes": [{"path": "/dev/gpu0", "hostPath": str(dev)}]}}]}
        (self.dirs.cdi / "gpu.json").write_text(json.dumps(spec))
        self.api = Api()
        self.feed = DeviceTruthFeed(self.dirs, self.dirs.cdi, self.api)  # type: ignore[arg-type]

    def record(self, cid: str, pod_uid: str, running: bool = True) -> None:
        pod = self.api.pods[pod_uid]["metadata"]
        rec = {"id": cid, "podName": pod["name"], "podNamespace": "ns", "podUID": pod_uid, "container": "main",
               "cdiDevices": ["gpu.draguard.dev/gpu=gpu-0"], "env": [], "running": running}  # fmt: skip
        (self.containers / f"{cid}.json").write_text(json.dumps(rec))

    def marker(self, cid: str) -> Path:
        return self.containers / f"{cid}.truth"

    def on_device(self) -> list[str]:
        return [c.id for c in self.truth.read().devices["gpu-0"].containers]


def test_a_running_container_stays_on_the_device_until_its_record_stops_running(tmp_path: Path) -> None:
    node = Node(tmp_path)
    uid = node.api.add_pod("a")
    node.record("c1", uid)
    node.feed.poll()
    assert node.on_device() == [f"{uid}/main"]
    assert node.marker("c1").exists(), "the start is acknowledged for the runtime's StopContainer to wait on"
    node.feed.poll()  # later rounds keep it there, told once
    assert node.on_device() == [f"{uid}/main"]
    [gpu] = FakeProbe(node.truth).probe().devices
    assert len(gpu.processes) == 1 and gpu.memory_used > 0, "the device probe shows the running container"
    with pytest.raises(NvmlError, match="NVML_ERROR_IN_USE"):
        FakeNvml(node.truth).reset("gpu-0")

    node.record("c1", uid, running=False)  # runtime.go StopContainer, which now waits on the marker
    node.feed.poll()
    assert node.on_device() == []
    assert not node.marker("c1").exists(), "the stop is on the truth: the waiting StopContainer may return"
    FakeNvml(node.truth).reset("gpu-0")  # what the kubelet's unprepare leads to: no process is left
    assert node.truth.read().devices["gpu-0"].reset == "clean"


def test_two_pods_on_one_unshared_device_at_once_are_seen(tmp_path: Path) -> None:
    node = Node(tmp_path)
    a, b = node.api.add_pod("a"), node.api.add_pod("b")
    node.record("c1", a)
    node.feed.poll()
    node.record("c2", b)
    node.feed.poll()
    assert sorted(node.on_device()) == sorted([f"{a}/main", f"{b}/main"])
    [incident] = node.truth.read().incidents
    assert incident.kind == "unshared-pods" and incident.claims == ("claim-shared",)


@pytest.mark.parametrize("how", ["record removed", "pod gone"])
def test_a_container_leaves_the_device_when_its_record_or_its_pod_goes(tmp_path: Path, how: str) -> None:
    node = Node(tmp_path)
    a, b = node.api.add_pod("a"), node.api.add_pod("b", claim="other")
    node.record("c1", a)
    node.record("c2", b)
    node.feed.poll()
    assert len(node.on_device()) == 2
    if how == "record removed":  # runtime.go RemoveContainer of a running container
        (node.containers / "c1.json").unlink()
    else:  # force-deleted: the kubelet stops the container later
        del node.api.pods[a]
    node.feed.poll()
    assert node.on_device() == [f"{b}/main"], "the other pod's container keeps running"
    assert not node.marker("c1").exists() and node.marker("c2").exists(), "no stop waits on a container gone from the truth"


def test_no_start_is_told_for_a_record_that_stopped_running_before_the_marker_was_written(tmp_path: Path) -> None:
    node = Node(tmp_path)
    uid = node.api.add_pod("a")
    node.record("c1", uid)
    listed = node.feed._records()  # the round lists the record running...
    node.record("c1", uid, running=False)  # ...then StopContainer marks it stopped, sees no marker, returns
    node.feed._records = lambda: listed  # type: ignore[method-assign]
    node.feed.poll()
    assert node.on_device() == [], "a container the kubelet already stopped must not reach the truth"
    assert not node.marker("c1").exists()


def test_without_device_truth_nothing_is_told_and_no_stop_waits(tmp_path: Path) -> None:
    node = Node(tmp_path, with_truth=False)
    uid = node.api.add_pod("a")
    node.record("c1", uid)
    node.feed.poll()
    assert not node.marker("c1").exists()


def test_a_container_on_no_device_of_the_truth_gets_no_marker(tmp_path: Path) -> None:
    node = Node(tmp_path)
    spec = {"cdiVersion": "0.6.0", "kind": "gpu.draguard.dev/gpu", "devices": [
        {"name": "gpu-0", "containerEdits": {"env": ["GPU=0"]}}]}  # fmt: skip
    (node.dirs.cdi / "gpu.json").write_text(json.dumps(spec))
    uid = node.api.add_pod("a")
    node.record("c1", uid)
    node.feed.poll()
    node.feed.poll()
    assert node.on_device() == [] and not node.marker("c1").exists()


def test_a_new_container_of_a_name_the_truth_still_has_is_acknowledged_too(tmp_path: Path) -> None:
    node = Node(tmp_path)
    uid = node.api.add_pod("a")
    node.truth.start_container(f"{uid}/main", "ns/a", ["claim-shared"], ["gpu-0"])  # told for an earlier container
    node.record("c2", uid)
    node.feed.poll()
    assert node.on_device() == [f"{uid}/main"]
    assert node.marker("c2").exists(), "its stop must wait for the feed as any other"
    node.record("c2", uid, running=False)
    node.feed.poll()
    assert node.on_device() == [] and not node.marker("c2").exists()
