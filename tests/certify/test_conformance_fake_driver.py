"""The cluster suite tests itself on the local backend: the correct fake driver passes every check that
applies (only the DeviceTaintRule check may skip, and only when its API is not served), and each mutant
a check is aimed at fails that check for its bug."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from draguard.conformance.cluster import ClusterConfig, cluster_checks, run_conformance
from draguard.harness.result import RunResult

from certify.test_conformance_driver_calls import not_passed

pytestmark = pytest.mark.cluster


def _config(f: Any, **kw: Any) -> ClusterConfig:
    return ClusterConfig(kubeconfig=f.kubeconfig, driver=f.driver, device_class=f.device_class,
                         **({"wait_timeout": 45.0, "reuse_count": 3, "prepare_delay": 6.0} | kw))


def _why(result: RunResult) -> dict[str, tuple[str, str]]:
    return {c.id: (c.status, c.reason) for c in result.checks}


def test_the_correct_fake_driver_passes_every_check(make_fleet: Callable[..., Any]) -> None:
    with make_fleet() as f:
        result = run_conformance(_config(f), f.access())
        leftovers = f.kube.items("Pod", label_selector=None)
    assert [c.id for c in result.checks] == [e.name for e in cluster_checks()]
    assert not not_passed(result.checks), _why(result)  # or skipped for what this fleet does not give
    caps = result.environment["capabilities"]
    assert caps["resourceV1"] and caps["deviceTaintRules"] and sorted(caps["nodes"]) == sorted(f.nodes)
    assert not [p for p in leftovers if p["metadata"]["namespace"].startswith("draguard-conformance-")]


def test_without_node_access_the_node_side_checks_skip_with_the_reason(make_fleet: Callable[..., Any]) -> None:
    with make_fleet(nodes=1) as f:
        result = run_conformance(_config(f, select=("conformance.core.force-delete", "conformance.chaos.*",
                                                    "conformance.gang.*", "conformance.core.claim-lifecycle")))
    got = _why(result)
    assert got["conformance.core.force-delete"][0] == "skipped" and "node access" in got["conformance.core.force-delete"][1]
    assert got["conformance.chaos.driver-restart"][0] == "skipped" and "restart" in got["conformance.chaos.driver-restart"][1]
    assert got["conformance.gang.spread"][0] == "skipped" and "two nodes" in got["conformance.gang.spread"][1]
    assert got["conformance.core.claim-lifecycle"][0] == "passed"  # its API part is checked without node access
    assert got["conformance.chaos.taint-eviction"][0] == "passed"


def _aimed() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in cluster_checks():
        for m in e.meta.get("aimed_at") or ():
            out.setdefault(m, []).append(e.name)
    return out


@pytest.mark.parametrize("mutant", sorted(_aimed()))
def test_each_mutant_fails_the_checks_aimed_at_it(make_fleet: Callable[..., Any], mutant: str) -> None:
    targets = _aimed()[mutant]
    with make_fleet(mutant, nodes=1) as f:
        result = run_conformance(_config(f, select=tuple(targets), wait_timeout=20.0), f.access())
    got = _why(result)
    assert {t: got[t][0] for t in targets} == {t: "failed" for t in targets}, got
