"""no-legacy-mix: no pod asks for device-plugin resources and DRA claims at once."""

from __future__ import annotations

from invariant_objects import device_class, pod

from draguard.harness.invariants import Snapshot
from draguard.harness.invariants.no_legacy_mix import check, is_extended_resource


def test_plain_dra_pods_and_plain_legacy_pods_hold() -> None:
    dra = pod("dra", claims={"gpus": "c"}, limits={"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "4Mi"})
    legacy = pod("legacy", limits={"nvidia.com/gpu": "1"})
    assert check(Snapshot(time=0, pods=(dra, legacy))) == []


def test_a_pod_with_both_is_a_violation() -> None:
    mixed = pod("mixed", claims={"gpus": "c"}, limits={"nvidia.com/gpu": "1", "cpu": "2"})
    [violation] = check(Snapshot(time=4, pods=(mixed,)))
    assert violation.message == "Pod/chaos/mixed requests extended resource(s) nvidia.com/gpu and DRA claim(s) gpus"
    assert violation.objects == ("Pod/chaos/mixed",)


def test_an_extended_resource_served_by_a_device_class_is_dra() -> None:
    served = pod("served", claims={"gpus": "c"}, limits={"example.com/gpu": "1"})
    classes = (device_class(extended="example.com/gpu"),)
    assert check(Snapshot(time=0, pods=(served,), device_classes=classes)) == []


def test_extended_resource_names() -> None:
    assert is_extended_resource("nvidia.com/gpu") and is_extended_resource("amd.com/gpu")
    assert not any(map(is_extended_resource, ["cpu", "hugepages-1Gi", "kubernetes.io/batch", "x.kubernetes.io/y"]))
