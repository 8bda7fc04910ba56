"""container-devices on real nodes: a container the runtime could not create because a CDI device did not
resolve is a violation, whatever the driver; other creation errors are not this invariant's."""

from __future__ import annotations

from typing import Any

from draguard.harness.invariants import container_devices
from draguard.harness.invariants.snapshot import Snapshot

# What the kubelet reports when containerd's CDI injection fails (containerd pkg/cdi/oci_opt.go wraps the
# CDI cache's "unresolvable CDI devices" error; the kubelet puts it in the container's waiting state).
CDI_REFUSED = ("failed to create containerd container: CDI device injection failed: unresolvable CDI devices "
               "k8s.io/test-driver=claim-5f3a-req-0")


def _pod(name: str, reason: str, message: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "spec": {"nodeName": "w1"},
            "status": {"phase": "Pending", "containerStatuses": [
                {"name": "main", "state": {"waiting": {"reason": reason, "message": message}}}]}}


def test_a_container_the_runtime_could_not_create_with_its_cdi_devices_is_a_violation() -> None:
    snapshot = Snapshot(time=3.0, pods=(_pod("llm-0", "CreateContainerError", CDI_REFUSED),
                                        _pod("llm-1", "CreateContainerError", "failed to reserve container name"),
                                        _pod("llm-2", "ContainerCreating", ""),
                                        _pod("llm-3", "ImagePullBackOff", "CDI mentioned, but an image error")))
    [v] = container_devices.check(snapshot)
    assert v.invariant == "container-devices" and v.time == 3.0
    assert v.message.startswith("node w1: the container runtime could not create container main of pod ns/llm-0 "
                                "with its CDI devices: failed to create containerd container: CDI device injection failed")
    assert v.objects == ("Pod/ns/llm-0", "Node/w1")


def test_a_refusal_a_fake_node_records_in_its_device_truth_counts_once() -> None:
    """A fake node's runtime refuses the container (the pod's status says so, as the kubelet's would) and
    records the refusal in the node's device truth: one failure, one violation."""
    from draguard.harness.devices.truth import Incident, NodeTruth

    message = "container main of pod ns/llm-0: unresolvable CDI devices k8s.io/test-driver=claim-5f3a-req-0"
    truth = NodeTruth("w1", {}, (Incident("container-failed", "", message, ("uid-claim",), "ns/llm-0"),))
    snapshot = Snapshot(time=3.0, pods=(_pod("llm-0", "CreateContainerError", "Error: " + CDI_REFUSED),),
                        device_truth=(truth,))
    [v] = container_devices.check(snapshot)
    assert v.message.endswith("(device truth)")


def test_only_a_node_with_a_real_container_runtime_counts_as_one() -> None:
    from draguard.harness.fleet.coverage import runs_containers

    def node(version: str) -> dict[str, Any]:
        return {"status": {"nodeInfo": {"containerRuntimeVersion": version}}}

    assert runs_containers(node("containerd://2.4.2")) and runs_containers(node("cri-o://1.33.0"))
    for fake in ("draguard://0.1.0", "fakeRuntime://0.1.0", "kwok://v0.7.0", ""):  # fake agents, hollow kubelets
        assert not runs_containers(node(fake)), fake
    assert not runs_containers({})
