"""How often a driver fault fired, as a scenario step reads it; merged faults keep each other's counts."""

from __future__ import annotations

from pathlib import Path

from draguard.harness.driver.fault_control import FaultControl, fired, set_faults
from draguard.harness.driver.inflight import CallsInFlight, in_flight
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

NODE = "n1"


def _control(root: Path) -> FaultControl:
    return FaultControl(NodeDirs(root, NODE).plugin_dir(DEFAULT_DRIVER))


def test_every_firing_is_counted_with_or_without_a_count(tmp_path: Path) -> None:
    fc = _control(tmp_path)
    set_faults(tmp_path, NODE, reset_fail={"forever": True})
    assert fired(tmp_path, NODE, DEFAULT_DRIVER, "reset_fail") == 0
    assert fc.reset_fails("gpu-0") and fc.reset_fails("gpu-1")
    assert fired(tmp_path, NODE, DEFAULT_DRIVER, "reset_fail") == 2
    assert fired(tmp_path, NODE, DEFAULT_DRIVER, "prepare_fail") == 0


def test_a_fault_that_never_struck_reads_zero(tmp_path: Path) -> None:
    fc = _control(tmp_path)
    set_faults(tmp_path, NODE, prepare_fail={"claims": ["only-this"], "count": 1})
    assert not fc.prepare_fails("u", "ns", "other")
    assert fired(tmp_path, NODE, DEFAULT_DRIVER, "prepare_fail") == 0


def test_merging_a_fault_keeps_the_others_and_their_counts(tmp_path: Path) -> None:
    fc = _control(tmp_path)
    set_faults(tmp_path, NODE, merge=True, reset_fail={"count": 2})
    assert fc.reset_fails("gpu-0")
    set_faults(tmp_path, NODE, merge=True, unprepare_fail={"count": 1})
    assert fc.unprepare_fails("u", "ns", "c") and not fc.unprepare_fails("u", "ns", "c")
    assert fc.reset_fails("gpu-0") and not fc.reset_fails("gpu-0"), "reset_fail restarted its count"
    assert fired(tmp_path, NODE, DEFAULT_DRIVER, "reset_fail") == 2
    assert fired(tmp_path, NODE, DEFAULT_DRIVER, "unprepare_fail") == 1
    set_faults(tmp_path, NODE, merge=True, reset_fail=None)  # switch one kind off: the other stays
    assert not fc.reset_fails("gpu-0") and fc.current().unprepare_fail is not None


def test_calls_in_flight_are_seen_by_another_reader_and_a_dead_writer_counts_nothing(tmp_path: Path) -> None:
    calls = CallsInFlight(tmp_path)
    assert in_flight(tmp_path) == 0
    with calls.call():
        with calls.call():
            assert in_flight(tmp_path) == 2
    assert in_flight(tmp_path) == 0
    (tmp_path / "calls.json").write_text('{"pid": 999999999, "inFlight": 3}')
    assert in_flight(tmp_path) == 0


def test_calls_in_flight_rewritten_in_place_read_right_across_digit_counts_and_a_restart(tmp_path: Path) -> None:
    import contextlib

    calls = CallsInFlight(tmp_path)
    with contextlib.ExitStack() as stack:
        for _ in range(12):
            stack.enter_context(calls.call())
        assert in_flight(tmp_path) == 12
        stack.close()  # 12 -> 0: each shorter record overwrites a longer one in place
        assert in_flight(tmp_path) == 0
    with calls.call():
        # A restarted driver (a driver host starts a node's objects again) gets a file of its own: what
        # the previous instance's lingering calls write no longer counts.
        restarted = CallsInFlight(tmp_path)
        assert in_flight(tmp_path) == 0
        with restarted.call():
            assert in_flight(tmp_path) == 1
    assert in_flight(tmp_path) == 0
