"""Terminal presentations live in draguard.reports: the dry-run plan, repeat rates, the kill matrix,
a load's table, the cluster's tables and the benchmarks' table. No module outside reports/ builds a
rich Table (the commands gather data and print progress lines only)."""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path

from rich.console import Console

import draguard.chaos  # noqa: F401  (fault kinds, for loading library scenarios)
from draguard.harness.campaign.dry_run import plan_of
from draguard.harness.campaign.models import Cell, KillMatrix, Rates
from draguard.harness.scenario.loader import load_scenario
from draguard.harness.result import CheckResult
from draguard.reports.console import (
    check_line,
    check_summary,
    print_allocation_check,
    print_kill_matrix,
    print_plan,
    print_rates,
)

ROOT = Path(__file__).resolve().parents[2]


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, color_system=None), out


def test_no_module_outside_reports_builds_a_table() -> None:
    offenders = [str(p.relative_to(ROOT)) for d in ("harness", "chaos", "conformance", "cli")
                 for p in (ROOT / d).rglob("*.py") if re.search(r"^from rich\.table import", p.read_text(), re.M)]
    assert offenders == []


def test_the_dry_run_plan_names_what_is_created_held_back_and_each_step_with_its_seed() -> None:
    sc = load_scenario(ROOT / "scenarios" / "double-allocation-handoff.yaml")
    console, out = _console()
    print_plan(plan_of(sc, 7), console)
    text = out.getvalue()
    assert "double-allocation-handoff" in text and "seed=7" in text and "mutant=double-allocation" in text
    assert "create pods in order: first-0" in text and "second-0" not in text.split("create pods in order:")[1].splitlines()[0]
    assert "hold back workload second until step arrive (arrive)" in text
    assert re.search(r"step \S*force-delete: force-delete 1s after step arrive started .* seed 7:", text)


def test_repeat_rates_mark_a_flaky_invariant() -> None:
    r = Rates("s", 3, 2, {"no-leak": Counter(held=2, violated=1), "topology": Counter(held=3)},
              {"no-leak": "hold", "topology": "hold"}, {"down": Counter(ok=3)})
    console, out = _console()
    print_rates(r, console)
    lines = {ln.split("│")[1].strip(): ln for ln in out.getvalue().splitlines() if ln.count("│") > 2}
    assert "flaky" in lines["no-leak"] and "held 2/3" in lines["no-leak"] and "violated 1/3" in lines["no-leak"]
    assert "flaky" not in lines["topology"] and "flaky" not in lines["step down"]


def test_the_kill_matrix_names_survivors_false_positives_and_errors() -> None:
    m = KillMatrix(cells=[
        Cell("none", "a", "false-positive", ("invariant:no-leak",), ("no-leak: leaked",)),
        Cell("m1", "a", "caught", ("invariant:no-leak",)),
        Cell("m2", "a", "survived"),
        Cell("m3", "a", "error", error="cluster did not start"),
    ])  # fmt: skip
    console, out = _console()
    print_kill_matrix(m, console)
    text = out.getvalue()
    assert "m1: a (`no-leak`)" in text and "m2: SURVIVED" in text
    assert "FALSE POSITIVE: the correct driver failed a: no-leak: leaked" in text
    assert "ERROR: m3 × a: cluster did not start" in text


def test_the_allocation_check_says_pass_or_fail() -> None:
    console, out = _console()
    print_allocation_check([("claim allocated", True, "2 devices"), ("pod running", False, "timed out")], False, 3.2,
                           console)  # fmt: skip
    text = out.getvalue()
    assert "claim allocated" in text and "timed out" in text and "FAIL in 3.2s" in text


def test_the_suites_print_one_line_per_check_and_a_summary() -> None:
    def check(cid: str, status: str, reason: str = "", duration: float = 0.0) -> CheckResult:
        return CheckResult(cid, "a rule", "a source", status, reason, duration=duration)  # type: ignore[arg-type]

    checks = [check("sanity.registration.type", "passed", duration=0.04),
              check("sanity.prepare.idempotent", "failed", "second prepare returned other devices", 1.2),
              check("sanity.health.stream", "skipped", "driver does not serve the health stream"),
              check("sanity.restart", "error", "restart hook failed")]  # fmt: skip
    assert check_line(checks[0]) == "PASS  sanity.registration.type (0.0s)"
    assert check_line(checks[1]) == "FAIL  sanity.prepare.idempotent (1.2s): second prepare returned other devices"
    assert check_summary("sanity", checks) == "draguard sanity: 1 passed, 1 failed, 1 skipped, 1 error(s)"


