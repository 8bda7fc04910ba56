"""The timeline keeps memory bounded on big runs: old entries go to a spool file, read back in order."""

from __future__ import annotations

import json
from pathlib import Path

from draguard.harness.judge.observe import Timeline


def test_spooled_timeline_keeps_few_entries_in_memory_and_loses_none(tmp_path: Path) -> None:
    timeline = Timeline(keep_in_memory=50)
    timeline.spool_to(tmp_path / "spool.jsonl")
    for i in range(5000):
        timeline.add("watch", "Pod", f"p-{i}", "ADDED", f"#{i}", "ns")
        assert len(timeline.entries) <= 50
    assert len(timeline) == 5000
    names = [e["name"] for e in timeline.as_list()]
    assert names == [f"p-{i}" for i in range(5000)]
    timeline.write_json(tmp_path / "timeline.json")
    written = json.loads((tmp_path / "timeline.json").read_text())
    assert [e["name"] for e in written] == names and written[0]["namespace"] == "ns"


def test_without_a_spool_everything_stays_in_memory(tmp_path: Path) -> None:
    timeline = Timeline(keep_in_memory=10)
    for i in range(100):
        timeline.add("phase", "Run", "x", "phase", str(i))
    assert len(timeline.entries) == 100 == len(timeline)
    timeline.write_json(tmp_path / "t.json")
    assert len(json.loads((tmp_path / "t.json").read_text())) == 100
