"""docs/vendor-guide.md's "laptop with kind" step, run as written: the upstream DRA test driver installed
as a DaemonSet (deploy/dra-test-driver.yaml) in the session's kind cluster, the guide's certify and verify
commands run against it with the kind kubeconfig, the bundle verified (exit 0) with every ``dra_support``
evidence link resolving to a passed testcase inside the bundle, and nothing with the run's label left in
the cluster afterwards.

tests/conftest.py runs this file before test_kind_cluster.py, whose last tests bring the session's cluster
down, and keeps the kind files on one xdist worker."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from draguard.conformance.programmes import BundleView
from draguard.conformance.programmes.ai_conformance import FRAGMENT, REQUIREMENTS
from draguard.harness.cluster.kind.cluster import KindCluster
from draguard.harness.cluster.kind.image import upstream_driver_image
from draguard.harness.kube import RUN_LABEL
from test_kind_cluster import DAEMONSET, DEPLOY, TEST_DRIVER, _kubectl, _wait

pytestmark = pytest.mark.timeout(3600)  # the session's first kind test may build the node image cold

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "vendor-guide.md"
DEVICE_CLASS = "draguard-test-driver"  # deploy/dra-test-driver.yaml's DeviceClass


def guide_block(marker: str) -> list[str]:
    """The commands of the guide's sh block marked ``<!-- marker: ... -->``, a line each."""
    found = re.search(rf"<!-- {marker}:.*?-->\n\s*```sh\n(.*?)\s*```", GUIDE.read_text(), re.S)
    assert found, f"docs/vendor-guide.md lost its {marker} block"
    return [line.strip() for line in found.group(1).splitlines() if line.strip()]


def install_test_driver(cluster: KindCluster, tmp: Path) -> None:
    """Load the test driver's image into the nodes, apply deploy/dra-test-driver.yaml and wait until its
    pods are Ready and each worker's ResourceSlice is published."""
    _, archive = upstream_driver_image(tmp / "dra-test-driver.tar", progress=lambda s: None)
    cluster.load_image_archive(archive)
    applied = _kubectl(cluster, "apply", "-f", str(DEPLOY / "dra-test-driver.yaml"))
    assert applied.returncode == 0, applied.stderr
    kube = cluster.kube()
    workers = {n["metadata"]["name"] for n in kube.items("Node")
               if "node-role.kubernetes.io/control-plane" not in n["metadata"].get("labels", {})}

    def ready() -> bool:
        st = (kube.get(DAEMONSET, "dra-test-driver", "draguard-system") or {}).get("status", {})
        return st.get("desiredNumberScheduled", 0) >= len(workers) and st.get("numberReady") == st.get("desiredNumberScheduled")

    _wait("the test driver's DaemonSet Ready on every worker", ready)
    _wait("a ResourceSlice per worker", lambda: workers <= {
        s["spec"]["nodeName"] for s in kube.items("ResourceSlice") if s["spec"]["driver"] == TEST_DRIVER})


def uninstall_test_driver(cluster: KindCluster) -> None:
    """Delete what deploy/dra-test-driver.yaml made and wait until it is gone (its namespace included),
    so that a later test can apply it again."""
    _kubectl(cluster, "delete", "--ignore-not-found", "--wait=true", "--timeout=110s", "-f", str(DEPLOY / "dra-test-driver.yaml"))


def _entry(fragment: Path, rid: str) -> dict[str, Any]:
    data = YAML(typ="safe").load(fragment.read_text())
    entries = [e for items in data["spec"].values() for e in items] + list(data.get("outsideChecklist") or ())
    found = [e for e in entries if e["id"] == rid]
    assert len(found) == 1, [e["id"] for e in entries]
    return found[0]


def test_the_guides_kind_step_certifies_the_upstream_test_driver(kind_cluster: KindCluster, tmp_path: Path) -> None:
    install_test_driver(kind_cluster, tmp_path)
    try:
        product = re.search(r"<!-- vendor-product:.*?-->\n```yaml\n(.*?)```", GUIDE.read_text(), re.S)
        assert product, "docs/vendor-guide.md lost its vendor-product block"
        (tmp_path / "product.yaml").write_text(product.group(1))
        env = {**os.environ, "KUBECONFIG": str(kind_cluster.kubeconfig), "DRIVER": TEST_DRIVER, "DEVICE_CLASS": DEVICE_CLASS}
        commands = guide_block("vendor-laptop")
        assert [c.split()[:2] for c in commands] == [["draguard", "certify"]] * 2, commands
        runs = []
        for command in commands:
            argv = [re.sub(r"\$(\w+)", lambda m: env[m.group(1)], a) for a in shlex.split(command)]  # "$VAR" as the shell expands it
            t0 = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "draguard.cli", *argv[1:]], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=1800)  # fmt: skip
            runs.append((command, done.returncode, round(time.monotonic() - t0), done.stdout[-6000:] + done.stderr[-3000:]))
        print("\n".join(f"{c}\n  exit {rc} in {s}s" for c, rc, s, _ in runs))
        assert [rc for _, rc, _, _ in runs] == [0, 0], "\n\n".join(f"$ {c}\nexit {rc}\n{out}" for c, rc, _, out in runs)

        bundle = tmp_path / "bundle"
        verdict = json.loads((bundle / "verdict.json").read_text())
        print("\n".join(f"{c['status']:8} {c['id']} {c.get('reason') or ''}" for c in verdict["checks"]))
        entry = _entry(bundle / FRAGMENT, "dra_support")
        # Implemented only when every check of the requirement passed; a check skipped here (the test
        # driver publishes no device attributes: match-attribute) leaves that part unseen, named in the notes.
        ran = {c["id"]: c["status"] for c in verdict["checks"]}
        req = next(r for r in REQUIREMENTS if r.id == "dra_support")
        unseen = [cid for cid in req.checks if ran.get(cid) != "passed"]
        if unseen:
            assert entry["status"] == "Partially Implemented" and all(c in str(entry["notes"]) for c in unseen), entry
        else:
            assert entry["status"] == "Implemented", entry
        links = [str(link) for link in entry["evidence"]]
        assert any("#conformance.core.claim-lifecycle" in link for link in links), links
        cases = BundleView(bundle).cases or {}
        for link in links:  # file://vX.Y/<product>/<file>[#<testcase>], the bundle's root being <product>/
            m = re.fullmatch(r"file://v\d+\.\d+/[^/#]+/([^#]+)(?:#(.+))?", link)
            assert m, link
            assert (bundle / m.group(1)).is_file(), link
            assert m.group(2) is None or cases[m.group(2)].status == "passed", link

        run_id = verdict["runId"].removeprefix("certify-")
        kube = kind_cluster.kube()
        labelled = f"{RUN_LABEL}={run_id}"
        _wait(f"the run's namespace draguard-conformance-{run_id} gone",
              lambda: kube.get("Namespace", f"draguard-conformance-{run_id}") is None, timeout=180)
        for kind in ("Namespace", "Pod", "ResourceClaim", "ResourceClaimTemplate"):  # what the chosen profiles create
            assert kube.items(kind, label_selector=labelled) == [], f"{kind} with {labelled} left behind"
    finally:
        uninstall_test_driver(kind_cluster)
