"""The differential check: the same scenarios on the fake agent and on hollow DRA kubelets, the
interposer recording the DRA calls the driver saw. The calls (per claim, failures, batching) and
the final verdicts must agree; docs/kubelet-differential.md lists the deliberate differences."""

from __future__ import annotations

from pathlib import Path

import pytest
from differential import call_profile, on_agent, verdict

import draguard.chaos  # noqa: F401  (registers fault kinds)
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SLICE_WIPE = pytest.mark.xfail(strict=False, reason=(
    "known difference (docs/kubelet-differential.md): a restarted kubelet wipes its node's ResourceSlices until "
    "the driver republishes, which the topology invariant sees when a judging round falls in the gap (most "
    "runs, not all); the fake agent's restart wipes nothing"))
DIFFERENTIAL = ["interposed-prepare-failure", "prepare-failure-retry",
                pytest.param("node-agent-restart", marks=SLICE_WIPE)]


@pytest.mark.cluster
@pytest.mark.parametrize("name", DIFFERENTIAL)
def test_the_driver_sees_the_same_dra_calls_and_the_verdict_is_the_same_on_both_agents(name: str, tmp_path: Path) -> None:
    base = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    profiles, verdicts = {}, {}
    for agent in ("fake", "kubelet"):
        out = tmp_path / agent
        result = Runner(on_agent(base, agent), RunOptions(backend="local", report_dir=out)).run()
        assert result.error is None, f"{agent}: {result.error}"
        assert set(result.environment["nodeAgents"].values()) == {agent}
        profiles[agent], verdicts[agent] = call_profile(out, base.name), verdict(result)
    assert profiles["kubelet"]["successes"], "the interposer recorded no successful call: nothing was compared"
    assert verdicts["kubelet"] == verdicts["fake"]
    assert profiles["kubelet"] == profiles["fake"]
