"""Writing report files whole or not at all, placing what runs recorded, and reading a finished run's
report directory back.

Every file ``draguard.reports`` writes into a report directory (the renderers, ``repeat.json``,
``selfcheck.json``, the kill matrix, a certification bundle) goes through :func:`write_atomic` (a
temporary file in the same folder, then a rename), so an interrupted or failed render never leaves
half a file; nothing outside ``reports/`` writes there. What a run recorded besides its result (the
gRPC interposer's calls, the nodes' device truth, a load step's files: the scenario result's
:class:`~draguard.harness.result.RunRecord`, in the run's folder under the state directory) is put
in place by :func:`place_record`, each file or folder whole under its temporary name first, then
renamed; the record is then discarded, whatever formats were asked for. :func:`load_report` reads
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
from draguard.harness.result import ResultFormatError, RunRecord, RunResult, TimelineEvents, TimelineFile

__all__ = ["VERDICT", "write_atomic", "write_json", "replace_dir", "place_record", "place_records", "load_report",
           "timeline_path"]

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


def place_record(record: RunRecord, out: Path) -> list[Path]:
    """Put every file ``record`` holds at its name under ``out`` (a scenario's folder), replacing what is
    there, then discard the record; the paths placed. A file the run listed but never wrote is skipped."""
    placed = []
    try:
        for f in record.existing():
            final = out / f.name
            final.parent.mkdir(parents=True, exist_ok=True)
            staging = final.with_name(f".{final.name}.{os.getpid()}.placing")
            _remove(staging)
            try:
                f.path.rename(staging)  # the record and the report on one filesystem
            except OSError:
                if f.path.is_dir():
                    shutil.copytree(f.path, staging)
                else:
                    shutil.copyfile(f.path, staging)
            if staging.is_dir():
                replace_dir(staging, final)
            else:
                _remove(final)
                staging.replace(final)
            placed.append(final)
    finally:
        record.discard()
    return placed


def place_records(result: RunResult, out: Path) -> list[Path]:
    """Place each scenario's record (:func:`place_record`) at ``out/<scenario>/``; the scenario keeps no
    record afterwards."""
    placed = []
    for s in result.scenarios:
        if s.record is not None:
            record, s.record = s.record, None
            placed += place_record(record, out / s.name)
    return placed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


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

