"""Least privilege for the runner and the test driver, on a real control plane (RBAC and admission on).

deploy/draguard-runner-rbac.yaml and deploy/dra-test-driver.yaml are applied (a server-side dry run of
every object first). SubjectAccessReviews show what RBAC grants each ServiceAccount; what RBAC cannot say
(the runner's own namespaces, the driver's own node) is shown by real requests made with tokens from the
TokenRequest API: the runner's token, and the driver's token bound to a Node, which carries that node's
name as the ``authentication.kubernetes.io/node-name`` extra, as a driver pod's token does on its node.
The runner's own calls (the feature gates from /metrics, finding the driver's DaemonSet, the devices
free before a run, cleanup's search by the run label over every kind it creates) run with its token.

Every object the test creates carries ``draguard.dev/rbac-test=<id>`` (the runner's namespaces also
``draguard.dev/run``, as the runner labels them) and is removed at the end.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import Configuration

from draguard.harness.driver.external import TEST_DRIVER_NAME
from draguard.harness.fleet.coverage import free_devices
from draguard.harness.fleet.installed import find_daemonset
from draguard.harness.kube import KINDS, RUN_LABEL, ApiError, Kind, Kube
from draguard.harness.runner.deploy import priority_class
from draguard.harness.runner.journal import CLEANUP_KINDS, delete_labelled

pytestmark = pytest.mark.cluster

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
TEST_LABEL = "draguard.dev/rbac-test"
SYSTEM = "draguard-system"
RUNNER = f"system:serviceaccount:{SYSTEM}:draguard-runner"
DRIVER = f"system:serviceaccount:{SYSTEM}:dra-test-driver"
SA_GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{SYSTEM}", "system:authenticated"]
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
PAUSE = "registry.k8s.io/pause:3.10.2"

_KINDS = {
    **KINDS,
    **{k.kind: k for k in (
        Kind("ClusterRole", "rbac.authorization.k8s.io", "v1", "clusterroles", False),
        Kind("ClusterRoleBinding", "rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
        Kind("Role", "rbac.authorization.k8s.io", "v1", "roles", True),
        Kind("RoleBinding", "rbac.authorization.k8s.io", "v1", "rolebindings", True),
        Kind("ValidatingAdmissionPolicy", "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", False),
        Kind("ValidatingAdmissionPolicyBinding", "admissionregistration.k8s.io", "v1",
             "validatingadmissionpolicybindings", False),
    )},
}


def _load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _path(obj: dict[str, Any], with_name: bool) -> str:
    md = obj["metadata"]
    return Kube.path(_KINDS[obj["kind"]], md["name"] if with_name else None, md.get("namespace"))


def _wait(what: str, predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.2)


def _token_kube(admin: Kube, token: str) -> Kube:
    """A client that authenticates with ``token`` alone (no client certificate)."""
    cfg = Configuration()
    cfg.host = admin.configuration.host
    cfg.ssl_ca_cert = admin.configuration.ssl_ca_cert
    cfg.api_key = {"authorization": f"Bearer {token}"}
    return Kube(cfg)


def _token(admin: Kube, sa: str, bound_to: dict[str, Any] | None = None) -> str:
    spec: dict[str, Any] = {"expirationSeconds": 600}
    if bound_to is not None:
        md = bound_to["metadata"]
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": bound_to["kind"], "name": md["name"], "uid": md["uid"]}
    answer = admin.request("POST", f"/api/v1/namespaces/{SYSTEM}/serviceaccounts/{sa}/token",
                           body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
    return str(answer["status"]["token"])


def _sar(admin: Kube, user: str, verb: str, resource: str = "", group: str = "", namespace: str = "",
         name: str = "", subresource: str = "", path: str = "") -> bool:
    spec: dict[str, Any] = {"user": user, "groups": SA_GROUPS}
    if path:
        spec["nonResourceAttributes"] = {"path": path, "verb": verb}
    else:
        spec["resourceAttributes"] = {"verb": verb, "group": group, "resource": resource, "namespace": namespace,
                                      "name": name, "subresource": subresource}
    answer = admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                           body={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
    return bool(answer["status"].get("allowed"))


def _denied(call: Any, status: int = 403) -> str:
    """The message of the error that ``call`` gets (it must get one, with ``status``)."""
    with pytest.raises(ApiError) as caught:
        call()
    assert caught.value.status == status, caught.value
    return str(caught.value)


DRIVER_POLICY = "draguard-dra-test-driver-own-node-slices"
"""Its validation names no reason: a denial is 422 Invalid (the runner's policies say Forbidden: 403)."""


def _by_policy(policy: str, call: Any) -> str:
    message = _denied(call, 422 if policy == DRIVER_POLICY else 403)
    assert f"ValidatingAdmissionPolicy '{policy}'" in message, message
    return message


def _by_rbac(call: Any) -> str:
    message = _denied(call)
    assert "ValidatingAdmissionPolicy" not in message and "cannot" in message, message
    return message


class Env:
    """What the module's fixture set up: the clients, the names, and what to remove."""

    def __init__(self, admin: Kube, tag: str) -> None:
        self.admin, self.tag = admin, tag
        self.labels = {TEST_LABEL: tag}
        self.node = f"rbac-node-{tag}"
        self.foreign = f"rbac-foreign-{tag}"
        self.own = f"dg-rbac-{tag}"
        self.run_id = f"rbac{tag}"
        self.run_namespace = f"dg-rbac-run-{tag}"
        self.applied: list[dict[str, Any]] = []
        self.runner: Kube
        self.node_obj: dict[str, Any]

    def pod(self, name: str, namespace: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": self.labels},
                "spec": {"automountServiceAccountToken": False, "containers": [{"name": "c", "image": PAUSE}]}}


def _apply_manifests(env: Env) -> None:
    admin = env.admin
    objs = _load("dra-test-driver.yaml") + _load("draguard-runner-rbac.yaml")
    for obj in objs:
        obj["metadata"].setdefault("labels", {}).update(env.labels)
        if obj["kind"] == "DaemonSet":  # only on this test's node, which has no kubelet and gets tainted unreachable
            spec = obj["spec"]["template"]["spec"]
            spec["nodeSelector"] = {"kubernetes.io/hostname": env.node}
            spec["tolerations"] = [{"operator": "Exists"}]
    namespaces = [o for o in objs if o["kind"] == "Namespace"]
    assert {o["metadata"]["name"] for o in namespaces} == {SYSTEM}
    rest = [o for o in objs if o["kind"] != "Namespace"]
    # the namespace first: a dry run of an object in a namespace that does not exist is refused
    for group in (namespaces[:1], rest):
        for obj in group:
            dry = admin.request("POST", _path(obj, False), body=obj, query={"dryRun": "All"})
            assert dry["metadata"]["name"] == obj["metadata"]["name"], dry
        for obj in group:
            admin.request("PATCH", _path(obj, True), body=obj, query={"fieldManager": "draguard-test", "force": True},
                          content_type="application/apply-patch+yaml")
            env.applied.append(obj)


def _cleanup(env: Env) -> None:
    admin = env.admin
    admin.delete("DaemonSet", "dra-test-driver", SYSTEM)
    namespaces = [SYSTEM, env.foreign, env.own, env.run_namespace]
    for ns in namespaces:  # this node has no kubelet: nothing would confirm a graceful delete of a bound pod
        for pod in admin.items("Pod", ns):
            admin.delete("Pod", pod["metadata"]["name"], ns, grace_seconds=0)
    for obj in reversed(env.applied):
        if obj["kind"] != "Namespace":
            try:
                admin.request("DELETE", _path(obj, True))
            except ApiError as exc:
                if not exc.not_found:
                    raise
    for kind in ("PriorityClass", "ResourceSlice"):
        for selector in (f"{TEST_LABEL}={env.tag}", f"{RUN_LABEL}={env.run_id}"):
            for item in admin.items(kind, label_selector=selector):
                admin.delete(kind, item["metadata"]["name"])
    for ns in namespaces:
        admin.delete("Namespace", ns)
    admin.delete("Node", env.node)
    _wait("the test's namespaces gone", lambda: all(admin.get("Namespace", ns) is None for ns in namespaces), 90)
    left = {kind: [o["metadata"]["name"] for o in admin.items(kind, label_selector=f"{TEST_LABEL}={env.tag}")]
            for kind in ("Namespace", "Node", "PriorityClass", "ResourceSlice", "DeviceClass")}
    assert not any(left.values()), left


@pytest.fixture(scope="module")
def env(draguard_cluster) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    admin = draguard_cluster.kube()
    e = Env(admin, uuid.uuid4().hex[:6])
    try:
        e.node_obj = admin.create({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": e.node, "labels": {**e.labels, "kubernetes.io/hostname": e.node}}})
        _apply_manifests(e)
        admin.create_namespace(e.foreign, e.labels)  # no draguard.dev/run: not the runner's
        e.runner = _token_kube(admin, _token(admin, "draguard-runner"))
        # RBAC and admission policies act once the API server's informers have them
        _wait("the runner's RBAC", lambda: _sar(admin, RUNNER, "list", "nodes"))
        unlabelled = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"rbac-probe-{e.tag}", "labels": e.labels}}

        def policy_acts() -> bool:
            try:
                e.runner.request("POST", "/api/v1/namespaces", body=unlabelled, query={"dryRun": "All"})
            except ApiError as exc:
                return "draguard-runner-labelled-objects" in str(exc)
            return False

        _wait("the runner's policies", policy_acts)
        yield e
    finally:
        _cleanup(e)


def test_runner_rbac_grants_what_a_run_needs_and_no_more(env: Env) -> None:
    own, admin = env.own, env.admin
    cases = {
        # a run: its namespace, its objects, the watches, the steps, cleanup's search by label
        ("create", "namespaces", "", "", ""): True,
        ("delete", "namespaces", "", "", ""): True,
        ("get", "serviceaccounts", "", own, ""): True,
        ("create", "pods", "", own, ""): True,
        ("delete", "pods", "", own, ""): True,
        ("watch", "pods", "", "", ""): True,
        ("create", "resourceclaims", "resource.k8s.io", own, ""): True,
        ("create", "resourceclaimtemplates", "resource.k8s.io", own, ""): True,
        ("create", "podgroups", "scheduling.k8s.io", own, ""): True,
        ("create", "workloads", "scheduling.k8s.io", own, ""): True,
        ("create", "pods/eviction", "", own, ""): True,
        ("patch", "pods/status", "", own, ""): True,
        ("watch", "events", "", own, ""): True,
        ("list", "nodes", "", "", ""): True,
        ("patch", "nodes", "", "", env.node): True,
        ("list", "resourceslices", "resource.k8s.io", "", ""): True,
        ("watch", "deviceclasses", "resource.k8s.io", "", ""): True,
        ("create", "devicetaintrules", "resource.k8s.io", "", ""): True,
        ("create", "priorityclasses", "scheduling.k8s.io", "", ""): True,
        ("list", "daemonsets", "apps", "", ""): True,
        ("patch", "daemonsets", "apps", SYSTEM, "dra-test-driver"): True,
        ("delete", "pods", "", SYSTEM, ""): True,
        # nothing else
        ("get", "secrets", "", "", ""): False,
        ("list", "secrets", "", "", ""): False,
        ("list", "secrets", "", own, ""): False,
        ("get", "secrets", "", SYSTEM, ""): False,
        ("get", "configmaps", "", own, ""): False,
        ("create", "serviceaccounts/token", "", SYSTEM, "draguard-runner"): False,
        ("create", "clusterrolebindings", "rbac.authorization.k8s.io", "", ""): False,
        ("create", "rolebindings", "rbac.authorization.k8s.io", own, ""): False,
        ("impersonate", "users", "", "", ""): False,
        ("update", "namespaces", "", "", own): False,
        ("patch", "nodes/status", "", "", env.node): False,
        ("delete", "nodes", "", "", env.node): False,
        ("update", "resourceslices", "resource.k8s.io", "", ""): False,
        ("patch", "daemonsets", "apps", SYSTEM, "another-daemonset"): False,
        ("patch", "daemonsets", "apps", "kube-system", "dra-test-driver"): False,
        ("patch", "resourceclaims/status", "resource.k8s.io", own, ""): False,
        ("deletecollection", "pods", "", own, ""): False,
    }
    seen = {}
    for (verb, res, group, ns, name), _ in cases.items():
        resource, _, sub = res.partition("/")
        seen[(verb, res, group, ns, name)] = _sar(admin, RUNNER, verb, resource, group, ns, name, sub)
    assert seen == cases, {k: v for k, v in seen.items() if cases[k] != v}
    assert _sar(admin, RUNNER, "get", path="/metrics")
    assert not _sar(admin, RUNNER, "get", path="/debug/pprof/")
    print(f"runner: {sum(cases.values())} SARs allowed, {sum(not v for v in cases.values())} denied, as expected")


def test_driver_rbac_writes_slices_and_reads_no_secrets(env: Env) -> None:
    admin = env.admin
    cases = {
        ("create", "resourceslices", "resource.k8s.io", ""): True,
        ("delete", "resourceslices", "resource.k8s.io", ""): True,
        ("get", "resourceclaims", "resource.k8s.io", "some-namespace"): True,
        ("patch", "resourceclaims/status", "resource.k8s.io", "some-namespace"): True,
        ("get", "nodes", "", ""): True,
        ("get", "secrets", "", ""): False,
        ("list", "secrets", "", SYSTEM): False,
        ("list", "nodes", "", ""): False,
        ("update", "nodes", "", ""): False,
        ("create", "pods", "", SYSTEM): False,
        ("update", "resourceclaims", "resource.k8s.io", "some-namespace"): False,
        ("create", "deviceclasses", "resource.k8s.io", ""): False,
    }
    seen = {}
    for (verb, res, group, ns) in cases:
        resource, _, sub = res.partition("/")
        seen[(verb, res, group, ns)] = _sar(admin, DRIVER, verb, resource, group, ns, "", sub)
    assert seen == cases, {k: v for k, v in seen.items() if cases[k] != v}


def test_runner_touches_only_the_namespaces_it_labels(env: Env) -> None:
    admin, runner, labels = env.admin, env.runner, env.labels
    ns_body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"rbac-unlabelled-{env.tag}", "labels": labels}}
    message = _by_policy("draguard-runner-labelled-objects", lambda: runner.create(ns_body))
    assert "only namespaces labelled draguard.dev/run" in message, message
    # the foreign namespace (no run label) is neither deleted nor relabelled into the runner's
    _by_policy("draguard-runner-labelled-objects", lambda: runner.delete("Namespace", env.foreign))
    _by_rbac(lambda: runner.patch("Namespace", env.foreign, {"metadata": {"labels": {RUN_LABEL: env.tag}}}))
    assert admin.get("Namespace", env.foreign) is not None
    _by_policy("draguard-runner-labelled-objects", lambda: runner.delete("Namespace", SYSTEM))
    # its own: created with the run label, as runner.py does
    runner.create_namespace(env.own, {RUN_LABEL: env.tag, **labels}, wait=True)
    made = admin.get("Namespace", env.own)
    assert made is not None and made["metadata"]["labels"][RUN_LABEL] == env.tag, made
    # cluster-scoped objects it creates: only labelled (a PriorityClass stands for them all)
    pc: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 1000,
          "metadata": {"name": f"rbac-pc-{env.tag}", "labels": labels}}
    _by_policy("draguard-runner-labelled-objects", lambda: runner.create(pc))
    pc["metadata"]["labels"] = {RUN_LABEL: env.tag, **labels}
    runner.create(pc)
    assert runner.delete("PriorityClass", pc["metadata"]["name"])


