"""Renderers of results: terminal, JSON, JUnit, Allure, HTML; run diffs and history pages.

Each format is one module registered by name in :data:`REPORTS` and reads only the result model
(``draguard.harness.result``). :func:`render` places what the runs recorded into the report directory
and runs the chosen formats over one result; :func:`load_report` reads a finished run back from its
report directory (``draguard report``). Nothing but this package writes into a report directory.
"""

from __future__ import annotations

from pathlib import Path

from draguard.harness.core.errors import UsageError
from draguard.harness.result import RunResult

from . import allure, html, junit, terminal, verdict  # noqa: F401  (register the formats)
from .files import load_report, place_records
from .registry import REPORTS

__all__ = ["REPORTS", "DEFAULT_FORMATS", "render", "load_report", "check_formats"]

DEFAULT_FORMATS = ("terminal", "json", "html")


def check_formats(formats: tuple[str, ...] | list[str]) -> list[str]:
    """The formats, known and deduplicated in order; :class:`UsageError` (exit 2) listing the known ones."""
    unknown = [f for f in formats if f not in REPORTS]
    if unknown:
        raise UsageError(f"unknown report format {', '.join(map(repr, unknown))}; known: {', '.join(REPORTS.names())}")
    return list(dict.fromkeys(formats))


def render(result: RunResult, out: Path, formats: tuple[str, ...] | list[str] = DEFAULT_FORMATS) -> list[tuple[str, Path]]:
    """Render ``result`` into ``out`` in each format; (format, file) for each file written.

    First, whatever the formats (the terminal's alone too), each scenario's record (the interposer's
    calls, the nodes' device truth, load steps' files) is placed at ``out/<scenario>/`` and discarded
    from the run's state folder (:func:`~draguard.reports.files.place_records`); those files are not
    in the list returned. ``json`` goes first so that the verdict names the timeline files the other
    formats may link to.
    """
    chosen = check_formats(formats)
    place_records(result, out)
    ordered = sorted(chosen, key=lambda f: (f != "json", f == "terminal"))
    written: list[tuple[str, Path]] = []
    for name in ordered:
        for path in REPORTS.get(name).target(result, out):
            written.append((name, path))
    return written
