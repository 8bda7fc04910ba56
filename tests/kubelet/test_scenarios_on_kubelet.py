"""The incident scenarios of the library on hollow DRA kubelets: every node run by upstream's kubelet
code instead of the fake agent, the same expectations met (the correct driver holds them; the mutants
forget-before-reset, silent-health, double-allocation, incomplete-cdi and leave-sharing-state are
still caught; every mutant no incident scenario pins is run in test_mutants_on_kubelet.py). The
differential test compares the two agents call by call.

Incidents only the hardware sees (a container on a failed GPU, a dirty handoff, a container whose
CDI devices did not resolve) reach the device truth through harness/kubelet/feed.py, which turns the
hollow kubelet's container records into the records the fake agent's runtime writes; without it those
scenarios passed a mutant on kubelets. The feed keeps a container on the device truth while it runs,
and the runtime's StopContainer waits until the feed told the truth its stop (before the kubelet can
unprepare): so shared-claim-no-strategy, two pods' containers on one GPU at the same time with no
sharing strategy, is caught on kubelets too (its own expectation: sharing-explicit violated).

A restarted kubelet deletes its node's ResourceSlices until the drivers register again; the claims
allocated from them stay allocated, and topology judges their devices as last published, so the
scenarios that restart a node (node-agent-restart, node-loss-returns, stale-prepare-after-node-restart)
run here as on the fake agent.

legacy-extended-resource-mix is left out: it needs device-plugin extended resources on the Node,
which the fake agent advertises and a hollow kubelet's stub device manager does not."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from differential import on_agent

import draguard.chaos  # noqa: F401  (registers fault kinds)
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
ON_KUBELET = [
    "node-agent-restart", "node-loss-returns", "stale-prepare-after-node-restart", "prepare-failure-retry",
    "interposed-prepare-failure",
    "drain-node-unprepare-failure", "driver-restart-mid-gang", "evict-during-prepare", "force-delete-driver-down",
    "reset-failure-correct-driver", "reset-leak-forget-before-reset", "shared-claim-gang", "preempt-gang-member",
    "mig-partitions-with-full-gpus", "device-taint-nvlink-claim",
    "device-failure-silent-health", "double-allocation-handoff", "incomplete-cdi-spec", "mps-state-left-behind",
    "gang-deadlock-per-pod", "device-failure-correct-driver",
    "unprepare-failure-handoff-correct-driver", "cdi-devices-correct-driver", "mps-shared-claim-correct-driver",
    "crash-during-prepare-force-delete", "evict-before-prepare-succeeded", "driver-crash-before-prepare-reply",
    "slow-reset-does-not-block-prepare", "failing-claim-does-not-strand-batch", "shared-claim-no-strategy",
    "control-plane-restarts", "driver-down-until-cleanup", "driver-restart-under-churn", "gang-deadlock-gang-scheduling",
    "node-reboot-cdi-not-recreated", "node-reboot-correct-driver",
    "checkpoint-corrupt-correct-driver", "checkpoint-corrupt-discarded",
    "gpu-faults-correct-driver", "gpu-faults-silent-health", "gang-shared-claim-podgroup",
    "driver-rolling-update-correct-driver", "driver-rolling-update-ignores-claims",
]  # fmt: skip


@pytest.mark.cluster
@pytest.mark.parametrize("name", ON_KUBELET)
def test_the_scenario_meets_its_expectations_on_hollow_kubelets(name: str) -> None:
    scenario = on_agent(load_scenario(ROOT / "scenarios" / f"{name}.yaml"), "kubelet", interpose=False)
    if name == "driver-restart-under-churn":
        # After the drivers restart, a hollow kubelet retries the stalled prepares only after its
        # back-off (18-27 s here), so the load's users, one operation each, fall behind the rate the
        # fake agent keeps (1.4 of 3 operations/s): the load runs as a best-effort step here, and what
        # it broke is judged as on the fake agent.
        timeline = tuple(dataclasses.replace(s, optional=True) if s.fault == "load" else s for s in scenario.timeline)
        scenario = dataclasses.replace(scenario, timeline=timeline)
    result = Runner(scenario, RunOptions(backend="local")).run()
    problems = [f"{n}: expected {r.expected}, was {r.status}: {[v.message for v in r.violations][:3]}"
                for n, r in result.invariants.items() if not r.met]
    assert result.error is None, result.error
    assert set(result.environment["nodeAgents"].values()) == {"kubelet"}
    assert result.ok, (problems, result.shortfalls)
