"""Fault control: written by one process with set_faults, obeyed by the driver in another."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from draguard.harness.driver.fault_control import CRASH_EXIT_CODE, FaultControl, clear_faults, faults_path, set_faults
from draguard.harness.core.errors import UsageError
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

NODE = "n1"


def _control(root: Path) -> FaultControl:
    return FaultControl(NodeDirs(root, NODE).plugin_dir(DEFAULT_DRIVER))


def test_the_driver_sees_a_new_faults_file_without_restarting(tmp_path: Path) -> None:
    fc = _control(tmp_path)
    assert not fc.reset_fails("gpu-0")
    set_faults(tmp_path, NODE, reset_fail={"forever": True, "devices": ["gpu-0"]})
    assert fc.reset_fails("gpu-0") and not fc.reset_fails("gpu-1")
    clear_faults(tmp_path, NODE)
    assert not fc.reset_fails("gpu-0")


def test_counted_faults_fire_count_times_even_across_a_driver_restart(tmp_path: Path) -> None:
    set_faults(tmp_path, NODE, reset_fail={"count": 2})
    assert _control(tmp_path).reset_fails("gpu-0")
    restarted = _control(tmp_path)
    assert restarted.reset_fails("gpu-1")
    assert not restarted.reset_fails("gpu-0")
    set_faults(tmp_path, NODE, reset_fail={"count": 1})  # a new generation starts counting again
    assert restarted.reset_fails("gpu-0") and not restarted.reset_fails("gpu-0")


def test_claims_are_matched_by_uid_name_or_namespace_and_name(tmp_path: Path) -> None:
    fc = _control(tmp_path)
    set_faults(tmp_path, NODE, prepare_fail={"claims": ["u1", "c2", "ns/c3"]})
    assert fc.prepare_fails("u1", "x", "y") and fc.prepare_fails("u", "x", "c2") and fc.prepare_fails("u", "ns", "c3")
    assert not fc.prepare_fails("u", "other", "c3")
    set_faults(tmp_path, NODE, prepare_fail={"claims": "all"}, prepare_hang={"seconds": 2.5, "count": 1})
    assert fc.prepare_fails("any", "x", "y")
    assert fc.prepare_hang("u", "x", "y") == 2.5 and fc.prepare_hang("u", "x", "y") == 0


@pytest.mark.parametrize(
    ("faults", "fragment"),
    [
        ({"reset_fail": {"count": 1, "forever": True}}, "exactly one of 'count' and 'forever"),
        ({"crash_at": {"point": "nowhere"}}, "crash_at.point"),
        ({"prepare_hang": {"seconds": -1}}, "prepare_hang.seconds"),
        ({"explode": {}}, "explode"),
    ],
)
def test_invalid_faults_are_refused_before_anything_is_written(
    tmp_path: Path, faults: dict, fragment: str  # type: ignore[type-arg]
) -> None:
    with pytest.raises(UsageError, match="faults for node n1") as err:
        set_faults(tmp_path, NODE, **faults)
    assert fragment in str(err.value)
    assert not faults_path(tmp_path, NODE).exists()


def test_a_hand_edited_broken_file_is_ignored_and_the_previous_faults_stay(tmp_path: Path) -> None:
    fc = _control(tmp_path)
    set_faults(tmp_path, NODE, unhealthy={"devices": ["gpu-1"]})
    assert fc.unhealthy() == {"gpu-1": "simulated hardware failure"}
    path = faults_path(tmp_path, NODE)
    time.sleep(0.01)
    path.write_text("{broken")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert fc.unhealthy() == {"gpu-1": "simulated hardware failure"}


_CRASHER = """
import sys
from pathlib import Path
from draguard.harness.driver.fault_control import FaultControl
fc = FaultControl(Path(sys.argv[1]))
for i in range(5):
    fc.crash("unprepare.during_reset")
    print(i, flush=True)
"""


def test_crash_at_exits_like_kill_9_after_the_given_passes_and_only_once(tmp_path: Path) -> None:
    set_faults(tmp_path, NODE, crash_at={"point": "unprepare.during_reset", "after": 2})
    plugin_dir = str(NodeDirs(tmp_path, NODE).plugin_dir(DEFAULT_DRIVER))
    first = subprocess.run([sys.executable, "-c", _CRASHER, plugin_dir], capture_output=True, text=True)
    assert first.returncode == CRASH_EXIT_CODE
    assert first.stdout.split() == ["0", "1"]
    second = subprocess.run([sys.executable, "-c", _CRASHER, plugin_dir], capture_output=True, text=True)
    assert second.returncode == 0, "a restarted driver must not crash again at the same fault"
    used = json.loads((Path(plugin_dir) / "faults.used.json").read_text())
    assert used["used"]["crash_at.fired"] == 1
