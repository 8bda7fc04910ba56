"""expect.events judged on a real run: the PodGroup gang sharing a claim on kube-scheduler v1.37.2 shows
kubernetes#140053's PreBind race (FailedScheduling "got allocated elsewhere in the meantime"); the same
Event expected absent, or an Event that never comes expected, fails the scenario, naming it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import draguard.chaos  # noqa: F401  (registers the fault kinds)
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario
from draguard.harness.scenario.types import EventExpectation

pytestmark = pytest.mark.cluster

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"


def test_an_event_expected_absent_that_came_and_one_expected_that_never_came_fail_the_run() -> None:
    sc = load_scenario(LIBRARY / "gang-shared-claim-podgroup.yaml")
    race, fixed = sc.expect.events
    assert race.seen and not fixed.seen
    wrong = (dataclasses.replace(race, seen=False),
             EventExpectation("FailedScheduling", "words no scheduler writes", "ranks"))
    result = Runner(dataclasses.replace(sc, expect=dataclasses.replace(sc.expect, events=wrong)),
                    RunOptions(backend="local")).run()
    assert result.error is None, result.error
    events = [e for e in result.expectation_results if e.kind == "event"]
    assert [(e.rule, e.met) for e in events] == [
        ("no Event FailedScheduling 'got allocated elsewhere in the meantime' about a pod of ranks", False),
        ("Event FailedScheduling 'words no scheduler writes' about a pod of ranks", False),
    ]
    assert events[0].detail.startswith("seen: ranks-") and "got allocated elsewhere" in events[0].detail
    assert events[1].detail == "never seen during the run"
    assert not result.ok and any(s.startswith("event no Event FailedScheduling") for s in result.shortfalls)
    # What the run saw otherwise is as the library file says: the gang ran, every invariant held.
    assert all(e.met for e in result.expectation_results if e.kind == "progress")
    assert all(r.met for r in result.invariants.values()), result.shortfalls
