"""deploy/node-probe.yaml on a local control plane: lint-clean under ``draguard lint``, and its DaemonSet,
labelled for a run and placed in that run's namespace, accepted by a server-side dry run as it is written:
every hostPath (the CDI directory, the kubelet plugins' directories, the fake driver's device truth) is
mounted read-only, the root filesystem too, no capability kept and no ServiceAccount token mounted.

The probe is not yet what the installed fleet reads through (on kind it reads the node containers)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from draguard.harness.kube import RUN_LABEL

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "deploy" / "node-probe.yaml"


def test_node_probe_manifest_is_lint_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "draguard.cli", "lint", str(PROBE)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 error(s), 0 warning(s)" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_node_probe_is_run_labelled_read_only_and_accepted_by_a_dry_run(draguard_cluster) -> None:  # type: ignore[no-untyped-def]
    admin = draguard_cluster.kube()
    (ds,) = list(yaml.safe_load_all(PROBE.read_text()))
    assert ds["kind"] == "DaemonSet"
    for labels in (ds["metadata"]["labels"], ds["spec"]["selector"]["matchLabels"], ds["spec"]["template"]["metadata"]["labels"]):
        assert labels[RUN_LABEL] == "RUN", labels  # the run's id goes there
    run = f"probe-{uuid.uuid4().hex[:6]}"
    ns = f"draguard-{run}"
    for labels in (ds["metadata"]["labels"], ds["spec"]["selector"]["matchLabels"], ds["spec"]["template"]["metadata"]["labels"]):
        labels[RUN_LABEL] = run
    ds["metadata"]["namespace"] = ns
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {RUN_LABEL: run}}})
    try:
        dry = admin.request("POST", f"/apis/apps/v1/namespaces/{ns}/daemonsets", body=ds, query={"dryRun": "All"})
        assert admin.get("DaemonSet", ds["metadata"]["name"], ns) is None  # a dry run creates nothing
    finally:
        admin.delete("Namespace", ns)
    pod = dry["spec"]["template"]["spec"]
    assert dry["metadata"]["labels"][RUN_LABEL] == run
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert sorted(host.values()) == ["/var/lib/draguard-fake", "/var/lib/kubelet/plugins", "/var/run/cdi"], host
    assert {m["name"] for m in container["volumeMounts"]} == set(host)
    assert all(m.get("readOnly") is True for m in container["volumeMounts"]), container["volumeMounts"]
