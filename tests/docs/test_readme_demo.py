"""The README's main command: `make demo` (make-commands block) runs ``draguard demo`` once the
binaries are cached; run here as that command, in a folder of its own. The gang deadlock is reproduced
(gang-atomic violated, naming both gangs) and gang scheduling fixes it, and the report's path is printed.
`make test` is the suite itself (tests/docs/test_readme_commands.py checks CI runs it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from readme_blocks import Shell, blocks

pytestmark = pytest.mark.cluster


def test_make_demo_reproduces_the_deadlock_and_shows_the_fix(tmp_path: Path) -> None:
    assert "make demo" in blocks()["make"].lines
    done = Shell(tmp_path, dict(os.environ)).run("draguard demo", timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    report = tmp_path / "draguard-report"
    assert str(report / "report.html") in done.stdout + done.stderr
    assert (report / "report.html").stat().st_size > 0
    verdict = json.loads((report / "verdict.json").read_text())
    scenarios = {s["name"]: s for s in verdict["scenarios"]}
    assert set(scenarios) == {"gang-deadlock-per-pod", "gang-deadlock-gang-scheduling"}
    deadlock = scenarios["gang-deadlock-per-pod"]["invariants"]["gang-atomic"]
    assert deadlock["status"] == "violated"
    named = json.dumps(deadlock["violations"])
    assert "gang-a" in named and "gang-b" in named
    assert scenarios["gang-deadlock-gang-scheduling"]["invariants"]["gang-atomic"]["status"] == "held"
    assert all(s["outcome"] == "met" for s in scenarios.values())
