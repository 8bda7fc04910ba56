"""In-cluster runs without a kubelet: the kubeconfig ``draguard in-cluster`` writes from a ServiceAccount's
mounted files (loaded by the kubernetes client; against a local control plane it authenticates as that
ServiceAccount), what it hands Sonobuoy when certify fails on bad input, and ``draguard results``'
answers to bad input and to a run that does not finish in time (one line, exit 2, nothing left).

On kind, tests/kind/test_kind_incluster.py runs the Job itself and copies a bundle out."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest

from draguard.harness.cluster import incluster
from draguard.harness.core.errors import UsageError
from draguard.harness.kube import Kube

ROOT = Path(__file__).resolve().parents[2]


def _sa_dir(tmp: Path, token: str = "tok-123", ca: bytes = b"not a real CA\n") -> Path:
    sa = tmp / "sa"
    sa.mkdir()
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_bytes(ca)
    (sa / "namespace").write_text("draguard-certify\n")
    return sa


def test_kubeconfig_from_the_serviceaccount_files_loads_in_the_client(tmp_path: Path) -> None:
    sa = _sa_dir(tmp_path)
    path = incluster.write_kubeconfig(tmp_path / "k" / "config", sa, {"KUBERNETES_SERVICE_HOST": "10.96.0.1",
                                                                     "KUBERNETES_SERVICE_PORT": "443"})
    assert path.stat().st_mode & 0o777 == 0o600
    cfg = Kube.from_kubeconfig(path).configuration
    assert cfg.host == "https://10.96.0.1:443"
    assert cfg.api_key["BearerToken"] == "Bearer tok-123"
    assert Path(cfg.ssl_ca_cert).read_bytes() == b"not a real CA\n"
    v6 = incluster.write_kubeconfig(tmp_path / "v6", sa, {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"})
    assert Kube.from_kubeconfig(v6).configuration.host == "https://[fd00::1]:443"


def test_kubeconfig_outside_a_pod_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="KUBERNETES_SERVICE_HOST"):
        incluster.write_kubeconfig(tmp_path / "config", _sa_dir(tmp_path), {})
    with pytest.raises(UsageError, match="token is not mounted"):
        incluster.write_kubeconfig(tmp_path / "config", tmp_path, {"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"})


def test_certify_refusing_its_input_reaches_sonobuoy_as_a_failed_junit_case(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "1")
    results, sono = tmp_path / "results", tmp_path / "sonobuoy"
    code = incluster.run_in_pod(CERTIFY, ["--driver", "x"], results, 0, sono, progress=lambda s: None,
                                sa_dir=_sa_dir(tmp_path), kubeconfig=tmp_path / "kubeconfig")
    assert code == 0  # the pod ends; the verdict is in the junit
    assert (results / incluster.EXIT).read_text().strip() == "2"
    assert "missing option --device-class" in (results / incluster.LOG).read_text()
    archive = Path((sono / "done").read_text())
    assert archive == sono / "draguard.tar.gz"
    with tarfile.open(archive) as tar:
        junit = tar.extractfile("junit_01.xml").read().decode()  # type: ignore[union-attr]
    assert 'failures="1"' in junit and "missing option --device-class" in junit, junit


def test_in_cluster_refuses_the_flags_it_sets(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--out is set by draguard in-cluster"):
        incluster.run_in_pod(CERTIFY, ["--out=x"], tmp_path, 0, progress=lambda s: None)


CERTIFY = [sys.executable, "-m", "draguard.cli", "certify"]


def _results(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "draguard.cli", "results", *args], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def test_results_bad_input_is_one_line_and_exit_2(tmp_path: Path, draguard_cluster) -> None:  # type: ignore[no-untyped-def]
    missing = _results("--kubeconfig", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "nope" in missing.stderr and "Traceback" not in missing.stderr, missing.stderr
    kubeconfig = str(draguard_cluster.kubeconfig)
    absent = f"absent-{uuid.uuid4().hex[:6]}"
    no_ns = _results("--kubeconfig", kubeconfig, "--namespace", absent)
    assert no_ns.returncode == 2, no_ns
    assert no_ns.stderr.strip() == f"draguard: error: namespace {absent} does not exist (apply deploy/draguard-certify-job.yaml first)"
    kube = draguard_cluster.kube()
    kube.create_namespace(absent, wait=False)
    try:
        no_job = _results("--kubeconfig", kubeconfig, "--namespace", absent)
        assert no_job.returncode == 2 and f"no Job {absent}/draguard-certify" in no_job.stderr, no_job.stderr
        # A Job whose pod never runs (a control plane with no nodes): a bounded wait, then one line naming the state.
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "draguard-certify", "namespace": absent},
               "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
                   {"name": "certify", "image": "draguard.dev/draguard:0.1.0"}]}}}}
        kube.request("POST", f"/apis/batch/v1/namespaces/{absent}/jobs", body=job)
        late = _results("--kubeconfig", kubeconfig, "--namespace", absent, "--timeout", "4", "--output", str(tmp_path / "out"))
        assert late.returncode == 2, late
        last = late.stderr.strip().splitlines()[-1]
        assert last.startswith(f"draguard: error: draguard results: the run in {absent}/draguard-certify is not done after 4s ("), last
        assert not (tmp_path / "out").exists()
    finally:
        kube.delete("Namespace", absent)
    assert json.loads(json.dumps(kube.get("Namespace", absent) or {})).get("status", {}).get("phase") in (None, "Terminating")
