"""The journal is written before faults and replayed by cleanup after a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from draguard.harness.kube import ApiError, Kube
from draguard.harness.runner.journal import UNDO_HANDLERS, Journal, UndoAction, pending_journals, read, recover


def test_a_fault_is_journaled_with_its_undo_and_recover_replays_it(tmp_path: Path) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text('{"before": true}')
    journal = Journal("abc", tmp_path / "journal")
    journal.run_started(None, "ns", "abc", None)
    journal.fault("1-reset-failure", "reset-failure", UndoAction("write-file", {"path": str(faults), "content": '{"before": true}'}))
    faults.write_text('{"reset_fail": {"forever": true}}')  # the fault, applied after the entry
    assert [e["entry"] for e in read(journal.path)] == ["run", "fault"]
    assert pending_journals(tmp_path / "journal") == [journal.path]

    done = recover(journal.path, log=lambda m: None)

    assert json.loads(faults.read_text()) == {"before": True}
    assert done == ["undid reset-failure (1-reset-failure)"]
    assert not journal.path.exists()


def test_undone_faults_are_not_undone_twice_and_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    marker = tmp_path / "lost"
    journal = Journal("def", tmp_path)
    seq = journal.fault("s", "node-loss", UndoAction("write-file", {"path": str(marker), "content": None}))
    journal.undone(seq)
    with journal.path.open("a") as f:
        f.write('{"entry": "fault", "seq": 9, "undo": {"ki')  # a crash mid-write
    marker.write_text("new state after the undo")
    assert recover(journal.path, log=lambda m: None) == []
    assert marker.exists()


def test_the_journal_of_a_run_in_progress_is_left_alone_until_its_process_is_gone(tmp_path: Path) -> None:
    """``draguard cleanup`` beside a run in progress (another terminal, a parallel test) must not undo its
    faults or stop its processes: that run cleans up after itself. Once its process is gone (a crash,
    SIGKILL), the journal is replayed as before. A reused pid (another start time) is not the owner."""
    import subprocess
    import sys

    import psutil

    marker = tmp_path / "fault"
    marker.write_text("faulty")
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        journal = Journal("live", tmp_path)
        journal.write({"entry": "run", "kubeconfig": None, "namespace": "ns", "label": "live", "clusterDir": None,
                       "owner": {"pid": owner.pid, "started": psutil.Process(owner.pid).create_time()}})
        journal.fault("s", "reset-failure", UndoAction("write-file", {"path": str(marker), "content": "healthy"}))
        assert recover(journal.path, log=lambda m: None) == [f"still running (pid {owner.pid}): left alone"]
        assert marker.read_text() == "faulty" and journal.path.exists()

        reused = Journal("reused", tmp_path)  # the same pid, but not the process that started the run
        reused.write({"entry": "run", "label": "reused", "owner": {"pid": owner.pid, "started": 1.0}})
        assert recover(reused.path, log=lambda m: None) == []
        assert not reused.path.exists()
    finally:
        owner.kill()
        owner.wait()
    assert recover(journal.path, log=lambda m: None) == ["undid reset-failure (s)"]
    assert marker.read_text() == "healthy" and not journal.path.exists()



class _Answers:
    """The API server's answer to the restoring patch (an ApiError status)."""

    def __init__(self, status: int) -> None:
        self.status = status

    def patch(self, *args: Any, **kwargs: Any) -> None:
        raise ApiError(self.status, "PATCH", "/apis/apps/v1/namespaces/drv/daemonsets/plugin", {})


def test_a_patch_undo_of_an_object_gone_since_is_done_and_any_other_refusal_is_not() -> None:
    """A DaemonSet that driver-down patched and that was deleted after the crash: its restoring patch answers
    404, which is nothing left to put back, not an error that stops recover before the journal's other undos
    (a node to thaw). Any other refusal still raises."""
    args = {"kind": "DaemonSet", "name": "plugin", "namespace": "drv", "patch": {"spec": {}}, "patchType": "merge"}
    UNDO_HANDLERS["patch-object"](cast(Kube, _Answers(404)), args)
    with pytest.raises(ApiError):
        UNDO_HANDLERS["patch-object"](cast(Kube, _Answers(403)), args)
