"""deploy/draguard-certify-job.yaml on a local control plane: lint-clean under ``draguard lint``, every
object accepted by a server-side dry run; once applied with deploy/draguard-runner-rbac.yaml, the Job's
ServiceAccount has the runner's grants and no more (SubjectAccessReviews), the kubeconfig ``draguard
in-cluster`` writes from its token authenticates as it, and the runner's admission policies bound it as
they bound the runner. deploy/sonobuoy-plugin.yaml: ``sonobuoy gen --plugin`` accepts it (skipped, saying
why, where no sonobuoy binary is cached: ``go build`` github.com/vmware-tanzu/sonobuoy at SONOBUOY_VERSION
into ~/.cache/draguard/sonobuoy/<version>/, or DRAGUARD_SONOBUOY=path).

On kind, tests/kind/test_kind_incluster.py runs the Job."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from test_rbac_least_privilege import _KINDS, _denied, _load, _wait

from draguard.harness.cluster import incluster
from draguard.harness.kube import RUN_LABEL, ApiError, Kind, Kube

ROOT = Path(__file__).resolve().parents[2]
NS = "draguard-certify"
SA = f"system:serviceaccount:{NS}:draguard-certify"
GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"]
SONOBUOY_VERSION = "v0.57.3"
KINDS = {**_KINDS, "Job": Kind("Job", "batch", "v1", "jobs", True)}


def _path(obj: dict[str, Any], with_name: bool) -> str:
    md = obj["metadata"]
    return Kube.path(KINDS[obj["kind"]], md["name"] if with_name else None, md.get("namespace"))


def test_certify_job_manifest_is_lint_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "draguard.cli", "lint", str(ROOT / "deploy" / "draguard-certify-job.yaml")],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 error(s), 0 warning(s)" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def _sar(admin: Kube, verb: str, resource: str, group: str = "", namespace: str = "", sub: str = "") -> bool:
    spec = {"user": SA, "groups": GROUPS, "resourceAttributes": {
        "verb": verb, "group": group, "resource": resource, "namespace": namespace, "subresource": sub}}
    answer = admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                           body={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
    return bool(answer["status"].get("allowed"))


def _apply(admin: Kube, obj: dict[str, Any]) -> None:
    admin.request("PATCH", _path(obj, True), body=obj, query={"fieldManager": "draguard-test", "force": True},
                  content_type="application/apply-patch+yaml")


@pytest.fixture(scope="module")
def applied(draguard_cluster) -> Iterator[Kube]:  # type: ignore[no-untyped-def]
    admin = draguard_cluster.kube()
    job_objs = _load("draguard-certify-job.yaml")
    rbac = _load("draguard-runner-rbac.yaml")
    assert [o["kind"] for o in job_objs] == ["Namespace", "ServiceAccount", "ClusterRoleBinding", "ConfigMap", "Job"]
    done: list[dict[str, Any]] = []
    try:
        for obj in rbac:
            _apply(admin, obj)
            done.append(obj)
        for group in (job_objs[:1], job_objs[1:]):
            for obj in group:  # a server-side dry run of each
                dry = admin.request("POST", _path(obj, False), body=obj, query={"dryRun": "All"})
                assert (dry["kind"], dry["metadata"]["name"]) == (obj["kind"], obj["metadata"]["name"]), dry
            for obj in group:
                if obj["kind"] != "Job":  # its pod would wait for a node forever here; tests/kind runs it
                    _apply(admin, obj)
                    done.append(obj)
        _wait("the certify account's RBAC", lambda: _sar(admin, "list", "nodes"))
        yield admin
    finally:
        for obj in reversed(done):
            if obj["kind"] != "Namespace":
                try:
                    admin.request("DELETE", _path(obj, True))
                except ApiError as exc:
                    if not exc.not_found:
                        raise
        for ns in (NS, "draguard-system"):  # gone before the next module of this control plane applies into it
            admin.delete("Namespace", ns)
            _wait(f"namespace {ns} gone", lambda ns=ns: admin.get("Namespace", ns) is None, 90)


def test_the_jobs_account_has_the_runners_grants_and_no_more(applied: Kube) -> None:
    granted = {
        ("create", "namespaces", ""): True,
        ("create", "resourceclaims", "resource.k8s.io"): True,
        ("list", "resourceslices", "resource.k8s.io"): True,
        ("create", "pods/eviction", ""): True,
        ("get", "secrets", ""): False,
        ("list", "configmaps", ""): False,
        ("create", "clusterrolebindings", "rbac.authorization.k8s.io"): False,
        ("create", "serviceaccounts/token", ""): False,
        ("update", "nodes/status", ""): False,
    }
    seen = {}
    for verb, resource, group in granted:
        res, _, sub = resource.partition("/")
        seen[(verb, resource, group)] = _sar(applied, verb, res, group, "" if res in ("namespaces", "nodes") else "default", sub)
    assert seen == granted


def _certify_kube(admin: Kube, tmp: Path) -> Kube:
    """A client from the kubeconfig draguard in-cluster writes, with a token of the Job's account as the
    kubelet mounts one (token, ca.crt, namespace files)."""
    answer = admin.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/draguard-certify/token",
                           body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                 "spec": {"expirationSeconds": 600}})  # fmt: skip
    sa = tmp / "sa"
    sa.mkdir()
    (sa / "token").write_text(answer["status"]["token"])
    (sa / "ca.crt").write_bytes(Path(admin.configuration.ssl_ca_cert).read_bytes())
    (sa / "namespace").write_text(NS)
    url = urlsplit(admin.configuration.host)
    path = incluster.write_kubeconfig(tmp / "kubeconfig", sa, {"KUBERNETES_SERVICE_HOST": url.hostname or "",
                                                              "KUBERNETES_SERVICE_PORT": str(url.port)})
    return Kube.from_kubeconfig(path)


def test_the_in_cluster_kubeconfig_is_the_jobs_account_bounded_by_the_policies(applied: Kube, tmp_path: Path) -> None:
    kube = _certify_kube(applied, tmp_path)
    review = kube.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                          body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert review["status"]["userInfo"]["username"] == SA
    with pytest.raises(ApiError) as caught:
        kube.items("ConfigMap", "kube-system")
    assert caught.value.status == 403
    tag = uuid.uuid4().hex[:6]
    plain = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"plain-{tag}"}}

    def policy_acts() -> bool:  # once the API server's informers have the policies and their bindings
        try:
            kube.request("POST", "/api/v1/namespaces", body=plain, query={"dryRun": "All"})
        except ApiError:
            return True
        return False

    _wait("the runner's policies acting on the certify account", policy_acts)
    message = _denied(lambda: kube.create(plain))
    assert "draguard-runner-labelled-objects" in message, message
    labelled = f"dg-incluster-{tag}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": labelled, "labels": {RUN_LABEL: tag}}})
    kube.delete("Namespace", labelled)
    # its writes of pods go only to namespaces with the run label: not into its own Job's namespace
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{tag}"},
           "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.2"}]}}
    assert "draguard-runner-own-namespaces" in _denied(lambda: kube.create(pod, NS))


def _sonobuoy() -> Path | None:
    given = os.environ.get("DRAGUARD_SONOBUOY")
    path = Path(given) if given else Path.home() / ".cache" / "draguard" / "sonobuoy" / SONOBUOY_VERSION / "sonobuoy"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def test_sonobuoy_gen_accepts_the_plugin() -> None:
    binary = _sonobuoy()
    if binary is None:
        pytest.skip(f"no sonobuoy binary: `go build` github.com/vmware-tanzu/sonobuoy@{SONOBUOY_VERSION} into "
                    f"~/.cache/draguard/sonobuoy/{SONOBUOY_VERSION}/sonobuoy, or set DRAGUARD_SONOBUOY")
    proc = subprocess.run([str(binary), "gen", "--plugin", str(ROOT / "deploy" / "sonobuoy-plugin.yaml"),
                           "--kubernetes-version", "v1.37.0"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    plugins = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "sonobuoy-plugins-cm")
    assert len(plugins["data"]) == 1, plugins["data"].keys()
    plugin = yaml.safe_load(next(iter(plugins["data"].values())))
    assert plugin["sonobuoy-config"] | {"description": ""} == {"driver": "Job", "plugin-name": "draguard",
                                                              "result-format": "junit", "description": ""}
    spec = plugin["spec"]
    assert spec["command"] == ["draguard"] and spec["args"][:3] == ["in-cluster", "--sonobuoy-dir", "/tmp/sonobuoy/results"]
    product = spec["args"][spec["args"].index("--product") + 1]
    mounts = {m["mountPath"]: m["name"] for m in spec["volumeMounts"]}
    assert mounts["/tmp/sonobuoy/results"] == "results"
    assert Path(product).parent.as_posix() in mounts, (product, mounts)  # the config-map Sonobuoy mounts
    config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "plugin-draguard-cm")
    assert set(config["data"]) == {Path(product).name}
    env = {e["name"]: e.get("value") for e in spec["env"]}
    assert env["SONOBUOY_RESULTS_DIR"] == "/tmp/sonobuoy/results"
    # the same certify arguments as the Job's
    job = _load("draguard-certify-job.yaml")[-1]["spec"]["template"]["spec"]["containers"][0]
    strip = {"--results", "--keep-for", "--sonobuoy-dir", "--product"}

    def certify_args(args: list[str]) -> list[str]:
        out, skip = [], False
        for a in args[1:]:
            if skip:
                skip = False
            elif a in strip:
                skip = True
            else:
                out.append(a)
        return out

    assert certify_args(spec["args"]) == certify_args(job["args"])
