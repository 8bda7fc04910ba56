"""Cleanup touches only what the suite created (csi-test#223: a sanity run removed other users' volumes).

Objects a user made beforehand in the namespace the suites are given — claims with and without a
draguard run label, a pod, names the suites might pick — are all still there, unchanged, after a
sanity run and a conformance run in that namespace, and after ``certify --namespace`` (both suites,
through the command line); what the suites made there is gone. Against the fake driver on the real
local control plane."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.cli.main import main
from draguard.conformance.cluster import ClusterConfig, run_conformance
from draguard.conformance.sanity import FakeDriverHooks, SanityConfig, run_sanity
from draguard.harness.core.paths import NodeDirs
from draguard.harness.kube import RUN_LABEL, Kube

pytestmark = pytest.mark.cluster


def _claim(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "labels": labels},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "someone-elses"}}]}}}


@pytest.fixture
def shared_namespace(draguard_cluster: Any) -> Iterator[tuple[str, dict[tuple[str, str], str]]]:
    """A user's namespace with their objects in it; (namespace, (kind, name) -> uid) of those objects."""
    kube: Kube = draguard_cluster.kube()
    ns = f"users-{uuid.uuid4().hex[:6]}"
    kube.create_namespace(ns, {"team": "someone-else"})
    theirs: dict[tuple[str, str], str] = {}
    objects = [
        _claim("sanity-1", {}),  # the names the suites once used
        _claim("claim-1", {}),
        _claim("labelled-by-another-run", {RUN_LABEL: "0123abcd"}),  # another draguard run's object
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-1", "labels": {"app": "theirs"}},
         "spec": {"nodeSelector": {"draguard-test/nowhere": "true"}, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}},
    ]
    for obj in objects:
        obj["metadata"]["namespace"] = ns
        created = kube.create(obj)
        theirs[(obj["kind"], obj["metadata"]["name"])] = created["metadata"]["uid"]
    try:
        yield ns, theirs
    finally:
        kube.delete("Namespace", ns)


def _survivors(kube: Kube, ns: str, theirs: dict[tuple[str, str], str]) -> dict[tuple[str, str], str | None]:
    return {(kind, name): ((kube.get(kind, name, ns) or {}).get("metadata") or {}).get("uid")
            for kind, name in theirs}


def _left_by_suite(kube: Kube, ns: str, theirs: dict[tuple[str, str], str]) -> list[str]:
    return [f"{kind} {o['metadata']['name']}" for kind in ("ResourceClaim", "Pod") for o in kube.items(kind, ns)
            if (kind, o["metadata"]["name"]) not in theirs]


def test_a_sanity_run_and_a_conformance_run_leave_other_objects_in_their_namespace_alone(
    make_fleet: Callable[..., Any], draguard_cluster: Any,
    shared_namespace: tuple[str, dict[tuple[str, str], str]],
) -> None:
    ns, theirs = shared_namespace
    kube: Kube = draguard_cluster.kube()
    with make_fleet(nodes=1) as f:
        node = f.nodes[0]
        dirs = NodeDirs(f.root, node)
        sanity = run_sanity(SanityConfig(
            registration_socket=dirs.registration_socket(f.driver), kubeconfig=f.kubeconfig, driver=f.driver,
            node=node, cdi_dir=dirs.cdi, namespace=ns, idempotent_count=2,
            select=("sanity.prepare.*", "sanity.unprepare.*", "sanity.restart.*")),
            FakeDriverHooks(f.root, node, f.driver, process=f.processes[node]))
        assert [c.id for c in sanity.checks if c.status in ("failed", "error")] == [], [
            (c.id, c.reason) for c in sanity.checks if c.status != "passed"]
        assert _survivors(kube, ns, theirs) == theirs
        assert _left_by_suite(kube, ns, theirs) == []
        conformance = run_conformance(ClusterConfig(
            kubeconfig=f.kubeconfig, driver=f.driver, device_class=f.device_class, namespace=ns,
            profiles=("core",)), f.access())
        assert [c.id for c in conformance.checks if c.status in ("failed", "error")] == [], [
            (c.id, c.reason) for c in conformance.checks if c.status != "passed"]
    assert _survivors(kube, ns, theirs) == theirs
    assert _left_by_suite(kube, ns, theirs) == []
    assert kube.get("Namespace", ns) is not None  # a namespace the suites were given is not theirs to delete


def test_certify_given_the_namespace_leaves_other_objects_in_it_alone(
    make_fleet: Callable[..., Any], draguard_cluster: Any,
    shared_namespace: tuple[str, dict[tuple[str, str], str]], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """The same through the command line a vendor uses: ``certify --namespace`` hands the namespace to
    both suites, which create their objects there and remove only those."""
    ns, theirs = shared_namespace
    kube: Kube = draguard_cluster.kube()
    (tmp_path / "product.yaml").write_text(
        "vendor: Example\nname: GPU\nversion: '1'\ntype: DRA driver\ndescription: d\n"
        "website_url: https://example.com\ndocumentation_url: https://example.com/docs\n"
        "contact_email_address: dra@example.com\ndriver_image: registry.example.com/gpu:1\n")
    with make_fleet(nodes=1) as f:
        node = f.nodes[0]
        dirs = NodeDirs(f.root, node)
        code = main(["certify", "--kubeconfig", str(f.kubeconfig), "--driver", f.driver, "--device-class",
                     f.device_class, "--profile", "core", "--namespace", ns, "--product", str(tmp_path / "product.yaml"),
                     "--out", str(tmp_path / "b"), "--registration-socket", str(dirs.registration_socket(f.driver)),
                     "--node", node, "--cdi-dir", str(dirs.cdi), "--fake-driver-root", str(f.root),
                     "--idempotent-count", "2"])
        assert code == 0, capsys.readouterr().out
    made = json.loads((tmp_path / "b" / "evidence" / "checks" / "conformance.core.template-claim" /
                       "resourceclaims.json").read_text())
    assert made and all(c["metadata"]["namespace"] == ns for c in made)  # the suites did work in it
    calls = [json.loads(line) for line in (tmp_path / "b" / "evidence" / "grpc-calls.jsonl").read_text().splitlines()]
    prepared = {c["namespace"] for call in calls if call["method"] == "NodePrepareResources" for c in call["claims"]}
    assert prepared == {ns}, prepared
    assert _survivors(kube, ns, theirs) == theirs
    assert _left_by_suite(kube, ns, theirs) == []
    assert kube.get("Namespace", ns) is not None
