"""``terminal``: the verdict table on stderr, and the live progress of a run.

Signs: ``✓`` an expectation met, ``✗`` one not met, ``–`` an invariant that was never checked (the
run stopped before it could be judged, or it cannot be judged on an installed driver; the error or
the invariant's note says why), ``~`` one the scenario ignores (``expect.ignore``; its reason follows
the table). Every violated invariant is listed and explained, whether the scenario named it or not. A scenario not applicable on the driver shows as such, with the reason. A run stopped by an unusable
environment prints that one error, not a column of failed invariants. A step that failed its scenario
is named with its status and why. A ``load`` step's target and achieved rate, then its times per
operation kind and phase (a table, ms), follow its scenario's lines.

:class:`RunProgress` is the progress callback the CLI hands to the runner: one line per phase with
the time since the scenario started (no source locations), and a rich progress bar with counts and
rate for phases that report :class:`~draguard.harness.core.progress.Counted` messages (building
binaries, starting many drivers, deleting many pods).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from draguard.harness.core.errors import EXIT_USAGE
from draguard.harness.core.progress import Counted
from draguard.harness.result import InvariantResult, LoadSummary, RunResult, ScenarioResult

from .registry import REPORTS

__all__ = ["render", "print_summary", "print_paths", "RunProgress", "invariant_mark", "load_table"]


def _console() -> Console:
    return Console(stderr=True, log_path=False)


def invariant_mark(inv: InvariantResult) -> str:
    """``✓`` met, ``✗`` not met, ``–`` never checked (whatever was expected), ``~`` ignored by the scenario."""
    if inv.expected == "ignore":
        return "~"
    if inv.status == "not-checked":
        return "–"
    return "✓" if inv.met else "✗"


def load_table(load: LoadSummary) -> Table:
    """A load step's times per operation kind and phase, in milliseconds."""
    table = Table()
    for col in ("kind", "phase", "count", "failures", "p50 ms", "p90 ms", "p99 ms", "max ms"):
        table.add_column(col, justify="left" if col in ("kind", "phase") else "right")
    for k in load.kinds:
        for i, p in enumerate(k.phases):
            table.add_row(k.kind if i == 0 else "", p.phase, str(p.count),
                          f"[red]{p.failures}[/red]" if p.failures else "0", f"{p.p50_ms:.0f}", f"{p.p90_ms:.0f}",
                          f"{p.p99_ms:.0f}", f"{p.max_ms:.0f}")  # fmt: skip
    return table


def _invariants(s: ScenarioResult) -> str:
    if s.not_applicable is not None:
        return "[dim]– not run (see the reason below)[/dim]"
    if s.error is not None and all(inv.status == "not-checked" for inv in s.invariants.values()):
        return "[dim]– none judged (see the error below)[/dim]"
    parts = []
    for name, inv in s.invariants.items():
        if not inv.listed:  # not named, not ignored, not judged: nothing to say
            continue
        mark = invariant_mark(inv)
        colour = "dim" if mark == "–" else "yellow" if mark == "~" else "green" if mark == "✓" else "red"
        suffix = "(violated)" if inv.status == "violated" else "(not checked)" if inv.status == "not-checked" else ""
        parts.append(f"[{colour}]{mark}{name}{suffix}[/{colour}]")
    return " ".join(parts)


def _result_cell(s: ScenarioResult) -> str:
    if s.not_applicable is not None:
        return "[yellow]not applicable[/yellow]"
    if s.error is not None and s.exit_code == EXIT_USAGE:
        return "[red]ERROR[/red]"
    return "[green]met[/green]" if s.ok else "[red]NOT met[/red]"


