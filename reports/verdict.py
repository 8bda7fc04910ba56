"""``json``: ``verdict.json`` (the result model as a document) and each scenario's ``timeline.json``.

The verdict is :meth:`RunResult.as_dict`; ``draguard report``, ``diff`` and ``history`` read it back
with :func:`draguard.reports.files.load_report`. Timelines are written first, so a verdict on disk
always names timelines that exist.
"""

from __future__ import annotations

import json
from pathlib import Path

from draguard.harness.result import RunResult

from .files import VERDICT, timeline_path, write_atomic
from .registry import REPORTS

__all__ = ["render"]


@REPORTS.register("json", summary="verdict.json with every case and its evidence, and each scenario's timeline.json")
def render(result: RunResult, out: Path) -> list[Path]:
    written: list[Path] = []
    for s in result.scenarios:
        if s.timeline is None:
            continue
        rel = timeline_path(s.name)
        events = list(s.timeline.events())
        written.append(write_atomic(out / rel, "[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n"
                                    if events else "[]\n"))
        s.timeline_file = rel
    written.append(write_atomic(out / VERDICT, json.dumps(result.as_dict(), indent=2) + "\n"))
    return written
