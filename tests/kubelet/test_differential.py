"""The differential check: the same scenarios on the fake agent and on hollow DRA kubelets, the
interposer recording the DRA calls the driver saw. The calls (per claim, failures, batching) and
the final verdicts must agree; docs/kubelet-differential.md lists the deliberate differences.

A node restart is compared on its own: a restarted kubelet prepares its running pods' claims again
(its claim cache comes back from the checkpoint marked unprepared: pkg/kubelet/cm/dra/claiminfo.go,
newClaimInfoCache), the fake agent does not (a known difference in docs/kubelet-differential.md); every
other call and the verdicts must agree."""

from __future__ import annotations

from pathlib import Path

import pytest
from differential import call_profile, on_agent, verdict

import draguard.chaos  # noqa: F401  (registers fault kinds)
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
DIFFERENTIAL = ["interposed-prepare-failure", "prepare-failure-retry"]


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


@pytest.mark.cluster
def test_after_a_node_restart_only_the_kubelets_second_prepare_of_running_claims_differs(tmp_path: Path) -> None:
    profiles, verdicts = _runs("node-agent-restart", tmp_path)
    assert verdicts["kubelet"] == verdicts["fake"]
    fake, kubelet = profiles["fake"], profiles["kubelet"]
    assert fake["failures"] == kubelet["failures"]
    again = sorted(c for c, calls in kubelet["successes"].items() if calls[:2] == ["NodePrepareResources"] * 2)
    assert again, f"the restarted kubelet prepared no claim again: {kubelet['successes']}"
    once = {c: calls[1:] if c in again else calls for c, calls in kubelet["successes"].items()}
    assert once == fake["successes"]
    extra = dict(kubelet["batches"])
    for c in again:  # a running pod's claims are prepared again in one call per pod and driver: one claim each here
        extra[("NodePrepareResources", 1)] -= 1
    assert extra == fake["batches"]
