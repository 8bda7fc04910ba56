"""deploy/fake-driver.yaml on a local control plane: lint-clean under ``draguard lint``, every object
accepted by a server-side dry run, and once applied its RBAC is what the fake driver calls and no more
(SubjectAccessReviews), and its policy lets a driver pod write only its own node's ResourceSlices (a
real token bound to a Node, as a pod's carries the node's name).

On kind, tests/kind/test_kind_fake_driver.py runs the DaemonSet itself."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_rbac_least_privilege import SA_GROUPS, _denied, _load, _path, _token, _token_kube, _wait

from draguard.harness.core.paths import DEFAULT_DRIVER
from draguard.harness.kube import ApiError, Kube

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = "draguard-system"
DRIVER = f"system:serviceaccount:{SYSTEM}:draguard-fake-driver"
POLICY = "draguard-fake-driver-own-node-slices"
TEST_LABEL = "draguard.dev/deploy-test"


def test_fake_driver_manifest_is_lint_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "draguard.cli", "lint", str(ROOT / "deploy" / "fake-driver.yaml")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 error(s), 0 warning(s)" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def _by_policy(call: Any) -> str:
    """The policy's denial (its validation names no reason: 422 Invalid)."""
    message = _denied(call, 422)
    assert f"ValidatingAdmissionPolicy '{POLICY}'" in message, message
    return message


def _sar(admin: Kube, verb: str, resource: str, group: str = "", namespace: str = "", sub: str = "") -> bool:
    spec = {"user": DRIVER, "groups": SA_GROUPS, "resourceAttributes": {
        "verb": verb, "group": group, "resource": resource, "namespace": namespace, "subresource": sub}}
    answer = admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                           body={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
    return bool(answer["status"].get("allowed"))


def _slice(node: str, tag: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"fake-{node}", "labels": {TEST_LABEL: tag}},
            "spec": {"driver": DEFAULT_DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0"}]}}


@pytest.fixture(scope="module")
def applied(draguard_cluster) -> Iterator[tuple[Kube, str, list[dict[str, Any]]]]:  # type: ignore[no-untyped-def]
    admin = draguard_cluster.kube()
    tag = uuid.uuid4().hex[:6]
    objs = _load("fake-driver.yaml")
    nodes = [f"deploy-{tag}-a", f"deploy-{tag}-b"]
    done: list[dict[str, Any]] = []
    try:
        for node in nodes:
            admin.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {TEST_LABEL: tag}}})
        for obj in objs:
            obj["metadata"].setdefault("labels", {})[TEST_LABEL] = tag
            if obj["kind"] == "DaemonSet":  # on no node of this control plane (none runs a kubelet)
                obj["spec"]["template"]["spec"]["nodeSelector"] = {TEST_LABEL: "none"}
        namespaces = [o for o in objs if o["kind"] == "Namespace"]
        assert [o["metadata"]["name"] for o in namespaces] == [SYSTEM]
        for group in (namespaces, [o for o in objs if o["kind"] != "Namespace"]):
            for obj in group:  # a server-side dry run of each, then the apply
                dry = admin.request("POST", _path(obj, False), body=obj, query={"dryRun": "All"})
                assert dry["metadata"]["name"] == obj["metadata"]["name"], dry
                assert dry["kind"] == obj["kind"], dry
            for obj in group:
                admin.request("PATCH", _path(obj, True), body=obj, query={"fieldManager": "draguard-test", "force": True},
                              content_type="application/apply-patch+yaml")
                done.append(obj)
        yield admin, tag, [admin.get("Node", n) or {} for n in nodes]
    finally:
        for item in admin.items("ResourceSlice", label_selector=f"{TEST_LABEL}={tag}"):
            admin.delete("ResourceSlice", item["metadata"]["name"])
        for obj in reversed(done):
            if obj["kind"] != "Namespace":
                try:
                    admin.request("DELETE", _path(obj, True))
                except ApiError as exc:
                    if not exc.not_found:
                        raise
        for node in nodes:
            admin.delete("Node", node)
        admin.delete("Namespace", SYSTEM)
        # gone before the next module of this control plane applies a manifest into draguard-system
        _wait("namespace draguard-system gone", lambda: admin.get("Namespace", SYSTEM) is None, 90)


def test_fake_driver_rbac_is_what_it_calls(applied: tuple[Kube, str, list[dict[str, Any]]]) -> None:
    admin, _, _ = applied
    _wait("the driver's RBAC", lambda: _sar(admin, "get", "nodes"))
    cases = {
        ("get", "resourceclaims", "resource.k8s.io", "some-namespace", ""): True,
        ("list", "resourceslices", "resource.k8s.io", "", ""): True,
        ("create", "resourceslices", "resource.k8s.io", "", ""): True,
        ("update", "resourceslices", "resource.k8s.io", "", ""): True,
        ("delete", "resourceslices", "resource.k8s.io", "", ""): True,
        ("get", "nodes", "", "", ""): True,
        ("list", "resourceclaims", "resource.k8s.io", "some-namespace", ""): True,  # rebuilding damaged books
        ("patch", "resourceclaims", "resource.k8s.io", "some-namespace", "status"): False,
        ("get", "secrets", "", SYSTEM, ""): False,
        ("list", "nodes", "", "", ""): False,
        ("update", "nodes", "", "", ""): False,
        ("create", "events", "", "some-namespace", ""): True,  # a Warning on each claim it rebuilt
        ("update", "events", "", "some-namespace", ""): False,
        ("watch", "resourceclaims", "resource.k8s.io", "some-namespace", ""): False,
        ("create", "pods", "", SYSTEM, ""): False,
        ("create", "deviceclasses", "resource.k8s.io", "", ""): False,
    }
    seen = {case: _sar(admin, *case) for case in cases}
    assert seen == cases, {k: v for k, v in seen.items() if cases[k] != v}


def test_fake_driver_writes_only_its_own_nodes_slices(applied: tuple[Kube, str, list[dict[str, Any]]]) -> None:
    admin, tag, (own, other) = applied
    driver = _token_kube(admin, _token(admin, "draguard-fake-driver", bound_to=own))

    def acts() -> bool:  # the policy acts once the API server's informers have it
        try:
            driver.create(_slice(other["metadata"]["name"], tag))
        except ApiError as exc:
            return POLICY in str(exc)
        admin.delete("ResourceSlice", f"fake-{other['metadata']['name']}")
        return False

    _wait("the own-node policy", acts, 30)
    message = _by_policy(lambda: driver.create(_slice(other["metadata"]["name"], tag)))
    assert f"the driver on node '{own['metadata']['name']}' may write only that node's ResourceSlices" in message
    made = driver.create(_slice(own["metadata"]["name"], tag))
    assert made["spec"]["nodeName"] == own["metadata"]["name"]
    unbound = _token_kube(admin, _token(admin, "draguard-fake-driver"))
    _by_policy(lambda: unbound.delete("ResourceSlice", made["metadata"]["name"]))
    assert driver.delete("ResourceSlice", made["metadata"]["name"])
