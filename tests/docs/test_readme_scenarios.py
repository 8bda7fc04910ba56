"""The README's scenario, mutants and bench commands (the scenario-commands, mutants-commands and
bench-commands blocks), run as written, in order, in a folder of their own that sees the repository's
scenarios/. Between the run and the diff, the run's report is copied as "last night's"; the state
folder (run journals) is the test's own, so `draguard cleanup` sees only what these commands left."""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from readme_blocks import REPO, Shell, blocks


def _shell(tmp_path: Path) -> Shell:
    (tmp_path / "scenarios").symlink_to(REPO / "scenarios")
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    return Shell(tmp_path, env)


@pytest.mark.cluster
def test_the_scenario_commands_validate_run_report_compare_and_clean_up(tmp_path: Path) -> None:
    shell = _shell(tmp_path)
    lines = blocks()["scenario"].lines
    assert [line.split()[1] for line in lines] == ["validate", "schema", "run", "report", "diff", "history", "cleanup"]
    for line in lines:
        if line.startswith("draguard diff"):
            shutil.copytree(tmp_path / "out", tmp_path / "last-night")  # an earlier run of the same scenario
        done = shell.run(line, timeout=300)
        assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        if line.startswith("draguard validate"):
            assert done.stdout.count("ok ") >= 35 and "gang-deadlock-per-pod.yaml" in done.stdout
        elif line.startswith("draguard schema"):
            schema = json.loads((tmp_path / "scenario.schema.json").read_text())
            assert "spec" in json.dumps(schema["properties"])
        elif line.startswith("draguard run"):
            verdict = json.loads((tmp_path / "out" / "verdict.json").read_text())
            (scenario,) = verdict["scenarios"]
            assert scenario["outcome"] == "met" and scenario["invariants"]["gang-atomic"]["status"] == "violated"
            assert (tmp_path / "out" / "gang-deadlock-per-pod" / "timeline.json").is_file()
            assert (tmp_path / "out" / "report.html").stat().st_size > 0
        elif line.startswith("draguard report"):
            suite = ET.parse(tmp_path / "out" / "junit.xml").getroot()
            assert "gang-atomic" in ET.tostring(suite, encoding="unicode")
        elif line.startswith("draguard diff"):
            assert "new failures" not in done.stdout + done.stderr  # the same run twice: nothing new failed
        elif line.startswith("draguard history"):
            assert "gang-deadlock-per-pod" in (tmp_path / "history.html").read_text()


@pytest.mark.cluster
def test_the_mutants_command_catches_the_mutant_the_correct_driver_passes(tmp_path: Path) -> None:
    shell = _shell(tmp_path)
    (line,) = blocks()["mutants"].lines
    done = shell.run(line, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    matrix = json.loads((tmp_path / "mutants" / "kill-matrix.json").read_text())
    assert "forget-before-reset" in json.dumps(matrix) and (tmp_path / "mutants" / "kill-matrix.md").is_file()


def test_the_bench_commands_measure_then_render_the_page(tmp_path: Path) -> None:
    shell = _shell(tmp_path)
    lines = blocks()["bench"].lines
    assert lines[-1] == "draguard bench --doc docs/benchmarks.md"
    for line in lines:
        done = shell.run(line, timeout=300)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    results = sorted(p.name for p in (tmp_path / "benchmarks" / "results").glob("*.json"))
    assert results == ["scenario-load.json", "watch-decode.json"]
    page = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "draguard bench scenario-load --repeat 3" in page and "draguard bench watch-decode --repeat 3" in page
