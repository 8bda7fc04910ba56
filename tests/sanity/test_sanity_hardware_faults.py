"""sanity.health.reports-unhealthy against draguard's fake driver, whose hardware the suite can fail:
each kind of failure NVML reports (fallen off the bus, an uncorrectable ECC error, a critical Xid) must
be streamed UNHEALTHY and, once repaired, HEALTHY again; an application's Xid must not be reported.
The correct driver passes; silent-health fails at the first kind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.conformance.sanity import SanityConfig, run_sanity
from draguard.conformance.sanity.hooks import FakeDriverHooks
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs
from draguard.harness.devices.truth import DeviceTruth

from .conftest import cluster_node, fake_driver_node

pytestmark = pytest.mark.cluster

CHECK = "sanity.health.reports-unhealthy"


@pytest.fixture(scope="module")
def node(draguard_cluster: Any) -> Iterator[str]:
    with cluster_node(draguard_cluster, "dg-hw") as name:
        yield name


def _run(cluster: Any, node: str, mutant: str | None) -> tuple[str, str, Path, list[str]]:
    kubeconfig = Path(cluster.kubeconfig)
    with fake_driver_node(cluster, "", node=node, mutant=mutant, health_interval=0.2) as (proc, root, _):
        dirs = NodeDirs(root, node)
        config = SanityConfig(registration_socket=dirs.registration_socket(DEFAULT_DRIVER), kubeconfig=kubeconfig,
                              driver=DEFAULT_DRIVER, plugin_socket=dirs.dra_socket(DEFAULT_DRIVER), node=node,
                              cdi_dir=dirs.cdi, call_timeout=10.0, select=(CHECK,))
        result = run_sanity(config, FakeDriverHooks(root, node, process=proc))
        [check] = [c for c in result.checks if c.id == CHECK]
        truth = DeviceTruth(root, node).read().devices
        broken = sorted(n for n, d in truth.items() if d.health != "healthy" or d.xids or d.lost)
        return check.status, check.reason, root, broken


def test_the_correct_driver_reports_each_hardware_fault_and_its_repair(draguard_cluster: Any, node: str) -> None:
    status, reason, _, broken = _run(draguard_cluster, node, None)
    assert status == "passed", reason
    assert broken == [], "the check repairs the hardware it failed"


def test_a_blind_health_check_fails_at_the_first_fault(draguard_cluster: Any, node: str) -> None:
    status, reason, _, broken = _run(draguard_cluster, node, "silent-health")
    assert status == "failed", reason
    assert "raised fallen-off-bus, but" in reason and "never said UNHEALTHY" in reason
    assert broken == []
