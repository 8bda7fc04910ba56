"""``draguard report DIR``, ``draguard diff OLD NEW``, ``draguard history DIR...``: finished runs, re-read.

``report`` re-renders a run from its report directory (verdict.json and the timelines it names) in
the formats asked for; ``diff`` compares two runs and exits 1 on a new failure; ``history`` writes a
trend page over many runs. A missing, partial or other-version report exits 2 naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from draguard import reports
from draguard.harness.core.errors import EXIT_FAILED, EXIT_OK
from draguard.reports.diff import diff_runs, print_diff
from draguard.reports.history import write_history
from draguard.reports.terminal import print_paths

from . import options

__all__ = ["COMMANDS"]


@click.command("report")
@click.argument("directory", type=click.Path(path_type=Path))
@options.report_formats("--format", default=("terminal", "html"), help="Formats")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write the files here instead of into DIRECTORY.")
def report(directory: Path, formats: list[str], out: Path | None) -> None:
    """Re-render a finished run from its report directory."""
    result = reports.load_report(directory, timelines=True)
    written = reports.render(result, out or (directory if directory.is_dir() else directory.parent), formats)
    print_paths(written)
    click.get_current_context().exit(result.exit_code)


@click.command("diff")
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--threshold", type=click.FloatRange(0), default=0.25, show_default=True,
              help="Relative duration change that counts (0.25 = 25%).")
@click.option("--min-seconds", type=click.FloatRange(0), default=2.0, show_default=True,
              help="Absolute duration change below which nothing counts.")
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
def diff(old: Path, new: Path, threshold: float, min_seconds: float, as_json: bool) -> None:
    """Compare two runs (report directories or verdict files); exit 1 on a new failure."""
    d = diff_runs(reports.load_report(old, timelines=False), reports.load_report(new, timelines=False),
                  threshold=threshold, min_seconds=min_seconds)
    if as_json:
        click.echo(json.dumps(d.as_dict(), indent=2))
    else:
        print_diff(d)
    click.get_current_context().exit(EXIT_FAILED if d.regressed else EXIT_OK)


@click.command("history")
@click.argument("directories", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("history.html"),
              show_default=True, help="The trend page to write.")
def history(directories: tuple[Path, ...], out: Path) -> None:
    """Write a trend page (pass rate per scenario over runs) from many report directories."""
    runs = [(str(d), reports.load_report(d, timelines=False)) for d in directories]
    print_paths([("html", write_history(runs, out))])


COMMANDS = [report, diff, history]
