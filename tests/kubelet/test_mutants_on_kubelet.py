"""Every mutant no incident scenario pins is caught on hollow DRA kubelets by the library scenario that
catches it on the fake agent (docs/kill-matrix.json), for the same reason: a detector the fake agent's
run named. The incident scenarios themselves run on kubelets in test_scenarios_on_kubelet.py (kept
apart so that the two long files run on different test workers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from differential import on_agent

import draguard.chaos  # noqa: F401  (registers fault kinds)
from draguard.harness.campaign.kill_matrix import run_cell
from draguard.harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
KILL_MATRIX = ROOT / "docs" / "kill-matrix.json"

MUTANT_CELLS = [
    # (scenario, mutant): the library's catches of the mutants no incident scenario pins (the others run
    # with their pinned mutant in test_scenarios_on_kubelet.py), the same cells as docs/kill-matrix.md's on the fake agent.
    ("crash-during-prepare-force-delete", "prepare-started-leak"),
    ("crash-during-prepare-force-delete", "unprepare-needs-claim"),
    ("evict-before-prepare-succeeded", "unknown-unprepare-error"),
    ("driver-crash-before-prepare-reply", "non-idempotent-prepare"),
    ("slow-reset-does-not-block-prepare", "lock-across-reset"),
    ("stale-prepare-after-node-restart", "stale-prepare"),
    ("gpu-faults-correct-driver", "xid-overreaction"),
    # A kubelet orders a pod's claims by Go map iteration: the healthy claim comes first in some runs,
    # its device is released before the failing one aborts the call, and the progress the scenario
    # expects comes anyway (docs/kubelet-differential.md). per-claim-errors judges the call itself.
    ("failing-claim-does-not-strand-batch", "batch-abort-on-error"),
]


@pytest.mark.cluster
@pytest.mark.parametrize("name,mutant", MUTANT_CELLS)
def test_the_mutant_is_caught_on_hollow_kubelets_as_on_the_fake_agent(name: str, mutant: str) -> None:
    recorded = {(c["scenario"], c["mutant"]): c for c in json.loads(KILL_MATRIX.read_text())["cells"]}
    on_fake_agent = recorded[(name, mutant)]
    assert on_fake_agent["verdict"] == "caught"
    cell = run_cell(on_agent(load_scenario(ROOT / "scenarios" / f"{name}.yaml"), "kubelet", interpose=False), mutant)
    assert cell.verdict == "caught", (cell.verdict, cell.error)
    # caught for the same reason: a detector the fake agent's run named
    assert set(cell.detectors) & set(on_fake_agent["detectors"]), (cell.detectors, on_fake_agent["detectors"])
