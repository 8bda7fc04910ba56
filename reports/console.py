"""Terminal presentations other than a run's verdict (:mod:`.terminal` has that one): a scenario's
dry-run plan, the verdict rates of a repeated scenario, a load's latency table and the kill matrix.

The commands in ``cli/`` gather the data and call these; how it looks on a terminal is decided here
and nowhere else. Reads the result model and the campaign models (``draguard.harness.campaign.models``)
only. Tables and plans go to stderr-free ``Console()`` unless one is given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from draguard.harness.campaign.models import CORRECT, KillMatrix, Rates, ScenarioPlan
from draguard.harness.result import CheckResult

from .kill_matrix import cell_mark

__all__ = ["check_line", "check_summary", "print_plan", "print_rates", "print_load", "print_kill_matrix", "print_cluster_status",
           "print_allocation_check", "print_bench"]


_MARK = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "not-applicable": "N/A", "error": "ERROR"}


def check_line(check: CheckResult) -> str:
    """One line per check of the sanity and conformance suites, as each finishes."""
    why = f": {check.reason}" if check.reason else ""
    return f"{_MARK.get(check.status, check.status.upper()):5} {check.id} ({check.duration:.1f}s){why}"


def check_summary(suite: str, checks: Iterable[CheckResult]) -> str:
    """The suite's closing line: how many checks passed, failed, skipped and could not run."""
    counts = Counter(c.status for c in checks)
    na = f", {counts['not-applicable']} not applicable" if counts["not-applicable"] else ""
    return (f"draguard {suite}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped{na}, "
            f"{counts['error']} error(s)")  # fmt: skip


def print_plan(plan: ScenarioPlan, console: Console | None = None) -> None:
    """What ``draguard run --dry-run`` shows: what would be created, in which order, and which fault
    hits which target when (with the seed its random choices are drawn from)."""
    console = console or Console()

    def line(text: str) -> None:
        console.print(escape(text), highlight=False)

    console.print(f"[bold]{escape(plan.name)}[/bold] ({escape(plan.source)}) seed={plan.seed}", highlight=False)
    line(f"  cluster: {plan.backend} feature gates {dict(plan.feature_gates) or '{}'}")
    line(f"  driver: {plan.driver}" + (f" mutant={plan.mutant}" if plan.mutant else ""))
    for node, what in plan.nodes:
        line(f"  node {node}: {what}")
    for dc in plan.device_classes:
        line(f"  create DeviceClass {dc}")
    for kind, name, detail in plan.creates:
        line(f"  create {kind} {name}" + (f" ({detail})" if detail else ""))
    line(f"  create pods in order: {', '.join(plan.pods)}")
    for workload, step, fault in plan.held_back:
        line(f"  hold back workload {workload} until step {step} ({fault})")
    for st in plan.steps:
        when = (f"at {st.at:g}s" if st.at is not None
                else f"{st.after[0]:g}s after step {st.after[1]} started" if st.after is not None
                else f"when {st.when}")  # fmt: skip
        line(f"  step {st.name}: {st.fault} {when} target={st.target or 'default'} "
             f"(random choices drawn with seed {plan.seed}:{st.index})")  # fmt: skip
        for touched in st.touches:
            line(f"    touches {touched}")
    line(f"  expect hold={list(plan.hold)} violate={list(plan.violate)}")
    for invariant, reason in plan.ignore:
        line(f"  expect ignore {invariant}: {reason}")
    if plan.unnamed:
        line(f"  also judged (not named in hold, must not be violated): {', '.join(plan.unnamed)}")


def print_rates(r: Rates, console: Console | None = None) -> None:
    """The verdicts of ``draguard run --repeat N``: per invariant and step, how often each came out."""
    console = console or Console(stderr=True)
    table = Table(title=f"{r.scenario}: verdicts over {r.runs} runs ({r.met} met every expectation)")
    for col in ("invariant", "expected", "verdicts", ""):
        table.add_column(col)
    for name, counts in r.invariants.items():
        verdicts = ", ".join(f"{status} {n}/{r.runs}" for status, n in counts.most_common())
        table.add_row(name, r.expected.get(name) or "-", verdicts, "[yellow]flaky[/yellow]" if r.flaky(name) else "")
    for name, counts in r.steps.items():
        table.add_row(f"step {name}", "ok", ", ".join(f"{s} {n}/{r.runs}" for s, n in counts.most_common()),
                      "[yellow]flaky[/yellow]" if len(counts) > 1 else "")  # fmt: skip
    console.print(table)