def test_runner_writes_pods_and_claims_only_in_its_namespaces(env: Env) -> None:
    admin, runner, own, foreign = env.admin, env.runner, env.own, env.foreign
    if admin.get("Namespace", own) is None:
        runner.create_namespace(own, {RUN_LABEL: env.tag, **env.labels}, wait=True)
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "c", "labels": env.labels},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "draguard-test-driver"}}]}}}
    # in its own namespace: pods, claims, evictions, deletes
    runner.create(env.pod("p", own))
    runner.create(env.pod("q", own))
    runner.create(claim, own)
    runner.request("POST", Kube.path("Pod", "p", own, "eviction"),
                   body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": own}})
    assert runner.delete("Pod", "q", own, grace_seconds=0)
    assert runner.delete("ResourceClaim", "c", own)
    # elsewhere: denied by the policy, although RBAC grants the verbs cluster-wide
    admin.create(env.pod("theirs", foreign))
    policy = "draguard-runner-own-namespaces"
    for ns in (foreign, SYSTEM):
        message = _by_policy(policy, lambda ns=ns: runner.create(env.pod("p", ns)))
        assert f"only in namespaces labelled draguard.dev/run (its own), not in {ns}" in message, message
        _by_policy(policy, lambda ns=ns: runner.create(claim, ns))
    _by_policy(policy, lambda: runner.delete("Pod", "theirs", foreign))
    _by_policy(policy, lambda: runner.request(
        "POST", Kube.path("Pod", "theirs", foreign, "eviction"),
        body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "theirs", "namespace": foreign}}))
    assert admin.get("Pod", "theirs", foreign) is not None
    # secrets: not by RBAC, anywhere
    _by_rbac(lambda: runner.request("GET", f"/api/v1/namespaces/{own}/secrets"))
    _by_rbac(lambda: runner.request("GET", f"/api/v1/namespaces/{SYSTEM}/secrets"))
    _by_rbac(lambda: runner.request("GET", "/api/v1/secrets"))


