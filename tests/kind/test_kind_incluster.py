"""An in-cluster certify run on kind, as conformance runs are done: draguard's own image (built offline,
loaded into the workers), the upstream DRA test driver installed as a DaemonSet, deploy/draguard-runner-rbac.yaml
and deploy/draguard-certify-job.yaml applied; ``draguard results`` waits for the run, copies the bundle out
through the API's exec and lets the pod end; ``draguard certify --verify`` accepts the copy; the Job then
completes, and nothing of the run or the manifests is left in the cluster.

tests/conftest.py runs this file before test_kind_cluster.py, whose last tests bring the session's cluster
down."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from test_kind_certify import install_test_driver, uninstall_test_driver
from readme_blocks import REPO, blocks
from test_kind_cluster import DEPLOY, _kubectl, _wait

from draguard.cli.cluster import COMMAND
from draguard.harness.cluster.incluster import JOB, NAMESPACE
from draguard.harness.cluster.kind.cluster import KindCluster
from draguard.harness.cluster.kind.draguardimage import draguard_image
from draguard.harness.kube import RUN_LABEL, Kind

pytestmark = pytest.mark.timeout(3600)

JOB_FILE = DEPLOY / "draguard-certify-job.yaml"
RBAC_FILE = DEPLOY / "draguard-runner-rbac.yaml"
_JOB = Kind("Job", "batch", "v1", "jobs", True)


def _draguard(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "draguard.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def test_certify_runs_in_the_cluster_and_results_copies_the_bundle_out(kind_cluster: KindCluster, tmp_path: Path) -> None:
    t0 = time.monotonic()
    image, stages = draguard_image(COMMAND, progress=lambda s: print(s, flush=True))
    manifest = [d for d in YAML(typ="safe").load_all(JOB_FILE.read_text()) if d]
    job_spec = next(d for d in manifest if d["kind"] == "Job")["spec"]["template"]["spec"]
    assert job_spec["containers"][0]["image"] == image.tag, "deploy/draguard-certify-job.yaml names another image"
    kube = kind_cluster.kube()
    workers = [n["metadata"]["name"] for n in kube.items("Node")
               if "node-role.kubernetes.io/control-plane" not in n["metadata"].get("labels", {})]
    kind_cluster.load_image_archive(image.tarball, workers)
    print(f"draguard image {image.keyed_tag} built or reused and loaded in {time.monotonic() - t0:.0f}s {stages}")
    install_test_driver(kind_cluster, tmp_path)
    run_id = ""
    try:
        # The README's incluster-commands, as written: kubectl apply, then draguard results.
        apply_line, results_line = blocks()["incluster"].lines
        assert apply_line.startswith("kubectl apply ") and results_line.startswith("draguard results ")
        applied = _kubectl(kind_cluster, *shlex.split(apply_line)[1:], cwd=REPO)
        assert applied.returncode == 0, applied.stderr
        t0 = time.monotonic()
        out = tmp_path / "results"
        got = subprocess.run(["bash", "-c", results_line], cwd=tmp_path, capture_output=True, text=True, timeout=1700,
                             check=False, env={**os.environ, "KUBECONFIG": str(kind_cluster.kubeconfig),
                                               "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
        print(f"draguard results: exit {got.returncode} in {time.monotonic() - t0:.0f}s\n{got.stdout[-3000:]}{got.stderr[-3000:]}")
        assert got.returncode == 0, got.stdout + got.stderr
        assert "verified" in got.stdout and "NOT verified" not in got.stdout, got.stdout
        assert (out / "exit-code").read_text().strip() == "0"
        verified = _draguard("certify", "--verify", str(out / "bundle"), timeout=300)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        verified_tgz = _draguard("certify", "--verify", str(out / "bundle.tar.gz"), timeout=300)
        assert verified_tgz.returncode == 0, verified_tgz.stdout + verified_tgz.stderr
        verdict = json.loads((out / "bundle" / "verdict.json").read_text())
        run_id = verdict["runId"].removeprefix("certify-")
        print("\n".join(f"{c['status']:8} {c['id']}" for c in verdict["checks"]))
        assert any(c["status"] == "passed" for c in verdict["checks"])

        def job_complete() -> bool:  # told it may end, the pod ends and the Job completes
            st = (kube.get(_JOB, JOB, NAMESPACE) or {}).get("status", {})
            return bool(st.get("succeeded"))

        _wait("the Job complete once its results were retrieved", job_complete, timeout=60)
    finally:
        _kubectl(kind_cluster, "delete", "--ignore-not-found", "--wait=true", "--timeout=110s", "-f", str(JOB_FILE))
        _kubectl(kind_cluster, "delete", "--ignore-not-found", "--wait=true", "--timeout=110s", "-f", str(RBAC_FILE))
        uninstall_test_driver(kind_cluster)
    assert kube.get("Namespace", NAMESPACE) is None
    assert kube.get("Namespace", "draguard-system") is None
    if run_id:
        _wait(f"the run's namespace draguard-conformance-{run_id} gone",
              lambda: kube.get("Namespace", f"draguard-conformance-{run_id}") is None, timeout=180)
        for kind in ("Namespace", "Pod", "ResourceClaim", "ResourceClaimTemplate"):
            assert kube.items(kind, label_selector=f"{RUN_LABEL}={run_id}") == [], f"{kind} of run {run_id} left behind"
