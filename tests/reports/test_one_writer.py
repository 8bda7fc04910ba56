"""Only ``draguard.reports`` writes into a report directory: a run records its evidence (the gRPC
interposer's calls, each fake node's device truth, a load step's files) into its own folder under the
state directory, the result lists it, and rendering places it at ``<report-dir>/<scenario>/``; no run
leaves its folder behind, and a record no render took is pruned once old."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import draguard.chaos  # noqa: F401  (registers the load step)
from draguard import reports
from draguard.harness.result import RunRecord, RunResult, ScenarioResult
from draguard.harness.runner.cleanup import RECORDS_KEPT_FOR, prune_records
from draguard.harness.runner.journal import journal_dir
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import parse_scenario

SCENARIO = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {name: one-writer}
spec:
  driver: {interpose: true}
  nodes: [{name: n0, topology: {gpus: 2}}]
  deviceClasses: [{name: gpu.draguard.dev}]
  workloads: [{name: w, replicas: 1, claims: [{name: c, requests: [{name: r, deviceClassName: gpu.draguard.dev}]}]}]
  timeline:
    - name: churn
      at: 0s
      fault: load
      optional: true
      params: {rate: 1, duration: 2s, kinds: [template], opTimeout: 30s}
"""


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "draguard"


@pytest.mark.cluster
def test_a_run_writes_into_its_record_only_and_the_render_places_it_in_the_report(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "cwd"  # where the runner's default report folder (draguard-report/) used to go
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    runner = Runner(parse_scenario(SCENARIO, "one-writer.yaml"), RunOptions(backend="local"))
    result = runner.run()
    assert result.error is None, result.error
    assert not list(cwd.iterdir()), "the run wrote outside its state folder"
    record = result.record
    assert record is not None
    assert record.root == state / "runs" / runner.run_id / "record"
    recorded = {f.name: f for f in record.existing()}
    assert set(recorded) == {"grpc-calls.jsonl", "devices/n0.json", "load-churn"}, recorded
    assert all(f.path.is_relative_to(record.root) and f.about for f in recorded.values())
    [step] = result.steps
    assert step.load is not None and step.load.files == "one-writer/load-churn"
    # Beside the record, nothing of the run is left in its folder (nodes, timeline spool).
    assert [p.name for p in (state / "runs" / runner.run_id).iterdir()] == ["record"]

    report = tmp_path / "report"
    written = reports.render(RunResult(runner.run_id, [result]), report, ["json"])
    assert {f for f, _ in written} == {"json"}
    scenario = report / "one-writer"
    calls = [json.loads(line) for line in (scenario / "grpc-calls.jsonl").read_text().splitlines()]
    assert any(c.get("method") == "NodePrepareResources" for c in calls), calls[:3]
    assert json.loads((scenario / "devices" / "n0.json").read_text())
    assert (report / step.load.files / "summary.json").is_file()  # the link the reports print resolves
    assert result.record is None
    assert not (state / "runs").exists() or not list((state / "runs").iterdir()), "a run folder was left behind"


def test_placing_moves_every_file_the_run_wrote_and_removes_the_run_folder(tmp_path: Path) -> None:
    run = tmp_path / "state" / "runs" / "abc"
    record = RunRecord(run / "record")
    record.path("grpc-calls.jsonl", "calls").write_text("{}\n")
    folder = record.path("load-churn", "a load's files")
    folder.mkdir()
    (folder / "summary.json").write_text("{}")
    record.path("devices/n0.json", "truth").write_text("{}")
    record.path("never-written.txt", "listed, not written")
    with pytest.raises(ValueError):
        record.path("../outside", "escapes the record")
    out = tmp_path / "report"
    (out / "s" / "load-churn").mkdir(parents=True)
    (out / "s" / "load-churn" / "stale.csv").write_text("from an earlier render")
    result = RunResult("abc", [ScenarioResult("s", None, 0, record=record)])
    reports.render(result, out, [])  # no file format: the record is placed all the same
    assert (out / "s" / "grpc-calls.jsonl").read_text() == "{}\n"
    assert sorted(p.name for p in (out / "s" / "load-churn").iterdir()) == ["summary.json"]
    assert (out / "s" / "devices" / "n0.json").is_file()
    assert not (out / "s" / "never-written.txt").exists()
    assert not run.exists() and result.scenarios[0].record is None
    assert sorted(p.name for p in (out / "s").iterdir()) == ["devices", "grpc-calls.jsonl", "load-churn"]


def test_records_no_render_took_are_pruned_once_old_unless_their_run_has_a_journal(state: Path) -> None:
    def run_folder(run_id: str, age: float, *extra: str) -> Path:
        folder = state / "runs" / run_id
        for name in ("record/grpc-calls.jsonl", *extra):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text("x")
        then = time.time() - age
        os.utime(folder, (then, then))
        return folder

    old = run_folder("old", RECORDS_KEPT_FOR + 60)
    fresh = run_folder("fresh", 60)
    crashed = run_folder("crashed", RECORDS_KEPT_FOR + 60)
    journal_dir().mkdir(parents=True, exist_ok=True)
    (journal_dir() / "crashed.jsonl").write_text("{}\n")
    kept_logs = run_folder("kept-logs", RECORDS_KEPT_FOR + 60, "nodes/n0/log")
    empty = state / "runs" / "empty"
    empty.mkdir()
    os.utime(empty, (time.time() - RECORDS_KEPT_FOR - 60,) * 2)
    prune_records()
    assert not old.exists() and not empty.exists()
    assert (fresh / "record").is_dir() and (crashed / "record").is_dir()  # waiting for a render, for cleanup
    assert not (kept_logs / "record").exists() and (kept_logs / "nodes" / "n0" / "log").is_file()
