"""The incident scenarios of the library on hollow DRA kubelets: every node run by upstream's kubelet
code instead of the fake agent, the same expectations met (the correct driver holds them, the
forget-before-reset mutant is still caught). The differential test compares the two agents call by call.

legacy-extended-resource-mix is left out: it needs device-plugin extended resources on the Node,
which the fake agent advertises and a hollow kubelet's stub device manager does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from differential import on_agent

import draguard.chaos  # noqa: F401  (registers fault kinds)
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SLICE_WIPE = pytest.mark.xfail(strict=False, reason=(
    "a restarted kubelet wipes its node's ResourceSlices until the driver republishes (within 2 s), and the "
    "continuous topology invariant sees the gap when a judging round falls in it: most runs, not all "
    "(docs/kubelet-differential.md)"))
ON_KUBELET = [
    pytest.param("node-agent-restart", marks=SLICE_WIPE), pytest.param("node-loss-returns", marks=SLICE_WIPE), "prepare-failure-retry", "interposed-prepare-failure",
    "drain-node-unprepare-failure", "driver-restart-mid-gang", "evict-during-prepare", "force-delete-driver-down",
    "reset-failure-correct-driver", "reset-leak-forget-before-reset", "shared-claim-gang", "preempt-gang-member",
    "mig-partitions-with-full-gpus", "device-taint-nvlink-claim",
]  # fmt: skip


@pytest.mark.cluster
@pytest.mark.parametrize("name", ON_KUBELET)
def test_the_scenario_meets_its_expectations_on_hollow_kubelets(name: str, tmp_path: Path) -> None:
    scenario = on_agent(load_scenario(ROOT / "scenarios" / f"{name}.yaml"), "kubelet", interpose=False)
    result = Runner(scenario, RunOptions(backend="local", report_dir=tmp_path)).run()
    problems = [f"{n}: expected {r.expected}, was {r.status}: {[v.message for v in r.violations][:3]}"
                for n, r in result.invariants.items() if not r.met]
    assert result.error is None, result.error
    assert set(result.environment["nodeAgents"].values()) == {"kubelet"}
    assert result.ok, problems
