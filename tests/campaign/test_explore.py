"""`draguard explore`: bad input, the plans it draws, the files it writes, and two searches on a real
local control plane: one against a mutant finds it and writes a scenario that fails on replay with the
same invariant, one against the correct driver finds nothing.

The starting scenario is ``plain-gang.yaml`` beside this file (a gang of two pods, two GPUs each, on two
nodes, no chaos). Each example is one scenario run (15-20 s on a loaded two-core machine), so the
searches get small budgets; the mutant search is the README's command, one-step plans of one fault
kind (``--fault reset-failure --max-steps 1``), so that it reaches the bug within that budget and
shrinks to a plan whose replay does not hang on a race. docs/explore.md has the searches over every
fault kind.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import draguard.chaos  # noqa: F401  (fault kinds)
from draguard.cli.main import main
from draguard.harness.campaign.explore import LEFT_OUT, SEARCH, applicable_faults, parse_budget, plan_document, plans
from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.core.registry import FAULTS
from draguard.harness.scenario.loader import load_scenario, parse_scenario, problems_of
from draguard.harness.scenario.write import dump_document
from readme_blocks import blocks

ROOT = Path(__file__).resolve().parents[2]
PLAIN = Path(__file__).resolve().parent / "plain-gang.yaml"
LIBRARY = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _document(path: Path):  # type: ignore[no-untyped-def]
    problems, document = problems_of(path.read_text(), str(path))
    assert not problems and document is not None, problems
    return document


# -- bad input: one line, exit 2, nothing started ------------------------------------------------


def _external(tmp_path: Path) -> Path:
    path = tmp_path / "external.yaml"
    path.write_text("apiVersion: draguard.dev/v1alpha1\nkind: Scenario\nmetadata: {name: ext}\nspec:\n"
                    "  driver: {kind: external, name: gpu.example.com, deviceClass: gpu.example.com}\n"
                    "  workloads:\n    - name: w\n      replicas: 1\n      claims:\n        - name: c\n"
                    "          requests: [{name: r, deviceClassName: gpu.example.com}]\n")
    return path


@pytest.mark.parametrize("args, says", [
    (["--mutant", "no-such-mutant"], "--mutant 'no-such-mutant': no such mutant; known: batch-abort-on-error"),
    (["--budget", "0s"], "--budget '0s': must be more than zero"),
    (["--budget", "0"], "--budget '0': expected a duration like 30s, 10m or 1h"),
    (["--budget", "half an hour"], "--budget 'half an hour': expected a duration like 30s, 10m or 1h"),
    (["--fault", "no-such-fault"], "--fault no-such-fault: no such fault kind"),
    (["--fault", "scheduler-restart"], "no fault kind can be explored on this scenario (scheduler-restart: it restarts"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", str(PLAIN), *args, "--report-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert says in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "state" / "draguard" / "clusters").exists()  # no control plane was started
    assert not (tmp_path / "r").exists()


def test_an_installed_driver_or_a_missing_file_cannot_be_explored(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", str(_external(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert "driver kind external (an installed driver): explore needs draguard's fake driver" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["explore", str(tmp_path / "nope.yaml")]) == 2
    assert capsys.readouterr().err.strip() == f"draguard: error: {tmp_path / 'nope.yaml'}: no such file"
    assert not (tmp_path / "state" / "draguard" / "clusters").exists()


def test_a_scenario_on_hollow_kubelets_cannot_be_explored(tmp_path: Path) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text(PLAIN.read_text().replace("topology: {preset: h100-sxm-4}", "topology: {preset: h100-sxm-4}\n"
                                              "      agent: kubelet"))
    with pytest.raises(UsageError, match="run hollow kubelets"):
        from draguard.harness.campaign.explore import Explorer
        Explorer(path, mutant=None, budget=60)


def test_budgets_are_durations() -> None:
    assert parse_budget("30s") == 30 and parse_budget("10m") == 600 and parse_budget("1h") == 3600
    assert parse_budget("1h30m") == 5400


# -- what a search draws and writes ----------------------------------------------------------------


def test_every_registered_fault_kind_is_searched_or_left_out_with_a_reason() -> None:
    assert set(FAULTS.names()) == set(SEARCH) | set(LEFT_OUT) and not set(SEARCH) & set(LEFT_OUT)
    chosen, left = applicable_faults(load_scenario(PLAIN))
    assert set(chosen) == set(SEARCH) and set(left) == set(LEFT_OUT)


def test_an_interposer_fault_needs_the_interposer() -> None:
    chosen, left = applicable_faults(load_scenario(ROOT / "scenarios" / "interposed-prepare-failure.yaml"))
    assert "prepare-failure" in chosen


@pytest.mark.parametrize("path", LIBRARY, ids=[p.stem for p in LIBRARY])
def test_the_writer_writes_what_the_loader_reads_back_unchanged(path: Path) -> None:
    document = _document(path)
    text = dump_document(document, "a header\nof two lines")
    assert text.startswith("# a header\n# of two lines\napiVersion: draguard.dev/v1alpha1\n")
    again = _document_text(text)
    assert again == document


def _document_text(text: str):  # type: ignore[no-untyped-def]
    problems, document = problems_of(text, "<written>")
    assert not problems and document is not None, problems
    return document


_SCENARIO = load_scenario(PLAIN)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans(_SCENARIO, applicable_faults(_SCENARIO)[0], 3))
def test_every_drawn_plan_is_a_valid_scenario_with_the_mutant_and_optional_steps(plan: tuple[dict[str, object], ...]) -> None:
    document = plan_document(_document(PLAIN), plan, "forget-before-reset")
    scenario = parse_scenario(dump_document(document))
    assert scenario.driver.mutant == "forget-before-reset"
    assert len(scenario.timeline) == len(plan) <= 3
    assert all(step.optional and step.target is not None for step in scenario.timeline)
    for step in scenario.timeline:  # pods go a whole gang at a time: a partial gang is no driver's fault
        assert SEARCH[step.fault][0] == "node" or step.target.member == "all"  # type: ignore[union-attr]
    assert scenario.expect == _SCENARIO.expect  # the starting scenario's expectations, unchanged


# -- searches on a local control plane -----------------------------------------------------------


def _verdict(report: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((report / "verdict.json").read_text())
    return data


def _readme_explore(out: Path) -> list[str]:
    """The README's explore example (its explore-commands block), with this file's path and ``out``."""
    (line,) = blocks()["explore"].lines
    args = shlex.split(line)[1:]
    assert args[:2] == ["explore", "tests/campaign/plain-gang.yaml"], line
    args[1] = str(PLAIN)
    args[args.index("--report-dir") + 1] = str(out)
    return args


def test_a_search_finds_forget_before_reset_and_its_file_fails_on_replay_with_no_leak(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "explore"
    code = main(_readme_explore(out))
    captured = capsys.readouterr()
    assert code == 1, captured.out + captured.err
    assert "FOUND no-leak violated" in captured.out
    assert "replay: violated again" in captured.out
    files = sorted(out.glob("*.yaml"))
    assert [f.name for f in files] == ["plain-gang-no-leak.yaml"]
    written = load_scenario(files[0])
    assert written.driver.mutant == "forget-before-reset"
    assert any(step.fault == "reset-failure" for step in written.timeline)
    assert written.expect == load_scenario(PLAIN).expect
    # Failing examples and the replay keep their reports (rendered by draguard.reports, with what each
    # run recorded); the examples that held keep nothing, and no run leaves its state folder behind.
    assert sorted(out.glob("examples/*/verdict.json")), sorted(out.rglob("*"))
    replay = out / "replays" / "plain-gang-no-leak"
    assert (replay / "verdict.json").is_file() and (replay / "plain-gang-no-leak" / "devices").is_dir()
    runs = tmp_path / "state" / "draguard" / "runs"
    assert not runs.exists() or not list(runs.iterdir()), list(runs.iterdir())
    # An ordinary `draguard run` of the file, on a control plane of its own, fails on the same invariant.
    report = tmp_path / "replay"
    assert main(["run", str(files[0]), "--report-dir", str(report), "--report", "json"]) == 1
    verdict = _verdict(report)
    scenario = verdict["scenarios"][0]  # type: ignore[index]
    assert scenario["invariants"]["no-leak"]["status"] == "violated"  # type: ignore[index]
    assert not (tmp_path / "state" / "draguard" / "clusters").exists() or not any(
        (tmp_path / "state" / "draguard" / "clusters").iterdir())


def test_a_search_of_the_correct_driver_finds_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "explore"
    code = main(["explore", str(PLAIN), "--budget", "90s", "--seed", "2", "--report-dir", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "no invariant was violated" in captured.out
    ran = int(captured.out.split(": ", 1)[1].split(" example(s)")[0])
    assert ran >= 3, captured.out  # it did explore: the starting scenario and at least two drawn plans
    assert "s error: " not in captured.err
    assert not list(out.glob("*.yaml"))


# -- the search's bookkeeping, with the run replaced (no cluster) ----------------------------------


def _explorer(tmp_path: Path, budget: float, run: object) -> "Explorer":  # noqa: F821
    import time

    from draguard.harness.campaign.explore import Explorer

    explorer = Explorer(PLAIN, mutant="forget-before-reset", budget=budget, seed=0, out=tmp_path / "r")
    explorer._run = run  # type: ignore[method-assign]
    explorer._t0 = time.monotonic()
    return explorer


def test_a_failing_plan_is_shrunk_to_its_one_needed_step_and_each_plan_runs_once(tmp_path: Path) -> None:
    from draguard.harness.campaign.explore import _Outcome

    ran: list[str] = []

    def run(plan: tuple[dict[str, object], ...]) -> _Outcome:
        ran.append(json.dumps(plan, sort_keys=True))
        hit = any(s["fault"] == "reset-failure" for s in plan)
        return _Outcome(("no-leak",), "leaked") if hit else _Outcome()

    explorer = _explorer(tmp_path, 600, run)
    explorer._search()
    assert len(ran) == len(set(ran))  # a plan drawn again is answered from the cache, never run again
    [found] = explorer.result.found
    best, _ = explorer._best["no-leak"]
    assert found.invariant == "no-leak" and [s["fault"] for s in best] == ["reset-failure"]
    assert explorer.result.stopped == "the smallest failing plan was found (shrinking done)"


def test_a_run_that_breaks_is_an_error_never_a_finding_and_three_in_a_row_stop_the_search(tmp_path: Path) -> None:
    from draguard.harness.campaign.explore import _Outcome

    calls = 0

    def run(plan: tuple[dict[str, object], ...]) -> _Outcome:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("the runner broke")
        return _Outcome(error="cluster gone") if calls >= 3 else _Outcome()

    explorer = _explorer(tmp_path, 600, run)
    with pytest.raises(HarnessError, match="three runs in a row ended in an error, the last: cluster gone"):
        explorer._search()
    assert explorer.result.found == [] and explorer.result.errors == 1  # the runner's own errors count in _run


def test_the_search_stops_when_the_budget_is_spent(tmp_path: Path) -> None:
    from draguard.harness.campaign.explore import _Outcome

    def run(plan: tuple[dict[str, object], ...]) -> _Outcome:
        explorer._durations.append(8.0)  # as if each run took 8 s of a 30 s budget
        explorer._t0 -= 8.0
        return _Outcome()

    explorer = _explorer(tmp_path, 30, run)
    explorer._search()
    # 24 s spent after three runs: a fourth (8 s on average) would pass the budget, so none starts
    assert explorer.result.stopped == "the budget was spent" and len(explorer._durations) == 3