def test_runner_restarts_and_takes_down_only_the_drivers_daemonset(env: Env) -> None:
    admin, runner = env.admin, env.runner
    _wait("the DaemonSet's pod on the test node", lambda: bool(admin.items("Pod", SYSTEM, "app.kubernetes.io/name=dra-test-driver")), 60)
    driver_pod = admin.items("Pod", SYSTEM, "app.kubernetes.io/name=dra-test-driver")[0]
    # a pod in the driver's namespace that no DaemonSet owns stays
    admin.create(env.pod("bystander", SYSTEM))
    _by_policy("draguard-runner-own-namespaces", lambda: runner.delete("Pod", "bystander", SYSTEM))
    # driver-down: the DaemonSet's strategy and template patched, then put back
    runner.patch("DaemonSet", "dra-test-driver", {"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": None}}}, SYSTEM)
    runner.patch("DaemonSet", "dra-test-driver", {"spec": {"updateStrategy": {"type": "RollingUpdate"}}}, SYSTEM)
    ds = admin.get("DaemonSet", "dra-test-driver", SYSTEM)
    assert ds is not None and ds["spec"]["updateStrategy"]["type"] == "RollingUpdate", ds
    # driver-restart: its pod deleted
    assert runner.delete("Pod", driver_pod["metadata"]["name"], SYSTEM, grace_seconds=0)
    # a DaemonSet the runner was not granted: not patched, and its pods not deleted
    other = {"apiVersion": "apps/v1", "kind": "DaemonSet",
             "metadata": {"name": "other-daemon", "namespace": SYSTEM, "labels": env.labels},
             "spec": {"selector": {"matchLabels": {"app": f"other-{env.tag}"}},
                      "template": {"metadata": {"labels": {"app": f"other-{env.tag}", **env.labels}},
                                   "spec": {"nodeSelector": {"kubernetes.io/hostname": env.node},
                                            "tolerations": [{"operator": "Exists"}],
                                            "automountServiceAccountToken": False,
                                            "containers": [{"name": "c", "image": PAUSE}]}}}}
    admin.create(other)
    try:
        _by_rbac(lambda: runner.patch("DaemonSet", "other-daemon", {"spec": {"minReadySeconds": 1}}, SYSTEM))
        _wait("the other DaemonSet's pod", lambda: bool(admin.items("Pod", SYSTEM, f"app=other-{env.tag}")), 60)
        pod = admin.items("Pod", SYSTEM, f"app=other-{env.tag}")[0]
        _by_policy("draguard-runner-own-namespaces", lambda: runner.delete("Pod", pod["metadata"]["name"], SYSTEM))
    finally:
        admin.delete("DaemonSet", "other-daemon", SYSTEM)