def test_the_bench_table_shows_throughput_beside_threshold_and_the_driver_ratios() -> None:
    import json

    from draguard.reports.console import print_bench

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    dra = json.loads((results / "dra-throughput.json").read_text())
    calls = json.loads((results / "driver-calls.json").read_text())
    missing = dict(dra, scheduler_perf_median=None, upstream_scheduler_perf="upstream scheduler_perf is not built")
    out = io.StringIO()
    print_bench({"dra-throughput": dra, "driver-calls": calls}, Console(file=out, width=600))
    print_bench({"dra-throughput": missing}, Console(file=out, width=600))
    text = out.getvalue()
    assert f"upstream threshold {dra['upstream_threshold_pods_per_s']}" in text
    assert f"control plane alone {dra['control_plane_raised_limits_median']}" in text
    assert f"upstream scheduler_perf {dra['scheduler_perf_median']}" in text
    assert "upstream scheduler_perf not run: upstream scheduler_perf is not built" in text
    assert f"harness {dra['harness_machine_share_median']} of the machine" in text
    assert f"prepare lag p99 {dra['prepare_lag_p99_s_median']} s" in text
    assert f"fake/upstream prepare latency {calls['prepare_latency_ratio_median']}" in text
    assert f"fake reset wait {calls['fake_reset_ms']} ms, synced write {calls['fsync_ms_median']} ms" in text
    floor = (f"Python floor/upstream prepare {calls['floor_prepare_latency_ratio_median']}, unprepare "
             f"{calls['floor_unprepare_latency_ratio_median']}, throughput {calls['floor_throughput_ratio_median']}: "
             + ("reachable in Python" if calls["reachable_in_python"] else "out of reach for a Python driver here"))
    assert floor in text


def test_the_bench_table_shows_the_live_detection_latency_and_what_was_missed() -> None:
    import json

    from draguard.reports.console import print_bench

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    det = json.loads((results / "detection.json").read_text())
    missed = dict(det, reported=det["injected"] - 1, met=False)
    out = io.StringIO()
    print_bench({"detection": det}, Console(file=out, width=600))
    print_bench({"detection": missed}, Console(file=out, width=600))
    text = out.getvalue()
    assert f"p99 {det['latency_s']['p99']} s, max {det['latency_s']['max']} s; {det['injected']}/{det['injected']} reported" in text
    assert f"{det['injected'] - 1}/{det['injected']} reported" in text and "NOT met" in text
    for phase, v in (det.get("by_phase") or {}).items():
        if v["injected"]:
            assert f"{phase} p99 {v['p99']} s ({v['reported']}/{v['injected']})" in text
            if v.get("api_watch_p99") is not None:
                assert f"{phase} p99 {v['p99']} s ({v['reported']}/{v['injected']}), the API server's own " \
                       f"watch p99 {v['api_watch_p99']} s" in text


def test_the_bench_table_shows_the_library_wall_side_by_side() -> None:
    import json

    from draguard.reports.console import print_bench

    wall = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "library-wall.json").read_text())
    out = io.StringIO()
    print_bench({"library-wall": wall}, Console(file=out, width=600))
    print_bench({"library-wall": dict(wall, not_ok=["incomplete-cdi-spec (parallel 2, round 1)"])},
                Console(file=out, width=600))
    text = out.getvalue()
    assert f"{wall['scenarios']} scenario(s), sequential, warm binary cache; {wall['parallel']} at a time " \
           f"{wall['parallel_median']} s ({wall['parallel_speedup_median']}x faster)" in text
    assert "NOT ok: incomplete-cdi-spec (parallel 2, round 1)" in text


def test_the_bench_table_renders_every_committed_result_and_a_fresh_kubelet_one() -> None:
    """Each benchmark's result shape prints (``draguard bench kubelet`` ended in a KeyError traceback:
    its result has no single median)."""
    import io
    import json
    from pathlib import Path

    from rich.console import Console

    from draguard.reports.console import print_bench

    results = {}
    for path in sorted((Path(__file__).resolve().parents[2] / "benchmarks" / "results").glob("*.json")):
        r = json.loads(path.read_text())
        results[r.get("benchmark", path.stem)] = r
    assert {"kubelet", "dra-throughput", "detection", "churn", "cluster-up"} <= set(results)
    out = io.StringIO()
    print_bench(results, Console(file=out, width=400))
    text = out.getvalue()
    kubelet = results["kubelet"]["bind_to_running_median"]
    assert f"{kubelet['kubelet']} vs {kubelet['fake']}" in text and "s bind to Running" in text
    assert all(name in text for name in results)
