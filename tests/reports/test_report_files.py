"""Reports written and read back: the json round trip, `draguard report`, and bad report directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from draguard import reports
from draguard.cli.main import main
from draguard.harness.result import SCHEMA_VERSION, ResultFormatError
from report_samples import broken_result, deadlock_result


def test_json_round_trip_keeps_every_case_and_the_timeline(tmp_path: Path) -> None:
    result = broken_result()
    written = dict((p.name, p) for _, p in reports.render(result, tmp_path, ["json"]))
    assert set(written) == {"verdict.json", "timeline.json"}
    back = reports.load_report(tmp_path)
    assert back.as_dict() == result.as_dict()
    assert back.scenarios[0].timeline_file == "gang-deadlock-per-pod/timeline.json"
    assert back.scenarios[0].timeline is not None and result.scenarios[0].timeline is not None
    assert list(back.scenarios[0].timeline.events()) == list(result.scenarios[0].timeline.events())
    assert json.loads((tmp_path / "verdict.json").read_text())["schemaVersion"] == SCHEMA_VERSION
    assert (tmp_path / "verdict.json").stat().st_mode & 0o044, "reports are readable by others like any file"


def test_report_command_re_renders_a_finished_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports.render(broken_result(), tmp_path, ["json"])
    assert main(["report", str(tmp_path), "--format", "junit,html", "--format", "terminal"]) == 1  # the run failed
    out, err = capsys.readouterr()
    assert f"junit: {tmp_path / 'junit.xml'}" in out and f"report: {tmp_path / 'report.html'}" in out
    assert out.strip().splitlines()[-1].startswith("report: "), "the HTML report's path comes last"
    assert "no-leak should hold but was violated" in err
    assert (tmp_path / "report.html").stat().st_size > 1_000_000  # plotly.js inlined
    assert "cdn.plot.ly" not in (tmp_path / "report.html").read_text()[-200_000:]


def test_report_of_a_met_run_exits_0(tmp_path: Path) -> None:
    reports.render(deadlock_result(), tmp_path, ["json"])
    assert main(["report", str(tmp_path), "--format", "terminal"]) == 0


@pytest.mark.parametrize("fmt_args", [["run", "--report", "pdf"], ["report", "--format", "pdf"]])
def test_an_unknown_format_exits_2_listing_the_known_ones(tmp_path: Path, fmt_args: list[str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    reports.render(deadlock_result(), tmp_path, ["json"])
    args = [fmt_args[0], str(tmp_path / "verdict.json") if fmt_args[0] == "report" else "scenarios/none.yaml", *fmt_args[1:]]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "unknown report format 'pdf'" in err and "allure, html, json, junit, terminal" in err
    assert "Traceback" not in err


def _report_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: Path, *needles: str) -> None:
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["report", str(target), "--format", "html,junit"]) == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err
    assert "Traceback" not in err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before, "nothing may be written"


def test_a_missing_report_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _report_fails(tmp_path, capsys, tmp_path / "nope", str(tmp_path / "nope"), "no such report directory")


def test_a_directory_without_a_verdict_exits_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "d").mkdir()
    _report_fails(tmp_path, capsys, tmp_path / "d", str(tmp_path / "d" / "verdict.json"), "missing")


def test_a_truncated_verdict_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports.render(deadlock_result(), tmp_path, ["json"])
    text = (tmp_path / "verdict.json").read_text()
    (tmp_path / "verdict.json").write_text(text[: len(text) // 2])
    _report_fails(tmp_path, capsys, tmp_path, str(tmp_path / "verdict.json"), "partial")


def test_a_verdict_from_another_version_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports.render(deadlock_result(), tmp_path, ["json"])
    data = json.loads((tmp_path / "verdict.json").read_text())
    del data["schemaVersion"]  # as written before this version
    (tmp_path / "verdict.json").write_text(json.dumps(data))
    _report_fails(tmp_path, capsys, tmp_path, str(tmp_path / "verdict.json"), "another draguard version")


def test_a_verdict_missing_a_field_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports.render(deadlock_result(), tmp_path, ["json"])
    data = json.loads((tmp_path / "verdict.json").read_text())
    del data["scenarios"][0]["seed"]
    (tmp_path / "verdict.json").write_text(json.dumps(data))
    _report_fails(tmp_path, capsys, tmp_path, str(tmp_path / "verdict.json"), "partial verdict", "seed")


def test_a_missing_timeline_exits_2_naming_it_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports.render(deadlock_result(), tmp_path, ["json"])
    timeline = tmp_path / "gang-deadlock-per-pod" / "timeline.json"
    timeline.unlink()
    _report_fails(tmp_path, capsys, tmp_path, str(timeline), "missing")


def test_a_truncated_timeline_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports.render(deadlock_result(), tmp_path, ["json"])
    timeline = tmp_path / "gang-deadlock-per-pod" / "timeline.json"
    timeline.write_text(timeline.read_text()[:500])
    _report_fails(tmp_path, capsys, tmp_path, str(timeline), "not a complete timeline")


def test_load_report_raises_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(ResultFormatError) as info:
        reports.load_report(tmp_path)
    assert info.value.exit_code == 2