def print_load(summary: Mapping[str, Any], console: Console | None = None) -> None:
    """``draguard load``'s result: latency per operation kind and phase, then the invariants it judged."""
    console = console or Console(stderr=True)
    locust = summary.get("locust") or {}
    table = Table(title=f"target {summary['target_rate']}/s, achieved {summary['achieved_rate']}/s"
                  + (" — FELL BEHIND" if summary["fell_behind"] else ""))  # fmt: skip
    for col in ("kind", "phase", "count", "failures", "p50 ms", "p90 ms", "p99 ms", "max ms"):
        table.add_column(col, justify="right" if col not in ("kind", "phase") else "left")
    for e in locust.get("entries", []):
        table.add_row(e["kind"], e["name"], str(e["count"]), str(e["failures"]), f"{e['p50_ms']:.0f}",
                      f"{e['p90_ms']:.0f}", f"{e['p99_ms']:.0f}", f"{e['max_ms']:.0f}")  # fmt: skip
    console.print(table)
    invariants = summary.get("invariants") or {}
    for name in summary.get("checked", []):
        found = invariants.get(name) or []
        console.print(escape(f"{name}: {'VIOLATED' if found else 'held'}" + (f" ({found[0]})" if found else "")),
                      highlight=False)  # fmt: skip
    if summary.get("error"):
        console.print(escape(f"error: {summary['error']}"), highlight=False)


def print_kill_matrix(matrix: KillMatrix, console: Console | None = None) -> None:
    """The kill matrix as a table, then per mutant where it was caught, then false positives and errors."""
    console = console or Console()
    mutants = [m for m in matrix.mutants if m != CORRECT]
    table = Table(title="draguard kill matrix")
    table.add_column("scenario")
    for m in ["correct", *mutants]:
        table.add_column(m)
    for sc in matrix.scenarios:
        table.add_row(sc, *[cell_mark(matrix.cell(m, sc)) for m in [CORRECT, *mutants]])
    console.print(table)
    lines = []
    for m in mutants:
        caught = matrix.caught_by(m)
        lines.append(f"{m}: " + ("; ".join(f"{c.scenario} ({cell_mark(c)})" for c in caught) if caught else "SURVIVED"))
    lines += [f"FALSE POSITIVE: the correct driver failed {c.scenario}: {'; '.join(c.evidence)}"
              for c in matrix.false_positives()]  # fmt: skip
    lines += [f"ERROR: {c.mutant} × {c.scenario}: {c.error}" for c in matrix.errors()]
    for text in lines:
        console.print(escape(text), highlight=False, soft_wrap=True)


def _yes(ok: bool) -> str:
    return "[green]yes[/green]" if ok else "[red]no[/red]"


def print_cluster_status(name: str, components: Mapping[str, Mapping[str, Any]], order: Iterable[str],
                         console: Console | None = None) -> None:  # fmt: skip
    """``draguard cluster status``: each component's pid, liveness, readiness and restarts."""
    table = Table(title=f"cluster {name}")
    for col in ("component", "pid", "alive", "ready", "restarts"):
        table.add_column(col)
    for component in order:
        st = components[component]
        table.add_row(component, str(st["pid"]), _yes(bool(st["alive"])), _yes(bool(st["ready"])), str(st["restarts"]))
    (console or Console()).print(table)


def print_allocation_check(steps: Iterable[tuple[str, bool, str]], ok: bool, seconds: float,
                           console: Console | None = None) -> None:  # fmt: skip
    """``draguard cluster check``: each step of the DRA allocation check, then PASS or FAIL."""
    console = console or Console(stderr=True)
    table = Table(title="DRA allocation check")
    for col in ("step", "ok", "detail"):
        table.add_column(col)
    for step, passed, detail in steps:
        table.add_row(escape(step), _yes(passed), escape(detail))
    console.print(table)
    console.print(("[green]PASS[/green]" if ok else "[red]FAIL[/red]") + f" in {seconds:.1f}s")


