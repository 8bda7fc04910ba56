"""The cluster suite against a driver written by others: the upstream DRA test driver
(k8s.io/kubernetes/test/e2e/dra/test-driver, built as dra-test-driver beside the control plane),
on fake nodes whose agent runs the pods and calls the driver's sockets as the kubelet does.

It gets no fake-driver node access (its node-side checks skip with the reason), a restart hook
that restarts its process, no CDI folder and no interposer (the driver-call judgements are not
applicable, with the reason; tests/certify/test_conformance_driver_calls.py runs it behind one). Every check it fails is a finding written up in docs/conformance.md;
this test pins that list, so a new failure (a finding or a wrong check) or a fixed one shows up."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.conformance.cluster import ClusterConfig, run_conformance
from draguard.harness.driver.external import TEST_DRIVER_NAME, ExternalPluginProcess, find_test_driver
from draguard.harness.core.errors import HarnessError
from support import upstream_on_fake_nodes, wait

pytestmark = pytest.mark.cluster

FINDINGS: dict[str, str] = {}
"""Cluster checks the upstream test driver fails, each a finding documented in docs/conformance.md."""


class _Restart:
    """Restart hook: stop and start the upstream driver's process on its node."""

    def __init__(self, procs: dict[str, ExternalPluginProcess]) -> None:
        self.procs = procs

    def restart(self, node: str) -> None:
        self.procs[node].stop()
        self.procs[node].start()


@pytest.fixture
def upstream(draguard_cluster: Any) -> Iterator[tuple[dict[str, ExternalPluginProcess], str]]:
    bin_dir = draguard_cluster.local.bin_dir if draguard_cluster.local is not None else None
    try:
        binary = find_test_driver(bin_dir)
    except HarnessError as exc:
        pytest.skip(str(exc))
    with upstream_on_fake_nodes(draguard_cluster, "dgu", binary) as up:
        yield up.procs, up.device_class


def test_the_upstream_test_driver_through_the_cluster_suite(
    draguard_cluster: Any, upstream: tuple[dict[str, ExternalPluginProcess], str]
) -> None:
    procs, cls = upstream
    config = ClusterConfig(kubeconfig=Path(draguard_cluster.kubeconfig), driver=TEST_DRIVER_NAME, device_class=cls,
                           wait_timeout=45.0)
    result = run_conformance(config, _Restart(procs))
    got = {c.id: (c.status, c.reason) for c in result.checks}
    print("\n".join(f"{k}: {v}" for k, v in got.items()))
    failed = {k for k, (s, _) in got.items() if s in ("failed", "error")}
    assert failed == set(FINDINGS), got
    assert got["conformance.core.template-claim"][0] == "passed"
    assert got["conformance.core.force-delete"][0] == "skipped" and "node access" in got["conformance.core.force-delete"][1]
    assert got["conformance.core.concurrent-prepare"][0] == "passed"
    # No interposer in front of it here: the driver-call judgements say so, never pass.
    calls = {k: v for k, v in got.items() if k.startswith("conformance.driver-calls.")}
    assert len(calls) == 5 and all(s == "not-applicable" and "no gRPC interposer" in r for s, r in calls.values()), calls
    assert got["conformance.chaos.restart-cleanup"][0] == "skipped" and "CDI folder" in got["conformance.chaos.restart-cleanup"][1]
    assert got["conformance.core.claim-error-isolated"][0] == "skipped" and "interposer" in got["conformance.core.claim-error-isolated"][1]


def test_certify_with_the_ai_conformance_programme_against_the_upstream_driver(
    draguard_cluster: Any, upstream: tuple[dict[str, ExternalPluginProcess], str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The bundle of a driver written by others verifies (manifest, verdict, the verify-conformance bot's
    checks, the programme's), and its dra_support evidence links resolve to passing testcases."""
    from ruamel.yaml import YAML

    from draguard.cli.main import main
    from draguard.conformance.programmes import BundleView
    from draguard.conformance.programmes.ai_conformance import FRAGMENT, REQUIREMENTS

    _, cls = upstream
    product = tmp_path / "product.yaml"
    product.write_text("vendor: Kubernetes\nname: DRA test driver\nversion: v1.37.2\ntype: DRA driver\n"
                       "description: the DRA test driver of the Kubernetes e2e tests\n"
                       "website_url: https://github.com/kubernetes/kubernetes\n"
                       "documentation_url: https://github.com/kubernetes/kubernetes/tree/master/test/e2e/dra\n"
                       "contact_email_address: dra@example.com\ndriver_version: v1.37.2\n")
    out = tmp_path / "bundle"
    code = main(["certify", "--kubeconfig", str(draguard_cluster.kubeconfig), "--driver", TEST_DRIVER_NAME,
                 "--device-class", cls, "--product", str(product), "--out", str(out), "--wait-timeout", "45",
                 "--programme", "ai-conformance"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert main(["certify", "--verify", str(tmp_path / "bundle.tar.gz")]) == 0, capsys.readouterr().out
    data = YAML(typ="safe").load((out / FRAGMENT).read_text())
    entries = {e["id"]: e for e in data.get("outsideChecklist") or ()}
    entries.update({e["id"]: e for items in data["spec"].values() for e in items})
    dra = entries["dra_support"]
    cases = BundleView(out).cases or {}
    req = next(r for r in REQUIREMENTS if r.id == "dra_support")
    unseen = [cid for cid in req.checks if cid not in cases or cases[cid].status != "passed"]
    if unseen:  # a check skipped here (no device attributes: match-attribute) leaves that part unseen
        assert dra["status"] == "Partially Implemented" and all(cid in dra["notes"] for cid in unseen), dra
    else:
        assert dra["status"] == "Implemented", dra
    linked = [link.rsplit("#", 1)[1] for link in dra["evidence"] if "#" in link]
    assert "conformance.core.template-claim" in linked
    for link in dra["evidence"]:
        path, _, case = re.sub(r"^file://v\d+\.\d+/[^/]+/", "", link).partition("#")
        assert (out / path).is_file(), link
        assert not case or cases[case].status == "passed", link
