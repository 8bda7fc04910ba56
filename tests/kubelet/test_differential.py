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
DIFFERENTIAL = ["interposed-prepare-failure", "prepare-failure-retry", "node-agent-restart"]


@pytest.mark.cluster
@pytest.mark.parametrize("name", DIFFERENTIAL)
def test_the_driver_sees_the_same_dra_calls_and_the_verdict_is_the_same_on_both_agents(name: str, tmp_path: Path) -> None:
    profiles, verdicts = _runs(name, tmp_path)
    assert profiles["kubelet"]["successes"], "the interposer recorded no successful call: nothing was compared"
    assert verdicts["kubelet"] == verdicts["fake"]
    assert profiles["kubelet"] == profiles["fake"]

def _runs(name: str, tmp_path: Path) -> tuple[dict[str, dict], dict[str, dict]]:  # type: ignore[type-arg]
    base = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    profiles, verdicts = {}, {}
    for agent in ("fake", "kubelet"):
        out = tmp_path / agent
        result = Runner(on_agent(base, agent), RunOptions(backend="local", report_dir=out)).run()
        assert result.error is None, f"{agent}: {result.error}"
        assert set(result.environment["nodeAgents"].values()) == {agent}
        profiles[agent], verdicts[agent] = call_profile(out, base.name), verdict(result)
    return profiles, verdicts

