"""The benchmark results as one Markdown page (``docs/benchmarks.md``), rendered by ``draguard bench --doc``.

Reads the result files ``draguard bench`` writes (``benchmarks/results/*.json``: one JSON object per
benchmark run, with its figures, raw samples, ``date``, ``machine`` and ``command``) and nothing
else: every figure on the page comes from a file, next to the date, machine and command of the run
that measured it. A pure function of the files, so a test can render the committed results again
and compare them with the committed page.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .files import write_atomic

__all__ = ["load_results", "render_benchmarks", "write_benchmarks_doc"]

Result = dict[str, Any]
Rows = list[tuple[str, str]]

WHAT = {
    "cluster-up": "A local control plane from a warm binary cache until the API serves DRA v1.",
    "fake-nodes": "Fake nodes in one process renewing their Leases, with nothing scheduled: the cores they use and "
                  "how fresh their Leases stay.",
    "watch-decode": "ResourceSlice watch events turned into objects: plain JSON (what draguard does) against the "
                    "official client's typed models, alternately in one run.",
    "scenario-load": "Validating every scenario file of the library.",
    "dra-throughput": "Upstream scheduler_perf's `SchedulingWithResourceClaimTemplate` shape (nodes with devices, "
                      "one template claim a pod) run by draguard end to end and, side by side in each repeat, by "
                      "the control plane alone (upstream client limits, raised limits, raised limits with every "
                      "node's Lease renewed) and by upstream scheduler_perf itself when it is built.",
    "invariant-cost": "One judging round of the continuous invariants on a synthetic snapshot: a full round, a round "
                      "with 1% of the claims changed, and a backlog (every pod pending, its claim not yet in its "
                      "status); the detection latency is the judging interval plus the p99 round.",
    "detection": "Double allocations written through the API during a live run, timed until the runner reports "
                 "them; split into the write, the API server showing it to a watcher of its own, and draguard's "
                 "part.",
    "churn": "`draguard load` against fake nodes and the driver host at a target rate of operations (gangs, "
             "template claims, shared claims), created, run and deleted.",
    "driver-calls": "The fake driver's prepare and unprepare against the upstream DRA test driver's, over the DRA "
                    "socket as the kubelet calls them, on the same node layout; beside them a Python floor (a gRPC "
                    "server that reads the claim and keeps nothing).",
    "library-wall": "The scenario library's wall time, warm: one scenario after the other, and several at a time "
                    "(`draguard run --parallel`), alternating.",
    "kubelet": "The hollow DRA kubelet's start-up time and memory, and one pod's bind to Running on a hollow kubelet "
               "and on the fake agent, alternately.",
    "kind": "The offline kind node image, cold and warm, and `kind create` with one control plane and two workers "
            "until every node is Ready.",
}
"""One line per benchmark: what it measures (the figures say how it came out)."""


def load_results(results_dir: Path) -> list[tuple[Path, Result]]:
    """Every result file in ``results_dir``, by benchmark name and then date."""
    found = []
    for path in sorted(results_dir.glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(result, dict) or "benchmark" not in result:
            raise ValueError(f"{path}: not a draguard bench result (no 'benchmark' field)")
        found.append((path, result))
    return sorted(found, key=lambda pr: (pr[1]["benchmark"], str(pr[1].get("date", "")), pr[0].name))


def _num(value: Any, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        value = f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    return f"{value} {unit}".rstrip()


def _share(value: Any) -> str:
    return "–" if value is None else f"{value * 100:.1f}% of the machine"


def _span(samples: Iterable[Any], unit: str = "") -> str:
    values = [s for s in samples if isinstance(s, (int, float))]
    return f"{_num(min(values))}–{_num(max(values), unit)}" if values else "–"


def _cluster_up(r: Result) -> Rows:
    return [("median time to a serving API", _num(r["median"], "s")), ("samples", _span(r["samples"], "s"))]


def _fake_nodes(r: Result) -> Rows:
    runs = r["samples"]
    return [("nodes", _num(r.get("nodes"))), ("median cores used", _num(r["median"], "cores")),
            ("oldest Lease seen", _span([s.get("lease_max_age_s") for s in runs], "s")),
            ("stale Leases", _num(sum(s.get("stale_leases", 0) for s in runs))),
            ("start-up", _span([s.get("start_s") for s in runs], "s"))]  # fmt: skip


def _watch_decode(r: Result) -> Rows:
    return [("plain JSON, median", _num(r["plain_median"], r["unit"])),
            ("typed models, median", _num(r["typed_median"], r["unit"])),
            ("typed over plain", f"{_num(r['ratio_typed_over_plain'])}×")]  # fmt: skip


def _scenario_load(r: Result) -> Rows:
    return [("files", _num(r.get("files"))), ("median", _num(r["median"], r["unit"])),
            ("samples", _span(r["samples"], "ms"))]  # fmt: skip


def _dra_throughput(r: Result) -> Rows:
    rows = [("shape", f"{r['nodes']} nodes × {r['devices_per_node']} devices, {r['pods']} pods"),
            ("upstream threshold", f"{_num(r.get('upstream_threshold_pods_per_s'), 'pods/s')} "
                                   f"({r.get('upstream_threshold_source', 'source not recorded')})"),
            ("draguard end to end, scheduled", _num(r["median"], "pods/s")),
            ("draguard, Running", _num(r.get("draguard_running_per_s_median"), "pods/s")),
            ("control plane alone, upstream client limits", _num(r.get("control_plane_default_limits_median"), "pods/s")),
            ("control plane alone, limits 500/1000", _num(r.get("control_plane_raised_limits_median"), "pods/s")),
            ("the same with every node's Lease renewed", _num(r.get("control_plane_with_leases_median"), "pods/s")),
            ("upstream scheduler_perf", _num(r.get("scheduler_perf_median"), "pods/s")
             if r.get("scheduler_perf_median") is not None else f"not run: {r.get('upstream_scheduler_perf')}"),
            ("draguard / control plane alone (500/1000)", _num(r.get("draguard_over_control_plane_median"))),
            ("draguard / scheduler_perf", _num(r.get("draguard_over_scheduler_perf_median"))),
            ("harness CPU over the run", _share(r.get("harness_machine_share_median"))),
            ("harness CPU while scheduling", _share(r.get("harness_machine_share_while_scheduling_median"))),
            ("harness peak memory", _num(r.get("harness_peak_rss_mib_median"), "MiB")),
            ("bind to Running, p99", _num(r.get("prepare_lag_p99_s_median"), "s")),
            ("oldest node Lease seen", _num(r.get("lease_age_max_s_median"), "s"))]  # fmt: skip
    return rows


def _invariant_cost(r: Result) -> Rows:
    rows = []
    for size in r.get("sizes", []):
        rows.append((f"{size['nodes']} nodes, {size['pods']} pods: full round median / p99",
                     f"{_num(size['median_ms'])} / {_num(size['p99_ms'], 'ms')}"))
        rows.append((f"{size['nodes']} nodes, {size['pods']} pods: 1% changed; backlog",
                     f"{_num(size.get('incremental_1pct_changed_median_ms'), 'ms')}; "
                     f"{_num(size.get('backlog_median_ms'), 'ms')}"))
        rows.append((f"{size['nodes']} nodes, {size['pods']} pods: detection latency p99",
                     _num(size.get("detection_latency_p99_s"), "s")))
    rows.append(("judging interval", _num(r.get("interval_s"), "s")))
    return rows


def _detection(r: Result) -> Rows:
    lat = r["latency_s"]
    rows = [("shape", f"{r['nodes']} nodes × {r['devices_per_node']} devices, {r['pods']} pods"),
            ("reported", f"{r['reported']} of {r['injected']}"),
            ("latency p50 / p99 / max", f"{_num(lat['p50'])} / {_num(lat['p99'])} / {_num(lat['max'], 's')}")]
    for phase, v in (r.get("by_phase") or {}).items():
        rows.append((f"{phase}: reported; p50 / p99", f"{v['reported']} of {v['injected']}; "
                                                      f"{_num(v['p50'])} / {_num(v['p99'], 's')}"))
        if v.get("api_watch_p99") is not None:
            rows.append((f"{phase}: the write's round trip p99; seen by a watcher of its own p99",
                         f"{_num(v.get('write_p99'), 's')}; {_num(v['api_watch_p99'], 's')}"))
            rows.append((f"{phase}: draguard's part p50 / p99", f"{_num(v.get('after_api_p50'))} / "
                                                                  f"{_num(v.get('after_api_p99'), 's')}"))
    if r.get("after_api_s"):
        rows.append(("draguard's part, all phases, p99", _num(r["after_api_s"]["p99"], "s")))
    return rows


def _churn(r: Result) -> Rows:
    runs = r["samples"]
    return [("nodes", _num(r.get("nodes"))), ("target rate", _num(r.get("target_rate"), "operations/s")),
            ("achieved, median", _num(r["median"], "operations/s")),
            ("claims, median", _num(r.get("claims_per_s_median"), "claims/s")),
            ("p99 to Running, median of the runs", _num(r.get("p99_running_ms_median"), "ms")),
            ("runs that fell behind", f"{sum(1 for s in runs if s.get('fell_behind'))} of {len(runs)}"),
            ("failed operations; violations", f"{sum(s.get('failures', 0) for s in runs)}; "
                                              f"{sum(len(s.get('violations') or {}) for s in runs)}")]  # fmt: skip


def _driver_calls(r: Result) -> Rows:
    rows = [("claims; threads for calls/s", f"{r['claims']}; {r['parallel']}"),
            ("fake driver's modelled reset", _num(r.get("fake_reset_ms"), "ms")),
            ("a synced write on this machine", _num(r.get("fsync_ms_median"), "ms"))]
    cpu = r.get("cpu_ms_per_call_median") or {}
    for name, prefix in (("upstream test driver", "upstream"), ("fake (driver host)", "fake"),
                         ("Python floor", "floor")):  # fmt: skip
        prepare = r["median"] if prefix == "fake" else r.get(f"{prefix}_prepare_p50_ms_median")
        rows.append((f"{name}: prepare p50 / unprepare p50",
                     f"{_num(prepare)} / {_num(r.get(f'{prefix}_unprepare_p50_ms_median'), 'ms')}"))
        rows.append((f"{name}: calls/s; CPU per call", f"{_num(r.get(f'{prefix}_calls_per_s_median'))}; "
                                                        f"{_num(cpu.get(name), 'ms')}"))
    rows.append(("fake / upstream: prepare, unprepare latency", f"{_num(r.get('prepare_latency_ratio_median'))}, "
                                                                 f"{_num(r.get('unprepare_latency_ratio_median'))}"))
    rows.append(("upstream / fake: calls/s", _num(r.get("throughput_ratio_median"))))
    if "reachable_in_python" in r:
        rows.append(("the floor as fast as upstream (reachable in Python)", _num(r["reachable_in_python"])))
    return rows


def _library_wall(r: Result) -> Rows:
    rows = [("scenarios", _num(r.get("scenarios"))), (f"{r.get('mode', 'sequential')}", _num(r["median"], "s"))]
    if "parallel_median" in r:
        rows.append((f"{r['parallel']} at a time", f"{_num(r['parallel_median'], 's')} "
                                                   f"({_num(r.get('parallel_speedup_median'))}× faster)"))
    rows.append(("scenarios that did not meet their expectations", ", ".join(r.get("not_ok") or []) or "none"))
    return rows


def _kubelet(r: Result) -> Rows:
    med = r.get("bind_to_running_median") or {}
    samples = r.get("samples") or {}
    return [("hollow kubelet start-up", _num(r.get("kubelet_start_s"), "s")),
            ("its memory idle; after the pods", f"{_num(r.get('kubelet_rss_idle_mb'), 'MiB')}; "
                                                f"{_num(r.get('kubelet_rss_after_pods_mb'), 'MiB')}"),
            ("bind to Running: hollow kubelet, median (samples)",
             f"{_num(med.get('kubelet'), 's')} ({_span(samples.get('kubelet', []), 's')})"),
            ("bind to Running: fake agent, median (samples)",
             f"{_num(med.get('fake'), 's')} ({_span(samples.get('fake', []), 's')})")]  # fmt: skip


def _kind(r: Result) -> Rows:
    stages = r.get("image_cold_stages") or {}
    versions = r.get("versions") or {}
    return [("node image, cold (root filesystem; import)", f"{_num(r.get('image_cold_s'), 's')} "
                                                         f"({_num(stages.get('rootfs_s'), 's')}; {_num(stages.get('import_s'), 's')})"),
            ("node image, cold: what was kept", str(r.get("image_cold_note", "–"))),
            ("node image, cached: import; warm", f"{_num(r.get('image_cached_import_s'), 's')}; {_num(r.get('image_warm_s'), 's')}"),
            (f"`kind create`, 1 control plane + {r.get('workers', '?')} workers, median (samples)",
             f"{_num(r.get('kind_create_median'), 's')} ({_span(r.get('kind_create_samples', []), 's')})"),
            ("until every node is Ready, median (samples)",
             f"{_num(r.get('median'), 's')} ({_span(r.get('nodes_ready_samples', []), 's')})"),
            ("versions", ", ".join(f"{k} {v}" for k, v in versions.items()) or "–")]  # fmt: skip


def _generic(r: Result) -> Rows:
    return [(k, _num(v)) for k, v in r.items() if isinstance(v, (int, float, str)) and k.endswith("median")]


FIGURES: dict[str, Callable[[Result], Rows]] = {
    "cluster-up": _cluster_up, "fake-nodes": _fake_nodes, "watch-decode": _watch_decode,
    "scenario-load": _scenario_load, "dra-throughput": _dra_throughput, "invariant-cost": _invariant_cost,
    "detection": _detection, "churn": _churn, "driver-calls": _driver_calls, "library-wall": _library_wall,
    "kubelet": _kubelet, "kind": _kind,
}  # fmt: skip


def _machine(m: dict[str, Any]) -> str:
    parts = [f"{m.get('cpus', '?')} CPUs"]
    if m.get("cpu_model"):
        parts[0] += f" ({m['cpu_model']})"
    if m.get("memory_gib") is not None:
        parts.append(f"{m['memory_gib']} GiB")
    parts += [p for p in (m.get("platform"), f"Python {m['python']}" if m.get("python") else None) if p]
    if m.get("load_avg_1m") is not None:
        parts.append(f"load average {m['load_avg_1m']} at the end")
    return ", ".join(parts)


def _date(r: Result) -> str:
    date = str(r.get("date", ""))
    return date.replace("T", " ").replace("Z", " UTC") if date else "date not recorded"


def _section(path: Path, r: Result, link: str) -> list[str]:
    lines = [f"Measured {_date(r)} on {_machine(r.get('machine') or {})}; {r.get('repeat', '?')} sample(s), "
             f"medians shown; file [`{path.name}`]({link}).", "", "```sh", r.get("command", "command not recorded"),
             "```", "", "| figure | value |", "|---|---|"]  # fmt: skip
    rows = FIGURES.get(r["benchmark"], _generic)(r)
    lines += [f"| {what} | {value} |" for what, value in rows]
    if "target" in r:
        lines += ["", f"Target: {r['target']}: **{'met' if r.get('met') else 'not met'}**."]
    return lines + [""]


def render_benchmarks(results_dir: Path, doc_path: Path) -> str:
    """The page for ``doc_path``, with links to the result files relative to it."""
    results = load_results(results_dir)
    lines = ["# Benchmarks", "",
             "<!-- generated from benchmarks/results/*.json by `draguard bench --doc docs/benchmarks.md`; do not edit "
             "by hand (tests/docs/test_benchmarks_doc.py renders it again and compares) -->", "",
             "Every figure here is read from a result file that `draguard bench` wrote, and each section names the "
             "file, the date (UTC), the machine and the command that measured it. Figures are medians of the "
             "samples; the file holds the raw samples. The load average says how busy the machine was: compare "
             "figures measured side by side in one run (ratios), not absolute figures across runs or machines. "
             "[The CLI reference](cli.md#draguard-bench) says how to run each benchmark.", "",
             "| benchmark | measured (UTC) | command |", "|---|---|---|"]  # fmt: skip
    lines += [f"| [{r['benchmark']}](#{r['benchmark']}) | {_date(r)} | `{r.get('command', '')}` |" for _, r in results]
    lines.append("")
    done: set[str] = set()
    for path, r in results:
        name = r["benchmark"]
        if name not in done:
            done.add(name)
            lines += [f"## {name}", "", WHAT.get(name, ""), ""] if name in WHAT else [f"## {name}", ""]
        link = os.path.relpath(path.resolve(), doc_path.resolve().parent)
        lines += _section(path, r, link)
    return "\n".join(lines).rstrip("\n") + "\n"


def write_benchmarks_doc(results_dir: Path, doc_path: Path) -> Path:
    """Render the page and write it whole (a temporary file, then a rename)."""
    return write_atomic(doc_path, render_benchmarks(results_dir, doc_path))
