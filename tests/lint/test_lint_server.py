"""``draguard lint --server``: a server-side dry run catches what the API server itself rejects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from draguard.cli.main import main

CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: lint-server.draguard.dev
spec:
  selectors:
    - cel:
        expression: device.driver == "gpu.draguard.dev"
---
"""

GOOD = CLASS + """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: one-gpu
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: lint-server.draguard.dev
---
apiVersion: v1
kind: Pod
metadata:
  name: app
spec:
  resourceClaims:
    - name: gpu
      resourceClaimTemplateName: one-gpu
  containers:
    - name: main
      image: registry.example/app:1
      resources:
        claims:
          - name: gpu
"""

# A request name must be a DNS label: nothing static checks that, the API server does.
BAD = CLASS + """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: bad-name
spec:
  spec:
    devices:
      requests:
        - name: GPU_0  # expect
          exactly:
            deviceClassName: lint-server.draguard.dev
"""

# Served only with --runtime-config resource.k8s.io/v1beta1=true.
UNSERVED = """apiVersion: resource.k8s.io/v1beta1  # expect
kind: DeviceClass
metadata:
  name: old.draguard.dev
"""


def _marked(text: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.endswith("# expect"))


@pytest.mark.cluster
def test_server_mode_reports_what_the_api_server_rejects_and_stores_nothing(
    draguard_cluster: object, draguard_namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = str(draguard_cluster.kubeconfig)  # type: ignore[attr-defined]
    good, bad, unserved = tmp_path / "good.yaml", tmp_path / "bad.yaml", tmp_path / "unserved.yaml"
    good.write_text(GOOD)
    bad.write_text(BAD)
    unserved.write_text(UNSERVED)
    common = ["lint", "--server", "--kubeconfig", kubeconfig, "--namespace", draguard_namespace, "--format", "json"]

    assert main([*common, str(good)]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []
    kube = draguard_cluster.kube()  # type: ignore[attr-defined]
    assert kube.get("ResourceClaimTemplate", "one-gpu", draguard_namespace) is None
    assert kube.get("Pod", "app", draguard_namespace) is None

    assert main([*common, str(bad), str(unserved)]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    rejected = [(f["file"], f["line"]) for f in findings if f["rule"] == "server-rejected"]
    assert rejected == [(str(bad), _marked(BAD)), (str(unserved), _marked(UNSERVED))], findings
    assert [f["rule"] for f in findings if f["rule"] != "server-rejected"] == ["dra-api-deprecated"]


def test_kubeconfig_without_server_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    assert main(["lint", "--kubeconfig", str(tmp_path / "kubeconfig"), str(path)]) == 2
    assert "--server" in capsys.readouterr().err


def test_server_mode_with_an_unusable_kubeconfig_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("not: a kubeconfig\n")
    assert main(["lint", "--server", "--kubeconfig", str(kubeconfig), str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("draguard: error: ") and str(kubeconfig) in err and "\n" not in err
