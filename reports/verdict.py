"""``json``: ``verdict.json`` (the result model as a document) and each scenario's ``timeline.json``.

The verdict is :meth:`RunResult.as_dict`; ``draguard report``, ``diff`` and ``history`` read it back
with :func:`draguard.reports.files.load_report`. Timelines are written first, so a verdict on disk
always names timelines that exist.
"""

from __future__ import annotations

import json
from pathlib import Path

from draguard.harness.result import RunResult

from .files import VERDICT, timeline_path, write_atomic, write_json
from .registry import REPORTS

__all__ = ["render", "write_verdict"]


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
    written.append(write_verdict(result, out))
    return written


def write_verdict(result: RunResult, out: Path) -> Path:
    """``out/verdict.json``: the one place that writes it (the json format, ``draguard conformance --out``
    and the certification bundle come here)."""
    return write_json(out / VERDICT, result.as_dict())
