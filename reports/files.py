"""Writing report files whole or not at all, and reading a finished run's report directory back.

Every file ``draguard.reports`` writes into a report directory (the renderers, ``repeat.json``,
``selfcheck.json``, the kill matrix, a certification bundle) goes through :func:`write_atomic` (a
temporary file in the same folder, then a rename), so an interrupted or failed render never leaves
half a file; nothing outside ``reports/`` writes there. :func:`load_report` reads
``verdict.json`` and the timelines it names, and refuses (``ResultFormatError``, exit 2) a missing,
partial or other-version report, naming the file and what is missing.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from draguard.harness.core.fsio import atomic_write, cleanup_temporaries
from draguard.harness.result import ResultFormatError, RunResult, TimelineEvents, TimelineFile

__all__ = ["VERDICT", "write_atomic", "write_json", "replace_dir", "load_report", "timeline_path"]

VERDICT = "verdict.json"


def write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (the core's :func:`~draguard.harness.core.fsio.atomic_write`:
    a temporary file in the same folder, then a rename; no fsync, as for any rendered file); the folder is
    made if need be, and a failed write leaves no temporary file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        atomic_write(path, text.encode("utf-8"), sync="none")
    except BaseException:
        cleanup_temporaries(path.parent, f"{path.name}.{os.getpid()}")
        raise
    return path


def write_json(path: Path, data: Any, indent: int = 2) -> Path:
    """Write ``data`` as a JSON document (a final newline) through :func:`write_atomic`."""
    return write_atomic(path, json.dumps(data, indent=indent) + "\n")


def replace_dir(staging: Path, final: Path) -> None:
    """Put a fully written folder ``staging`` in place of ``final`` (which may exist)."""
    old = final.with_name(f".{final.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def timeline_path(scenario_name: str) -> str:
    """Where a scenario's timeline lives, relative to the report directory."""
    return f"{scenario_name}/timeline.json"


def load_report(path: Path, *, timelines: bool = True) -> RunResult:
    """The run in report directory ``path`` (or the verdict file ``path``), its timelines attached.

    With ``timelines`` every timeline the verdict names must exist and be complete; it is read here,
    so that a render that follows cannot fail half way.
    """
    verdict = path / VERDICT if path.is_dir() else path
    if not path.exists():
        raise ResultFormatError(f"{path}: no such report directory or verdict file")
    if not verdict.is_file():
        raise ResultFormatError(f"{verdict}: missing; {path} is not a draguard report directory (no {VERDICT})")
    try:
        data = json.loads(verdict.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultFormatError(f"{verdict}: cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ResultFormatError(f"{verdict}: partial or not JSON (line {exc.lineno}: {exc.msg})") from exc
    result = RunResult.from_dict(data, where=str(verdict))
    if timelines:
        root = verdict.parent
        for s in result.scenarios:
            if not s.timeline_file:
                raise ResultFormatError(f"{verdict}: scenario {s.name} names no timeline file")
            file = root / s.timeline_file
            if not file.is_file():
                raise ResultFormatError(f"{file}: missing (the timeline of scenario {s.name} named by {verdict})")
            events = TimelineFile(file)
            s.timeline = TimelineEvents(tuple(events.events()))  # read once, rendered by many
    return result

