"""The HTML report in a real browser (headless Chromium over the DevTools protocol).

Opens the report, checks there are no console errors or uncaught exceptions, that the device
timeline is drawn with one row per device, and that what a reader must see is there: the two
partial gangs of the deadlock holding devices side by side, a leaked device, a double allocation.
A screenshot of each report is kept in the test's tmp folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from browser import Browser
from draguard import reports
from report_samples import broken_result, deadlock_result

ROOT = Path(__file__).resolve().parents[2]


def open_report(browser: Browser, path: Path) -> None:
    browser.errors.clear()
    browser.open(path.resolve().as_uri())
    assert browser.eval("typeof Plotly") == "object", "plotly.js is not inlined in the report"
    assert browser.errors == [], browser.errors


def device_timeline(browser: Browser, index: int = 0) -> dict[str, Any]:
    """What the device timeline shows: its rows (as drawn on the axis) and its claim bars."""
    value = browser.eval(f"""(() => {{
        const gd = document.getElementById('device-timeline-{index}');
        if (!gd || !gd.data) return null;
        const box = gd.closest('.device-timeline');
        return {{
          drawnRows: gd.querySelectorAll('.yaxislayer-above .ytick').length,
          declaredRows: Number(box.dataset.deviceRows),
          bars: gd.data.filter(t => t.meta && t.meta.kind === 'claim').flatMap(t =>
            t.y.map((row, i) => ({{row, workload: t.meta.workload, state: t.meta.state,
                                  start: t.base[i], end: t.base[i] + t.x[i], outline: t.marker.line.width[i]}}))),
          overlaps: gd.data.filter(t => t.meta && t.meta.kind === 'double-allocation').reduce((n, t) => n + t.y.length, 0),
          violationShapes: (gd.layout.shapes || []).filter(s => (s.name || '').startsWith('violation')).length,
          chaosMarkers: (gd.layout.shapes || []).filter(s => s.type === 'line' && s.yref === 'paper').length,
        }};
    }})()""")
    assert value is not None, "no device timeline element with plot data"
    return dict(value)


def assert_two_partial_gangs_side_by_side(tl: dict[str, Any], devices: int, holding: str) -> None:
    """Both gangs hold devices at the same moment, different ones, and neither holds a whole gang's worth.

    (Later, while cleanup deletes pods, a pending member of one gang may take devices the other freed:
    rows may change hands over time, so this looks at the moments when both gangs hold devices.)
    """
    assert tl["drawnRows"] == devices and tl["declaredRows"] == devices, tl
    for gang in ("gang-a", "gang-b"):
        assert f"{gang}: " in holding and "(partial gang)" in holding.split(f"{gang}: ", 1)[1].splitlines()[0], holding
    bars = {w: [b for b in tl["bars"] if b["workload"] == w] for w in ("gang-a", "gang-b")}
    assert bars["gang-a"] and bars["gang-b"], "both gangs must hold devices"
    moments = sorted({b["start"] + 0.01 for b in tl["bars"]})
    both = []
    for t in moments:
        held = {w: {b["row"] for b in bs if b["start"] <= t < b["end"]} for w, bs in bars.items()}
        if held["gang-a"] and held["gang-b"]:
            both.append(held)
    assert both, "the gangs never held devices at the same time"
    for held in both:
        assert not held["gang-a"] & held["gang-b"], f"one device drawn as held by both gangs at once: {held}"
    # The deadlock: together the two partial gangs hold every device, so neither can ever complete.
    # How they split them (4 and 4, 6 and 2) depends on the order the scheduler retries pods in.
    widest = max(both, key=lambda h: len(h["gang-a"]) + len(h["gang-b"]))
    assert len(widest["gang-a"]) + len(widest["gang-b"]) == devices, widest
    assert 0 < len(widest["gang-a"]) < devices and 0 < len(widest["gang-b"]) < devices, widest


def test_deadlock_report_shows_two_partial_gangs_in_the_browser(browser: Browser, tmp_path: Path) -> None:
    reports.render(deadlock_result(), tmp_path, ["json", "html"])
    open_report(browser, tmp_path / "report.html")
    tl = device_timeline(browser)
    assert_two_partial_gangs_side_by_side(tl, 8, browser.eval("document.querySelector('#scenario-0 .holding').innerText"))
    assert tl["overlaps"] == 0 and not any(b["outline"] > 1 for b in tl["bars"])  # nothing leaked, nothing doubled
    assert tl["violationShapes"] == 6  # the six devices the gang-atomic evidence names
    assert tl["chaosMarkers"] == 1
    assert "gang-atomic" in browser.eval("document.getElementById('verdict').innerText")
    gang_rows = browser.eval("document.querySelectorAll('#gangs-0 .yaxislayer-above .ytick').length")
    assert gang_rows == 8  # a member x time strip: 2 gangs x 4 members
    browser.screenshot(tmp_path / "deadlock.png")
    assert browser.errors == []


def test_leaked_and_double_allocated_devices_are_visible(browser: Browser, tmp_path: Path) -> None:
    reports.render(broken_result(), tmp_path, ["html"])
    open_report(browser, tmp_path / "report.html")
    tl = device_timeline(browser)
    assert tl["overlaps"] == 1, "the double allocation of gpu-node-0/gpu-0 is drawn"
    held = {b["row"] for b in tl["bars"] if b["outline"] > 1}
    assert held == {"gpu-node-1 / gpu-3"}, "the leaked device's bar is outlined as still held at the end"
    assert tl["violationShapes"] == 6 + 2  # gang-atomic's six, no-leak's and no-double-allocation's one each
    browser.screenshot(tmp_path / "broken.png")


def test_event_filters_narrow_the_drill_down(browser: Browser, tmp_path: Path) -> None:
    reports.render(deadlock_result(), tmp_path, ["html"])
    open_report(browser, tmp_path / "report.html")
    counts = browser.eval("""(() => {
        const box = document.getElementById('events-0'); box.open = true;
        const count = () => box.querySelector('.count').textContent;
        const all = count();
        const kind = box.querySelector('.f-kind'); kind.value = 'ResourceClaim';
        kind.dispatchEvent(new Event('input'));
        const claims = count();
        const w = box.querySelector('.f-workload'); w.value = 'gang-b'; w.dispatchEvent(new Event('input'));
        const gangB = count();
        const rows = [...box.querySelectorAll('tbody tr')].map(r => r.children[3].textContent);
        return {all, claims, gangB, rows};
    })()""")
    total = len(list(deadlock_result().scenarios[0].timeline.events()))  # type: ignore[union-attr]
    assert counts["all"] == f"{total} of {total}"
    claims = sum(1 for e in deadlock_result().scenarios[0].timeline.events() if e["kind"] == "ResourceClaim")  # type: ignore[union-attr]
    assert counts["claims"] == f"{claims} of {total}"
    assert counts["rows"] and all("gang-b" in r for r in counts["rows"])
    assert browser.errors == []


@pytest.mark.cluster
def test_library_deadlock_run_renders_two_partial_gangs(browser: Browser, tmp_path: Path) -> None:
    """`draguard run` of the demo's deadlock scenario: the report it writes, checked in the browser."""
    from draguard.cli.main import main

    out = tmp_path / "report"
    code = main(["run", str(ROOT / "scenarios" / "gang-deadlock-per-pod.yaml"), "--report-dir", str(out),
                 "--report", "json,html,junit"])
    verdict = json.loads((out / "verdict.json").read_text())
    assert code == 0, verdict["scenarios"][0].get("error")
    open_report(browser, out / "report.html")
    tl = device_timeline(browser)
    assert_two_partial_gangs_side_by_side(tl, 8, browser.eval("document.querySelector('#scenario-0 .holding').innerText"))
    assert tl["overlaps"] == 0
    browser.screenshot(tmp_path / "gang-deadlock-per-pod.png")
    assert browser.errors == []
    if os.environ.get("DRAGUARD_KEEP_REPORTS"):
        print(f"report kept in {out}")
