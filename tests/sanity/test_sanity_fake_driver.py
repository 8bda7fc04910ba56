"""The sanity suite tests itself against the fake driver on a real control plane: the correct driver
passes every check, each mutant fails every check aimed at its bug (a mutant no check is aimed at is
one the scenarios' kill matrix catches), and docs/sanity-matrix.md is exactly the table these runs
produce (DRAGUARD_REGEN=1 rewrites it)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.conformance.sanity.matrix import CORRECT, aimed, modes, render, run_matrix
from draguard.harness.driver.mutants import MUTANTS
from draguard.harness.result import RunResult

from .conftest import cluster_node

pytestmark = pytest.mark.cluster

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sanity-matrix.md"
KILL_MATRIX = DOCS.with_name("kill-matrix.md")


@pytest.fixture(scope="module")
def node(draguard_cluster: Any) -> Iterator[str]:
    with cluster_node(draguard_cluster, "dg-san") as name:
        yield name


@pytest.fixture(scope="module")
def matrix(draguard_cluster: Any, node: str) -> dict[str, RunResult]:
    return run_matrix(draguard_cluster.kubeconfig, node)


def _statuses(result: RunResult) -> dict[str, str]:
    return {c.id: c.status for c in result.checks}


def test_the_correct_fake_driver_passes_every_check(matrix: dict[str, RunResult]) -> None:
    result = matrix[CORRECT]
    bad = {c.id: (c.status, c.reason) for c in result.checks if c.status != "passed"}
    # Only a hook this fake driver lacks may skip (slow_release needs the reset_slow fault), and the
    # counters check: the matrix's generic topology has no partitionable device (test_sanity_counters.py).
    assert all(s == "skipped" and ("hook" in r or "consumes counters" in r) for s, r in bad.values()), bad


def test_every_mutant_is_aimed_at_by_a_sanity_check_or_caught_by_a_scenario() -> None:
    """A mutant whose bug is outside what the contract suite can provoke is caught by the scenario
    library instead: the kill matrix (docs/kill-matrix.md) has its row."""
    kill_matrix = KILL_MATRIX.read_text()
    outside = [m for m, targets in aimed().items() if not targets]
    assert [m for m in outside if f"| `{m}` |" not in kill_matrix] == [], outside
    assert len(outside) < len(MUTANTS)


@pytest.mark.parametrize("mutant", sorted(m for m, targets in aimed().items() if targets))
def test_each_mutant_fails_every_check_aimed_at_its_bug(matrix: dict[str, RunResult], mutant: str) -> None:
    targets = aimed()[mutant]
    statuses = _statuses(matrix[mutant])
    assert {t: statuses[t] for t in targets} == {t: "failed" for t in targets}, [
        (c.id, c.reason) for c in matrix[mutant].checks if c.id in targets
    ]
    errors = {c.id: c.reason for c in matrix[mutant].checks if c.status == "error"}
    assert not errors, errors


def test_the_matrix_in_the_docs_is_what_the_suite_does(matrix: dict[str, RunResult]) -> None:
    assert list(matrix) == modes()
    page = render(matrix)
    if os.environ.get("DRAGUARD_REGEN") == "1":
        DOCS.write_text(page)
    current = DOCS.read_text() if DOCS.exists() else ""
    diff = "".join(difflib.unified_diff(current.splitlines(True), page.splitlines(True), str(DOCS), "generated"))
    assert current == page, f"docs/sanity-matrix.md is stale (DRAGUARD_REGEN=1 rewrites it):\n{diff}"


@pytest.mark.parametrize(("mutant", "code"), [(None, 0), ("incomplete-cdi", 1)])
def test_the_cli_exits_0_on_the_correct_driver_and_1_on_a_mutant_and_writes_the_verdict(
    draguard_cluster: Any, node: str, mutant: str | None, code: int, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json
    import shutil
    import tempfile

    from draguard.cli.main import main
    from draguard.harness.driver.process import FakeDriverProcess
    from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

    root = Path(tempfile.mkdtemp(prefix="dgc", dir="/tmp"))
    proc = FakeDriverProcess(draguard_cluster.kubeconfig, node, root=root, devices=4, mutant=mutant, reset_ms=1)
    try:
        proc.start()
        dirs = NodeDirs(root, node)
        got = main(["sanity", "--registration-socket", str(dirs.registration_socket(DEFAULT_DRIVER)),
                    "--kubeconfig", str(draguard_cluster.kubeconfig), "--driver", DEFAULT_DRIVER, "--node", node,
                    "--cdi-dir", str(dirs.cdi), "--check", "sanity.cdi.*", "--check", "sanity.registration.*",
                    "--out", str(tmp_path)])
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)
    out = capsys.readouterr().out
    assert got == code, out
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    statuses = {c["id"]: c["status"] for c in verdict["checks"]}
    assert statuses["sanity.cdi.ids-resolve"] == ("passed" if mutant is None else "failed")
    assert verdict["environment"]["trace"] and (tmp_path / "grpc-calls.jsonl").read_text()
