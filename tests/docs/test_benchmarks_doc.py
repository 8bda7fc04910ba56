"""docs/benchmarks.md is exactly what ``draguard bench --doc`` renders from the committed result files,
so it cannot go stale, and every result file says when, where and with which command it was measured."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import click
import pytest

from draguard.cli.bench import command as bench_command
from draguard.cli.main import main
from draguard.harness.bench.suite import BENCHMARKS, command_line, run_benchmarks
from draguard.reports.benchmarks import FIGURES, WHAT, load_results, render_benchmarks

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
DOC = REPO / "docs" / "benchmarks.md"


def test_the_committed_page_is_what_the_committed_results_render() -> None:
    assert DOC.read_text() == render_benchmarks(RESULTS, DOC), (
        "docs/benchmarks.md is stale: run `draguard bench --doc docs/benchmarks.md`")


def test_draguard_bench_doc_writes_that_page_and_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    shutil.copytree(RESULTS, tmp_path / "benchmarks" / "results")
    before = {p.name: p.read_bytes() for p in (tmp_path / "benchmarks" / "results").iterdir()}
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--doc", "docs/benchmarks.md"]) == 0
    assert (tmp_path / "docs" / "benchmarks.md").read_text() == DOC.read_text()
    assert capsys.readouterr().out.strip() == str(tmp_path / "docs" / "benchmarks.md")
    assert {p.name: p.read_bytes() for p in (tmp_path / "benchmarks" / "results").iterdir()} == before


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.json")), ids=lambda p: p.name)
def test_every_result_file_has_its_date_machine_and_a_command_that_parses(path: Path) -> None:
    result = json.loads(path.read_text())
    assert result["benchmark"] in BENCHMARKS
    assert result["date"].endswith("Z") and result["machine"]["cpus"] >= 1 and result["machine"]["platform"]
    words = shlex.split(result["command"])
    assert words[:2] == ["draguard", "bench"] and result["benchmark"] in words[2:]
    bench_command.make_context("bench", words[2:])  # a flag the CLI does not know would raise here
    assert f"--repeat {result['repeat']}" in result["command"]


def test_every_benchmark_has_its_section_with_the_file_the_date_and_the_command() -> None:
    text = DOC.read_text()
    for path, result in load_results(RESULTS):
        assert f"[`{path.name}`](../benchmarks/results/{path.name})" in text
        assert result["date"].replace("T", " ").replace("Z", " UTC") in text
        assert f"```sh\n{result['command']}\n```" in text
    assert set(WHAT) == set(BENCHMARKS), "a benchmark without its one line for the page"
    assert set(FIGURES) == set(BENCHMARKS), "a benchmark without its table of figures for the page"


def test_a_file_that_is_not_a_result_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text('{"median": 1}')
    with pytest.raises(ValueError, match="notes.json"):
        render_benchmarks(tmp_path, tmp_path / "benchmarks.md")


def test_a_new_result_records_the_command_that_reproduces_it(tmp_path: Path) -> None:
    result = run_benchmarks(["scenario-load"], 1, tmp_path, lambda m: None)["scenario-load"]
    assert result["command"] == "draguard bench scenario-load --repeat 1"
    assert json.loads((tmp_path / "scenario-load.json").read_text())["command"] == result["command"]
    assert "scenario-load" in render_benchmarks(tmp_path, tmp_path / "benchmarks.md")


def test_the_command_names_each_size_the_benchmark_took() -> None:
    assert command_line("churn", 3, {"nodes": 20, "rate": 5.0, "duration": 60.0}) == (
        "draguard bench churn --repeat 3 --nodes 20 --rate 5 --duration 60")
    assert command_line("fake-nodes", 1, {"count": 3, "duration": 2.5}) == (
        "draguard bench fake-nodes --repeat 1 --nodes 3 --duration 2.5")
    assert command_line("dra-throughput", 2, {"nodes": 5, "scheduler_perf": False}) == (
        "draguard bench dra-throughput --repeat 2 --nodes 5 --no-scheduler-perf")
    with pytest.raises(click.UsageError):
        bench_command.make_context("bench", ["churn", "--bogus", "1"])
