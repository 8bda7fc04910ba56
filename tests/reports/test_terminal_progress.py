"""The run's progress on the terminal: phase lines without source locations, counted phases as bars."""

from __future__ import annotations

import io

from rich.console import Console

from draguard.harness.core.progress import Counted, wants_counts
from draguard.reports.terminal import RunProgress


def test_phase_lines_have_no_source_location_and_counted_phases_report_a_rate() -> None:
    buf = io.StringIO()
    progress = RunProgress(Console(file=buf, width=120, force_terminal=False))
    assert wants_counts(progress)
    with progress.scenario("gang-deadlock-per-pod"):
        progress("local control plane v1.37.2 up in 4.9s")
        for i in range(200):
            progress(Counted("starting fake drivers", i, 200))
        progress("fake driver published 1600 devices")
    out = buf.getvalue()
    lines = out.strip().splitlines()
    assert lines[0].endswith("gang-deadlock-per-pod: local control plane v1.37.2 up in 4.9s")
    assert "gang-deadlock-per-pod: starting fake drivers: 200 in " in lines[1] and lines[1].endswith("s")
    assert lines[2].endswith("fake driver published 1600 devices")
    assert ".py:" not in out
    assert not any("starting fake drivers: 17/200" in line for line in lines), "counts are a bar, not 200 lines"


def test_counted_is_a_plain_message_for_plain_callbacks() -> None:
    seen: list[str] = []
    seen.append(Counted("deleting pods", 3, 8))
    assert seen == ["deleting pods: 3/8"]
    assert not wants_counts(seen.append)
