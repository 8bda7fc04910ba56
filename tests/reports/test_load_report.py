"""A ``load`` step's measurements in every report: the HTML load table with the result's numbers and
units, the terminal's table, the JUnit case and Allure step, and verdict.json read back unchanged."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

from rich.console import Console

from browser import Browser
from draguard import reports
from draguard.harness.result import LoadSummary
from draguard.reports.html import to_html
from draguard.reports.terminal import print_summary
from report_samples import load_result, load_summary


class _LoadTables(HTMLParser):
    """The rows of every ``table.load-table`` (cells as text) and the text of each ``section.load``."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict[str, str], list[str]]] = []
        self.sections: list[dict[str, str]] = []
        self.text: list[str] = []
        self._in_table = False
        self._in_section = False
        self._row: tuple[dict[str, str], list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "section" and "load" in a.get("class", "").split():
            self._in_section = True
            self.sections.append(a)
        elif tag == "table" and a.get("class") == "load-table":
            self._in_table = True
        elif tag == "tr" and self._in_table:
            self._row = (a, [])
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row[1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        elif tag == "table":
            self._in_table = False
        elif tag == "section":
            self._in_section = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in_section:
            self.text.append(data)


def _parse(html: str) -> _LoadTables:
    p = _LoadTables()
    p.feed(html)
    return p


def test_the_html_report_shows_a_load_table_with_the_numbers_of_the_result() -> None:
    result = load_result()
    page = _parse(to_html(result))
    [section] = page.sections
    assert section["data-step"] == "churn" and section["data-fell-behind"] == "no"
    header = page.rows[0][1]
    assert header == ["operation", "started", "errors", "phase", "count", "failures", "p50 (ms)", "p90 (ms)",
                      "p99 (ms)", "max (ms)"]  # fmt: skip
    cells = {(attrs["data-kind"], attrs["data-phase"]): row for attrs, row in page.rows[1:]}
    load = result.scenarios[0].steps[0].load
    assert load is not None
    assert len(cells) == sum(len(k.phases) for k in load.kinds) == 12
    for k in load.kinds:
        for p in k.phases:
            row = cells[(k.kind, p.phase)]
            numbers = [p.phase, str(p.count), str(p.failures), f"{p.p50_ms:.0f}", f"{p.p90_ms:.0f}", f"{p.p99_ms:.0f}",
                       f"{p.max_ms:.0f}"]  # fmt: skip
            assert row[-7:] == numbers, (k.kind, row)
        first = cells[(k.kind, k.phases[0].phase)]
        assert first[:3] == [k.kind, str(k.operations), str(k.errors)], "each kind's row group opens with its totals"
    assert cells[("gang", "running")][-4:] == ["810", "1600", "1700", "1662"]
    text = re.sub(r"\s+", " ", "".join(page.text))
    assert "target 3 operations/s, achieved 3.6 operations/s kept up (at least 90% of the target)" in text
    assert "72 operations started and 72 finished over 20 s with 12 users" in text
    assert "Milliseconds per operation" in text, "the table says its unit and what each phase measures"
    assert "template running: load-ab-t1: not running after 60s (×1)" in text
    assert "driver-restart-under-churn/load-churn/" in text


def test_the_html_report_marks_a_load_that_fell_behind_and_what_it_saw() -> None:
    html = to_html(load_result(fell_behind=True))
    page = _parse(html)
    [section] = page.sections
    assert section["data-fell-behind"] == "yes"
    text = re.sub(r"\s+", " ", "".join(page.text))
    assert "achieved 1.8 operations/s fell behind (under 90% of the target)" in text
    assert "no-leak violated: 21.3s: device gpu-node-1/gpu-5 still allocated to load-ab-t1-0" in text
    steps = html.split('<table class="steps">', 1)[1].split("</table>", 1)[0]
    assert 'class="bad">error</td>' in steps and "the load fell behind its target rate" in steps


def test_a_step_without_a_load_draws_no_load_table() -> None:
    from report_samples import deadlock_result

    assert 'class="load' not in to_html(deadlock_result())


def test_verdict_json_keeps_the_load_of_a_step_through_a_round_trip(tmp_path: Path) -> None:
    result = load_result(fell_behind=True)
    reports.render(result, tmp_path, ["json"])
    saved = json.loads((tmp_path / "verdict.json").read_text())
    churn, restart = saved["scenarios"][0]["steps"]
    assert "load" not in restart, "only a load step carries a load"
    assert churn["load"]["achievedRate"] == 1.8 and churn["load"]["fellBehind"] is True
    assert churn["load"]["kinds"][0]["phases"][2] == {"phase": "running", "count": 30, "failures": 0, "p50Ms": 810,
                                                       "p90Ms": 1600, "p99Ms": 1700, "maxMs": 1662}  # fmt: skip
    back = reports.load_report(tmp_path)
    assert back.as_dict() == result.as_dict()
    assert back.scenarios[0].steps[0].load == load_summary(fell_behind=True)
    assert LoadSummary.from_dict(churn["load"]) == load_summary(fell_behind=True)


def test_the_terminal_prints_the_load_table_after_its_scenario() -> None:
    console = Console(record=True, width=200, file=io.StringIO())
    print_summary(load_result(fell_behind=True), console)
    text = console.export_text()
    assert "driver-restart-under-churn: step churn (load): error: step churn: the load fell behind its target" in text
    assert ("driver-restart-under-churn: load of step churn: target 3/s, achieved 1.8/s: FELL BEHIND (under 90% of "
            "the target); 36 operations started, 35 finished in 20s with 12 users") in text
    gang_running = next(line for line in text.splitlines() if "running" in line and "810" in line)
    assert re.search(r"running\s*│\s*30\s*│\s*0\s*│\s*810\s*│\s*1600\s*│\s*1700\s*│\s*1662", gang_running), gang_running
    assert "the load of step churn saw no-leak violated" in text


def test_junit_and_allure_carry_the_load_of_the_step(tmp_path: Path) -> None:
    reports.render(load_result(fell_behind=True), tmp_path, ["junit", "allure"])
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")}
    failure = cases["step churn (load)"].find("failure")
    assert failure is not None and failure.get("type") == "error"
    assert "the load fell behind" in failure.get("message", "")
    assert "running: 30 (0 failed) p50 810 ms, p90 1600 ms, p99 1700 ms, max 1662 ms" in (failure.text or "")
    assert cases["step restart-drivers (driver-restart)"].find("failure") is None
    runs = [json.loads(p.read_text()) for p in (tmp_path / "allure-results").glob("*-result.json")]
    [run] = [r for r in runs if r["name"].endswith(": run")]
    churn = next(st for st in run["steps"] if st["name"] == "churn (load)")
    assert churn["status"] == "failed"
    [attachment] = churn["attachments"]
    attached = json.loads((tmp_path / "allure-results" / attachment["source"]).read_text())
    assert attached["achievedRate"] == 1.8 and attached["kinds"][0]["kind"] == "gang"


def test_the_load_table_is_visible_in_the_browser(browser: Browser, tmp_path: Path) -> None:
    reports.render(load_result(), tmp_path, ["html"])
    browser.errors.clear()
    browser.open((tmp_path / "report.html").resolve().as_uri())
    assert browser.errors == [], browser.errors
    seen = browser.eval("""(() => {
        const t = document.querySelector('section.load table.load-table');
        const r = t.getBoundingClientRect();
        const row = t.querySelector('tr[data-kind="gang"][data-phase="running"]');
        return {w: r.width, h: r.height, row: row.innerText, rows: t.querySelectorAll('tr[data-phase]').length};
    })()""")
    assert seen["w"] > 0 and seen["h"] > 0 and seen["rows"] == 12, seen
    assert re.sub(r"\s+", " ", seen["row"]).strip() == "running 30 0 810 1600 1700 1662", seen