def print_summary(result: RunResult, console: Console | None = None) -> None:
    console = console or _console()

    def say(text: str, style: str | None = None) -> None:  # long lines stay whole, for copying
        console.print(text, style=style, highlight=False, soft_wrap=True)

    if result.scenarios:
        table = Table(title="draguard verdict")
        for col in ("scenario", "result", "invariants", "steps", "seconds"):
            table.add_column(col)
        for s in result.scenarios:
            table.add_row(s.name, _result_cell(s), _invariants(s),
                          f"{sum(st.ok for st in s.steps)}/{len(s.steps)} ok", f"{s.duration:.0f}")
        console.print(table)
    if result.checks:
        checks = Table(title="draguard checks")
        for col in ("check", "status", "reason"):
            checks.add_column(col)
        colours = {"passed": "green", "failed": "red", "error": "red", "skipped": "dim", "not-applicable": "dim"}
        for c in result.checks:
            checks.add_row(c.id, f"[{colours[c.status]}]{c.status}[/]", c.reason)
        console.print(checks)
    for s in result.scenarios:
        if s.not_applicable is not None:
            say(f"[yellow]{s.name}: {escape(s.not_applicable)}[/yellow]")
            continue
        if s.error is not None and s.exit_code == EXIT_USAGE:
            # An unusable input or environment: one clear error; nothing was judged.
            say(f"[red]{s.name}: error: {escape(s.error)}[/red]")
            continue
        if not s.ok and s.source:
            options = "".join(" " + shlex.quote(str(o)) for o in result.environment.get("replayOptions") or ())
            say(f"replay: draguard run {shlex.quote(s.source)} --seed {s.seed}{options}")
        if s.error:
            say(f"[red]{s.name}: {escape(s.error)}[/red]")
        for name, inv in s.invariants.items():
            if inv.met and inv.expected == "violate":  # the incident reproduced: show its evidence
                say(f"{s.name}: {name} violated, as this reproduction expects:")
                for v in inv.violations[:3]:
                    say(f"    {escape(v.message)}")
            if not inv.met and inv.status != "not-checked":
                want = "hold" if inv.expected == "hold" else "be violated"
                unnamed = "" if inv.required else " (not named in expect.hold: every violation counts)"
                say(f"[red]{s.name}: {name} should {want} but was {inv.status}{unnamed}[/red]")
                for v in inv.violations[:5]:
                    say(f"    {escape(v.message)}")
            if inv.expected == "ignore":
                say(f"[yellow]{s.name}: {name} ignored ({escape(inv.reason)}): {inv.status}[/yellow]")
                for v in inv.violations[:3]:
                    say(f"    {escape(v.message)}")
        unchecked = [n for n, inv in s.invariants.items() if inv.required and inv.status == "not-checked"]
        if unchecked:
            say(f"{s.name}: not checked: {', '.join(unchecked)}", "dim")
        for name, inv in s.invariants.items():
            # An invariant the scenario did not ask for and this run could not judge (per-claim-errors
            # without the interposer) is said in the reports, not on every run's screen.
            if inv.note and (inv.required or inv.status != "not-checked"):
                say(f"{s.name}: {name}: {escape(inv.note)}", "dim")
        for st in s.steps:
            if not (st.status == "ok" or st.optional):
                say(f"[red]{s.name}: step {st.name} ({st.fault}): {st.status}: {escape(st.detail)}[/red]")
        for x in s.expectation_results:
            if not x.met:
                say(f"[red]{s.name}: expect {x.kind} {escape(x.rule)}: not met{': ' + escape(x.detail) if x.detail else ''}[/red]")
            elif x.kind == "baseline":  # the comparison asked for on the command line: shown either way
                say(f"{s.name}: {escape(x.detail)} (baseline: {escape(x.rule)})", "dim")
        for st in s.steps:
            if st.load is not None:
                colour = "red" if st.load.fell_behind or st.load.error else "green"
                say(f"{s.name}: load of step {st.name}: [{colour}]{escape(st.load.headline)}[/{colour}]")
                console.print(load_table(st.load))
                for name, found in st.load.violations.items():
                    say(f"{s.name}: the load of step {st.name} saw {name} violated: {escape(found[0])}", "dim")
                if st.load.error:
                    say(f"[red]{s.name}: the load of step {st.name} could not run: {escape(st.load.error)}[/red]")
    applicable = [s for s in result.scenarios if s.not_applicable is None]
    if len(applicable) < len(result.scenarios):
        say(f"{len(result.scenarios) - len(applicable)} of {len(result.scenarios)} scenario(s) not applicable on "
            f"this driver (not run); {sum(s.ok for s in applicable)} of {len(applicable)} run met their expectations")
    for c in result.checks:
        if c.status in ("failed", "error"):
            say(f"[red]{c.id}: {c.status}: {escape(c.reason)}[/red]")
            for e in c.evidence[:5]:
                say(f"    {escape(e.message)}")


@REPORTS.register("terminal", summary="the verdict table and the evidence of each failure, on stderr")
def render(result: RunResult, out: Path) -> list[Path]:
    print_summary(result)
    return []


def print_paths(written: Iterable[tuple[str, Path]], console: Console | None = None) -> None:
    """One ``what: absolute path`` line per report file written (on stdout, for scripts); the HTML report last."""
    console = console or Console(log_path=False, soft_wrap=True)
    labels = {"html": "report", "junit": "junit", "allure": "allure results"}
    for fmt, path in sorted(written, key=lambda fp: fp[0] == "html"):
        if fmt in labels or fmt == "json":
            label = labels.get(fmt) or ("verdict" if path.name == "verdict.json" else "timeline")
            console.print(f"{label}: {path.resolve()}", highlight=False)


class RunProgress:
    """The runner's progress callback: phase lines and rich bars for counted phases."""

    counts = True
    """Ask harness code for frequent counted updates (see ``draguard.harness.core.progress``)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or _console()
        self._bars = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=self.console,
                              transient=True)
        self._status: TaskID | None = None
        self._counted: dict[str, tuple[TaskID, float]] = {}
        self._scenario = ""
        self._started = time.monotonic()

    @contextmanager
    def scenario(self, name: str) -> Iterator[RunProgress]:
        self._scenario, self._started = name, time.monotonic()
        with self._bars:
            self._status = self._bars.add_task(f"[bold]{name}[/bold]: starting", total=None, rate="")
            try:
                yield self
            finally:
                self._finish_counted()
                self._bars.remove_task(self._status)
                self._status = None

    def _line(self, message: str) -> None:
        elapsed = time.monotonic() - self._started
        prefix = f"{self._scenario}: " if self._scenario else ""
        self._bars.console.print(f"[dim]{elapsed:6.1f}s[/dim] {escape(prefix + message)}", highlight=False, soft_wrap=True)

    def _finish_counted(self) -> None:
        for phase, (task, started) in self._counted.items():
            t = self._bars.tasks[[x.id for x in self._bars.tasks].index(task)]
            took = max(time.monotonic() - started, 1e-6)
            total = int(t.total) if t.total is not None else int(t.completed)
            self._bars.remove_task(task)
            rate = f" ({total / took:.1f}/s)" if took >= 0.5 else ""
            self._line(f"{phase}: {total} in {took:.1f}s{rate}")
        self._counted.clear()

    def __call__(self, message: str) -> None:
        if isinstance(message, Counted):
            entry = self._counted.get(message.phase)
            if entry is None:
                task = self._bars.add_task(message.phase, total=message.total, rate="")
                entry = self._counted[message.phase] = (task, time.monotonic())
            task, started = entry
            took = max(time.monotonic() - started, 1e-6)
            self._bars.update(task, completed=message.done, total=message.total, rate=f"{message.done / took:.1f}/s")
            return
        self._finish_counted()
        if self._status is not None:
            self._bars.update(self._status, description=f"[bold]{self._scenario}[/bold]: {message}")
        self._line(message)
