"""``draguard certify`` as deploy/draguard-certify-job.yaml's pod runs it: with the kubeconfig ``draguard
in-cluster`` writes from the Job's ServiceAccount token (bound to the runner's ClusterRole, held by the
runner's admission policies), against the fake fleet on a local control plane, the guide's laptop
certify run passes and its bundle verifies: the account's least privilege is enough for certify.

tests/kind/test_kind_incluster.py runs the Job itself on kind."""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from draguard.cli.main import main
from draguard.harness.cluster import incluster
from draguard.harness.kube import ApiError, Kind, Kube, KINDS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
GUIDE = Path(__file__).resolve().parents[2] / "docs" / "vendor-guide.md"
NS = "draguard-certify"
_KINDS = {**KINDS, **{k.kind: k for k in (
    Kind("ClusterRole", "rbac.authorization.k8s.io", "v1", "clusterroles", False),
    Kind("ClusterRoleBinding", "rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    Kind("Role", "rbac.authorization.k8s.io", "v1", "roles", True),
    Kind("RoleBinding", "rbac.authorization.k8s.io", "v1", "rolebindings", True),
    Kind("ValidatingAdmissionPolicy", "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", False),
    Kind("ValidatingAdmissionPolicyBinding", "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", False),
)}}


def _path(obj: dict[str, Any], with_name: bool) -> str:
    md = obj["metadata"]
    return Kube.path(_KINDS[obj["kind"]], md["name"] if with_name else None, md.get("namespace"))


def _block(marker: str) -> str:
    found = re.search(rf"<!-- {marker}:.*?-->\n\s*```\w+\n(.*?)\s*```", GUIDE.read_text(), re.S)
    assert found, marker
    return found.group(1)


@pytest.mark.cluster
def test_certify_passes_as_the_jobs_account(make_fleet: Callable[..., Any], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "product.yaml").write_text(_block("vendor-product") + "\n")
    objs = [d for name in ("draguard-runner-rbac.yaml", "draguard-certify-job.yaml")
            for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d and d["kind"] != "Job"]
    with make_fleet(nodes=2) as f:
        admin = f.kube
        done = []
        try:
            for obj in objs:
                admin.request("PATCH", _path(obj, True), body=obj, query={"fieldManager": "draguard-test", "force": True},
                              content_type="application/apply-patch+yaml")
                done.append(obj)
            token = admin.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/draguard-certify/token",
                                  body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                        "spec": {"expirationSeconds": 1200}})["status"]["token"]
            sa = tmp_path / "sa"
            sa.mkdir()
            (sa / "token").write_text(token)
            (sa / "ca.crt").write_bytes(Path(admin.configuration.ssl_ca_cert).read_bytes())
            url = urlsplit(admin.configuration.host)
            kubeconfig = incluster.write_kubeconfig(tmp_path / "kubeconfig", sa, {
                "KUBERNETES_SERVICE_HOST": url.hostname or "", "KUBERNETES_SERVICE_PORT": str(url.port)})
            as_job = Kube.from_kubeconfig(kubeconfig)
            review = as_job.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                    body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
            assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{NS}:draguard-certify"
            env = {"KUBECONFIG": str(kubeconfig), "DRIVER": f.driver, "DEVICE_CLASS": f.device_class}
            codes = [main(shlex.split(re.sub(r"\$(\w+)", lambda m: env[m.group(1)], c))[1:])
                     for c in _block("vendor-laptop").splitlines()]
            printed = capsys.readouterr().out
            print(printed[-4000:])
            assert codes == [0, 0], printed[-6000:]
        finally:
            for obj in reversed(done):
                try:
                    admin.request("DELETE", _path(obj, True))
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            deadline = time.monotonic() + 90
            while any(admin.get("Namespace", ns) for ns in (NS, "draguard-system")):
                assert time.monotonic() < deadline, "draguard-certify/draguard-system not gone in 90 s"
                time.sleep(0.5)
    assert os.path.isdir(tmp_path / "bundle")
