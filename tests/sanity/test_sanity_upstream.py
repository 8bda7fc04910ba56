"""The sanity suite against a driver written by others: the upstream DRA test driver
(k8s.io/kubernetes/test/e2e/dra/test-driver, built as dra-test-driver beside the control plane).

Every check it fails is a finding written up with its evidence in docs/sanity.md ("Findings on the
upstream test driver"); this test pins that list, so a new failure (a finding or a wrong check) or a
fixed one shows up here."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.conformance.sanity import SanityConfig, run_sanity
from draguard.harness.driver.external import (
    TEST_DRIVER_NAME,
    ExternalPluginProcess,
    delete_published_slices,
    find_test_driver,
)
from draguard.harness.core.errors import HarnessError
from draguard.harness.kube import Kube
from draguard.harness.core.paths import NodeDirs
from support import wait

pytestmark = pytest.mark.cluster

FINDINGS = {
    "sanity.prepare.per-claim-errors": "the kubeletplugin helper fails the whole call when one claim cannot be read",
    "sanity.prepare.foreign-driver": "a claim with no device of this driver is prepared with no devices",
    "sanity.prepare.foreign-node": "a claim allocated on another node is prepared",
    "sanity.prepare.device-in-use": "a device is prepared for a second claim while another holds it",
    "sanity.restart.state-survives": "prepared claims are kept in memory only: unprepare after a restart leaves the CDI spec",
    "sanity.cdi.recreated-on-reprepare": "a repeated prepare answers from memory and writes no CDI spec again",
}
"""Checks the upstream test driver fails, each a finding documented in docs/sanity.md."""


class _Restart:
    def __init__(self, proc: ExternalPluginProcess) -> None:
        self.proc = proc

    def restart(self) -> None:
        self.proc.stop()
        self.proc.start()

    def clear(self) -> None:
        pass


@pytest.fixture
def upstream(draguard_cluster: Any) -> Iterator[ExternalPluginProcess]:
    bin_dir = draguard_cluster.local.bin_dir if draguard_cluster.local is not None else None
    try:
        binary = find_test_driver(bin_dir)
    except HarnessError as exc:
        pytest.skip(str(exc))
    kube: Kube = draguard_cluster.kube()
    node = f"dg-up-{uuid.uuid4().hex[:6]}"
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    root = Path(tempfile.mkdtemp(prefix="dgu", dir="/tmp"))
    proc = ExternalPluginProcess(draguard_cluster.kubeconfig, node, root=root, devices=4, binary=binary)
    try:
        yield proc.start()
    finally:
        proc.stop()
        delete_published_slices(kube, node)
        kube.delete("Node", node)
        shutil.rmtree(root, ignore_errors=True)


def test_the_upstream_test_driver_fails_exactly_the_documented_findings(
    draguard_cluster: Any, upstream: ExternalPluginProcess
) -> None:
    dirs = NodeDirs(upstream.root, upstream.node)
    kube: Kube = draguard_cluster.kube()
    # The driver publishes its slice shortly after it starts serving.
    wait(lambda: kube.items("ResourceSlice") and [
        s for s in kube.items("ResourceSlice") if s["spec"].get("nodeName") == upstream.node
    ], what="the test driver's ResourceSlice")
    config = SanityConfig(
        registration_socket=upstream.registration_socket, kubeconfig=Path(draguard_cluster.kubeconfig),
        driver=TEST_DRIVER_NAME, plugin_socket=upstream.dra_socket, node=upstream.node, cdi_dir=dirs.cdi,
    )
    result = run_sanity(config, _Restart(upstream))
    report = {c.id: (c.status, c.reason) for c in result.checks}
    failed = {i for i, (s, _) in report.items() if s in ("failed", "error")}
    assert failed == set(FINDINGS), ({i: report[i] for i in failed ^ set(FINDINGS)}, upstream.log_tail(40))
    passed = {i for i, (s, _) in report.items() if s == "passed"}
    assert "sanity.unprepare.unknown-claim" in passed and "sanity.prepare.idempotent" in passed
    docs = (Path(__file__).resolve().parents[2] / "docs" / "sanity.md").read_text()
    assert all(f"`{i}`" in docs for i in FINDINGS), "every finding is written up in docs/sanity.md"
