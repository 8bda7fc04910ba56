"""The kill matrix's files: ``kill-matrix.json`` and ``kill-matrix.md`` in a report directory, the doc
(``docs/kill-matrix.md`` with ``docs/kill-matrix.json`` beside it), and measured matrices read back.

All come from :class:`~draguard.harness.campaign.models.KillMatrix`. The Markdown says when, where and how it was measured, lists each mutant with the bug it models,
its upstream citation and the scenarios that catch it (with the detector), names the survivors,
and shows the whole matrix. It is a pure function of the matrix, so a test can regenerate it from
``kill-matrix.json`` and compare.
"""

from __future__ import annotations

import json
from pathlib import Path

from draguard.harness.campaign.models import CORRECT, Cell, KillMatrix
from draguard.harness.core.errors import UsageError

from .files import place_record, write_atomic, write_json

__all__ = ["render_markdown", "cell_mark", "JSON", "MARKDOWN", "write_kill_matrix", "write_doc", "read_kill_matrices"]

JSON = "kill-matrix.json"
MARKDOWN = "kill-matrix.md"

_MARK = {"passed": "pass", "false-positive": "**FALSE POSITIVE**", "survived": "survived", "error": "error"}


def cell_mark(cell: Cell | None) -> str:
    """A short table entry: the catching detectors, or the verdict."""
    if cell is None:
        return "—"
    if cell.verdict == "caught":
        return ", ".join(f"`{d.split(':', 1)[1]}`" if d.startswith("invariant:") else f"`{d}`" for d in cell.detectors)
    return _MARK[cell.verdict]


def render_markdown(matrix: KillMatrix, json_name: str = JSON) -> str:
    mutants = [m for m in matrix.mutants if m != CORRECT]
    lines = [
        "# Kill matrix",
        "",
        f"<!-- generated from {json_name} by `draguard mutants --from-json {json_name} --doc <this file>`; "
        "do not edit by hand -->",
        "",
        "Each library scenario is run against the correct fake driver and against every mutant (a fake "
        "driver with one known bug switched on, `harness/driver/mutants.py`). A mutant is **caught** when "
        "an invariant the scenario expects to hold is violated, a step fails, or an expected violation "
        "does not show; the correct driver must pass every scenario.",
        "",
        (f"Measured in parts from {matrix.measured_at} to {matrix.measured_until}" if matrix.measured_until
         else f"Measured {matrix.measured_at or 'at an unknown time'}")
        + f" on {matrix.machine or 'an unknown machine'}, "
        f"{len(matrix.cells)} runs, {matrix.parallel} in parallel, {matrix.wall_seconds / 60:.0f} min wall time:",
        "",
        "```sh",
        matrix.command or "draguard mutants",
        "```",
        "",
        f"This measurement covers {len(matrix.scenarios)} scenario(s) and {len(mutants)} mutant(s); "
        "a cell marked — was not run.",
        "",
        "`draguard mutants` regenerates it (by hand or nightly: the full cross product is too slow for CI). "
        "CI (`tests/mutants/test_kill_matrix.py`) keeps it true: it renders this file from the JSON, and "
        "re-runs each mutant against the quickest scenario recorded as catching it, expecting the same "
        "invariant.",
        "",
        "## Mutants",
        "",
        "| mutant | bug | upstream | caught by |",
        "|---|---|---|---|",
    ]
    for m in mutants:
        about = matrix.about.get(m, {})
        caught = matrix.caught_by(m)
        by = "; ".join(f"{c.scenario} ({cell_mark(c)})" for c in caught) or "**survived**"
        lines.append(f"| `{m}` | {about.get('bug', '')} | {about.get('upstream', '')} | {by} |")
    survivors = matrix.survivors()
    fps = matrix.false_positives()
    errors = matrix.errors()
    lines += ["", "## Verdict", ""]
    lines.append(f"- survivors: {', '.join(f'`{m}`' for m in survivors) if survivors else 'none'}")
    lines.append("- false positives (the correct driver failed): "
                 + (", ".join(f"{c.scenario} ({', '.join(c.detectors)})" for c in fps) if fps else "none"))
    lines.append("- runs in error: " + (", ".join(f"{c.mutant} × {c.scenario}: {c.error}" for c in errors) if errors else "none"))
    lines += ["", "## Matrix", "", "| scenario | " + " | ".join(["correct", *mutants]) + " |",
              "|---|" + "---|" * (len(mutants) + 1)]
    for sc in matrix.scenarios:
        row = [cell_mark(matrix.cell(CORRECT, sc))] + [cell_mark(matrix.cell(m, sc)) for m in mutants]
        lines.append(f"| {sc} | " + " | ".join(row) + " |")
    lines.append("")
    return "\n".join(lines)


def write_kill_matrix(matrix: KillMatrix, out: Path) -> list[Path]:
    """``out/kill-matrix.json`` and ``out/kill-matrix.md``; what each cell's run recorded is placed at
    ``out/<mutant>/<scenario>/`` (not in the list returned)."""
    for cell in matrix.cells:
        if cell.record is not None:
            place_record(cell.record, out / cell.mutant / cell.scenario)
    data = matrix.as_dict()  # the Markdown says what the JSON holds (its figures rounded as there)
    return [write_json(out / JSON, data, indent=1), write_atomic(out / MARKDOWN, render_markdown(KillMatrix.from_dict(data)))]


def write_doc(matrix: KillMatrix, doc: Path) -> list[Path]:
    """The Markdown at ``doc`` (``docs/kill-matrix.md``) and its data beside it (``docs/kill-matrix.json``,
    which the Markdown names)."""
    data = matrix.as_dict()
    return [write_atomic(doc, render_markdown(KillMatrix.from_dict(data), JSON)), write_json(doc.with_suffix(".json"), data, indent=1)]


def read_kill_matrices(paths: list[Path]) -> KillMatrix:
    """Measured ``kill-matrix.json`` files, merged in order (:meth:`KillMatrix.combined`); UsageError (exit 2)
    naming a file that is not a kill matrix."""
    parts = []
    for path in paths:
        try:
            parts.append(KillMatrix.from_dict(json.loads(path.read_text())))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UsageError(f"{path}: not a kill matrix: {exc}") from exc
    return KillMatrix.combined(parts)