def test_runner_may_cordon_a_node_and_nothing_more(env: Env) -> None:
    admin, runner = env.admin, env.runner
    runner.patch("Node", env.node, {"spec": {"unschedulable": True}})
    cordoned = admin.get("Node", env.node)
    assert cordoned is not None and cordoned["spec"]["unschedulable"] is True, cordoned
    runner.patch("Node", env.node, {"spec": {"unschedulable": None}})
    _by_policy("draguard-runner-cordon-only",
               lambda: runner.patch("Node", env.node, {"metadata": {"labels": {"gpu": "yes"}}}))
    _by_policy("draguard-runner-cordon-only", lambda: runner.patch(
        "Node", env.node, {"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}))
    _by_rbac(lambda: runner.patch("Node", env.node, {"status": {"capacity": {"cpu": "1"}}}, subresource="status"))
    _by_rbac(lambda: runner.delete("Node", env.node))
    node = admin.get("Node", env.node)
    assert node is not None and "gpu" not in node["metadata"]["labels"], node["metadata"]
    assert not any(t.get("key") == "k" for t in node["spec"].get("taints") or []), node["spec"]


def test_driver_writes_only_its_own_nodes_slices(env: Env) -> None:
    admin = env.admin
    node = admin.get("Node", env.node)
    assert node is not None
    driver = _token_kube(admin, _token(admin, "dra-test-driver", bound_to=node))
    # the token bound to the node carries its name, as a driver pod's token on that node does
    review = driver.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    user = review["status"]["userInfo"]
    assert user["username"] == DRIVER and user["extra"][NODE_NAME_EXTRA] == [env.node], user

    def slice_for(node_name: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"rbac-{node_name}-slice", "labels": env.labels},
                "spec": {"driver": "test-driver.cdi.k8s.io", "nodeName": node_name,
                         "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "dev-0"}]}}

    own = driver.create(slice_for(env.node))
    assert own["spec"]["nodeName"] == env.node
    other = f"rbac-other-node-{env.tag}"
    message = _by_policy(DRIVER_POLICY, lambda: driver.create(slice_for(other)))
    assert f"the driver on node '{env.node}' may write only that node's ResourceSlices, not '{other}'" in message, message
    # a slice of another node written by someone else: the driver cannot delete it (nor update it)
    admin.create(slice_for(other))
    _by_policy(DRIVER_POLICY, lambda: driver.delete("ResourceSlice", f"rbac-{other}-slice"))
    theirs = admin.get("ResourceSlice", f"rbac-{other}-slice")
    assert theirs is not None
    theirs["spec"]["devices"].append({"name": "dev-1"})
    _by_policy(DRIVER_POLICY, lambda: driver.replace(theirs))
    # a token bound to no node carries no node name: not even its own node's slice
    unbound = _token_kube(admin, _token(admin, "dra-test-driver"))
    message = _by_policy(DRIVER_POLICY,
                         lambda: unbound.delete("ResourceSlice", f"rbac-{env.node}-slice"))
    assert "the driver on node ''" in message, message
    _by_rbac(lambda: driver.request("GET", f"/api/v1/namespaces/{SYSTEM}/secrets"))
    assert driver.delete("ResourceSlice", f"rbac-{env.node}-slice")
    assert admin.delete("ResourceSlice", f"rbac-{other}-slice")


def test_the_runners_own_calls_work_under_the_account(env: Env) -> None:
    """The runner's code, called with the account's token: what it reads at the start of a run against an
    installed driver, and cleanup's search by the run label over every kind it creates."""
    admin, runner, run_id = env.admin, env.runner, env.run_id
    gates = runner.feature_gates()  # /metrics
    assert gates.get("DynamicResourceAllocation") is True, sorted(gates)[:10]
    ds = find_daemonset(runner, TEST_DRIVER_NAME)
    assert ds is not None and ds["metadata"]["name"] == "dra-test-driver", ds
    assert isinstance(free_devices(runner, TEST_DRIVER_NAME, [env.node]), frozenset)
    for kind in CLEANUP_KINDS:  # each kind cleanup searches: listed, or not served here; never forbidden
        try:
            runner.items(kind, label_selector=f"{RUN_LABEL}={run_id}")
        except ApiError as exc:
            assert exc.status == 404, f"{kind}: {exc}"
    runner.create_namespace(env.run_namespace, {RUN_LABEL: run_id, **env.labels}, wait=True)
    runner.create(priority_class(run_id, 1000))
    pod = env.pod("worker", env.run_namespace)
    pod["metadata"]["labels"][RUN_LABEL] = run_id
    runner.create(pod)
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t", "namespace": env.run_namespace, "labels": {RUN_LABEL: run_id, **env.labels}},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "r", "exactly": {"deviceClassName": "draguard-test-driver"}}]}}}}
    runner.create(template)
    done = delete_labelled(runner, run_id)
    assert sorted(done) == sorted([
        f"deleted Pod {env.run_namespace}/worker", f"deleted ResourceClaimTemplate {env.run_namespace}/t",
        f"deleted PriorityClass {priority_class(run_id, 1000)['metadata']['name']}",
        f"deleted Namespace {env.run_namespace}"]), done
    left = [o["metadata"]["name"] for o in admin.items("PriorityClass", label_selector=f"{RUN_LABEL}={run_id}")]
    assert not left, left