def print_bench(results: Mapping[str, Mapping[str, Any]], console: Console | None = None) -> None:
    """``draguard bench``: the median of each benchmark, with its unit and what it means."""
    table = Table(title="draguard bench (medians)")
    for col in ("benchmark", "median", "unit", "detail"):
        table.add_column(col)
    for name, r in results.items():
        if name == "watch-decode":
            table.add_row(name, f"{r['plain_median']} vs {r['typed_median']}", r["unit"],
                          f"typed models {r['ratio_typed_over_plain']}x slower than plain JSON")  # fmt: skip
        elif name == "dra-throughput":
            perf = r.get("scheduler_perf_median")
            share = r.get("harness_machine_share_while_scheduling_median")  # results before it was measured lack it
            while_scheduling = f" ({share} while scheduling)" if share is not None else ""
            perf_text = (f"upstream scheduler_perf {perf} (draguard/scheduler_perf {r.get('draguard_over_scheduler_perf_median')})"
                         if perf is not None else f"upstream scheduler_perf not run: {r.get('upstream_scheduler_perf')}")
            table.add_row(name, str(r["median"]), "pods/s scheduled",
                          f"{r['nodes']} nodes, {r['pods']} pods; upstream threshold {r['upstream_threshold_pods_per_s']} "
                          f"(5000 pods at 500 nodes); control plane alone {r['control_plane_raised_limits_median']} "
                          f"(upstream client limits: {r['control_plane_default_limits_median']}; with the nodes' "
                          f"Lease renewals: {r.get('control_plane_with_leases_median')}); {perf_text}; "
                          f"draguard/alone {r['draguard_over_control_plane_median']}; Running/s "
                          f"{r['draguard_running_per_s_median']}; harness {r['harness_machine_share_median']} of the "
                          f"machine{while_scheduling}, peak {r['harness_peak_rss_mib_median']} MiB; prepare lag p99 "
                          f"{r.get('prepare_lag_p99_s_median')} s, lease age max {r.get('lease_age_max_s_median')} s")  # fmt: skip
        elif name == "library-wall":
            detail = f"{r['scenarios']} scenario(s), {r['mode']}"
            if "parallel_median" in r:
                detail += (f"; {r['parallel']} at a time {r['parallel_median']} s "
                           f"({r['parallel_speedup_median']}x faster)")
            if r.get("not_ok"):
                detail += f"; NOT ok: {', '.join(r['not_ok'])}"
            table.add_row(name, str(r["median"]), r["unit"], detail)
        elif name == "detection":
            lat = r["latency_s"]
            table.add_row(name, str(r["median"]), r["unit"],
                          f"p99 {lat['p99']} s, max {lat['max']} s; {r['reported']}/{r['injected']} reported "
                          f"({r['nodes']} nodes, {r['pods']} pods"
                          + "".join(f"; {k} p99 {v['p99']} s ({v['reported']}/{v['injected']})"
                                    + (f", the API server's own watch p99 {v['api_watch_p99']} s"
                                       if v.get("api_watch_p99") is not None else "")
                                    for k, v in (r.get("by_phase") or {}).items() if v["injected"])
                          + f"); target {r['target']}: "
                          f"{'met' if r['met'] else 'NOT met'}"
                          + (f"; draguard's part (after the API server's own watch saw it) p99 "
                             f"{r['after_api_s']['p99']} s: {'met' if r['met_after_api'] else 'NOT met'}"
                             if r.get("after_api_s") else ""))  # fmt: skip
        elif name == "driver-calls":
            table.add_row(name, str(r["median"]), r["unit"],
                          f"fake/upstream prepare latency {r['prepare_latency_ratio_median']}, unprepare "
                          f"{r['unprepare_latency_ratio_median']}, throughput upstream/fake "
                          f"{r['throughput_ratio_median']} ({r['claims']} claims, {r['parallel']} at a time"
                          + (f"; fake reset wait {r['fake_reset_ms']} ms, synced write {r['fsync_ms_median']} ms"
                             if "fsync_ms_median" in r else "")
                          + (f"; Python floor/upstream prepare {r['floor_prepare_latency_ratio_median']}, unprepare "
                             f"{r['floor_unprepare_latency_ratio_median']}"
                             + (f", throughput {r['floor_throughput_ratio_median']}" if "floor_throughput_ratio_median" in r else "")
                             + ": "
                             + ("reachable in Python" if r["reachable_in_python"] else "out of reach for a Python driver here")
                             if "reachable_in_python" in r else "")
                          + f"); target {r['target']}: {'met' if r['met'] else 'NOT met'}")  # fmt: skip
        elif name == "kubelet":
            med = r.get("bind_to_running_median") or {}
            table.add_row(name, f"{med.get('kubelet')} vs {med.get('fake')}", "s bind to Running",
                          f"hollow kubelet vs fake agent; the kubelet starts in {r.get('kubelet_start_s')} s, "
                          f"{r.get('kubelet_rss_idle_mb')} MiB idle, {r.get('kubelet_rss_after_pods_mb')} MiB after "
                          f"the pods")  # fmt: skip
        else:
            detail = f"target {r['target']}: {'met' if r['met'] else 'NOT met'}" if "target" in r else ""
            table.add_row(name, str(r.get("median", "")), str(r.get("unit", "")), detail)
    (console or Console(stderr=True)).print(table)
