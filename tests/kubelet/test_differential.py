"""The differential check: the same scenarios on the fake agent and on hollow DRA kubelets, the
interposer recording the DRA calls the driver saw. The calls (per claim, failures, batching) and
the final verdicts must agree; docs/kubelet-differential.md lists the deliberate differences."""

from __future__ import annotations

from pathlib import Path

import pytest
from differential import call_profile, on_agent, verdict

import draguard.chaos  # noqa: F401  (registers fault kinds)
from draguard import reports
from draguard.harness.result import RunResult
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
DIFFERENTIAL = ["interposed-prepare-failure", "prepare-failure-retry", "node-agent-restart"]
RESTARTS = {"node-agent-restart": 2}
"""Scenarios that restart the nodes, with how many pods run when they do. After a restart both agents
prepare their running pods' claims once more (pkg/kubelet/cm/dra/claiminfo.go: prepared is not
checkpointed); which claims those are depends on which pods ran at that moment (the step fires when 2
of 4 do; a third may already be prepared too), so that second prepare is counted apart: at least one
per running pod on each agent, at most one per claim, and the rest must agree call for call."""


def _second_prepares(profile: dict) -> tuple[dict, int]:  # type: ignore[type-arg]
    """The profile with each claim's repeated prepare (a restart's) taken out, and how many there were."""
    successes, again = {}, 0
    for claim, calls in profile["successes"].items():
        kept = [m for i, m in enumerate(calls) if not (i and m == calls[i - 1] == "NodePrepareResources")]
        assert len(calls) - len(kept) <= 1, f"{claim} was prepared more than twice in a row: {calls}"
        again += len(calls) - len(kept)
        successes[claim] = kept
    batches = dict(profile["batches"])
    batches[("NodePrepareResources", 1)] = batches.get(("NodePrepareResources", 1), 0) - again  # one claim per pod
    return {**profile, "successes": successes, "batches": batches}, again


@pytest.mark.cluster
@pytest.mark.parametrize("name", DIFFERENTIAL)
def test_the_driver_sees_the_same_dra_calls_and_the_verdict_is_the_same_on_both_agents(name: str, tmp_path: Path) -> None:
    profiles, verdicts = _runs(name, tmp_path)
    assert profiles["kubelet"]["successes"], "the interposer recorded no successful call: nothing was compared"
    assert verdicts["kubelet"] == verdicts["fake"]
    if name in RESTARTS:
        for agent in ("fake", "kubelet"):
            profiles[agent], again = _second_prepares(profiles[agent])
            assert again >= RESTARTS[name], f"{agent}: {again} claim(s) prepared again after the restart"
    assert profiles["kubelet"] == profiles["fake"]


def _runs(name: str, tmp_path: Path) -> tuple[dict[str, dict], dict[str, dict]]:  # type: ignore[type-arg]
    base = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    profiles, verdicts = {}, {}
    for agent in ("fake", "kubelet"):
        out = tmp_path / agent
        result = Runner(on_agent(base, agent), RunOptions(backend="local")).run()
        assert result.error is None, f"{agent}: {result.error}"
        assert set(result.environment["nodeAgents"].values()) == {agent}
        reports.render(RunResult(agent, [result]), out, [])  # places what the run recorded: grpc-calls.jsonl
        profiles[agent], verdicts[agent] = call_profile(out, base.name), verdict(result)
    return profiles, verdicts

