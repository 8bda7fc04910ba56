"""The checkpoint: round trip, atomic replacement, damage detection and the no-leak rule."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from draguard.harness.driver.state import (
    Checkpoint,
    ClaimRecord,
    ClaimState,
    DeviceRecord,
    DeviceState,
    PreparedDevice,
)
from draguard.harness.core.errors import HarnessError
from draguard.harness.core.fsio import atomic_write, cleanup_temporaries


class Crash(Exception):
    pass


def _sample() -> Checkpoint:
    cp = Checkpoint("gpu.draguard.dev", "n")
    cp.claims["u1"] = ClaimRecord("u1", "ns", "c", ClaimState.PREPARE_COMPLETED, [PreparedDevice(["r"], "n", "gpu-0", ["x"])])
    cp.devices["gpu-0"] = DeviceRecord(DeviceState.PREPARED, "u1")
    return cp


def test_a_checkpoint_reads_back_what_was_saved(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    _sample().save(path)
    assert Checkpoint.load(path, "gpu.draguard.dev", "n") == _sample()


@pytest.mark.parametrize("point", ["checkpoint.mid_write", "checkpoint.before_rename"])
def test_a_crash_while_writing_leaves_the_previous_checkpoint_intact(tmp_path: Path, point: str) -> None:
    path = tmp_path / "checkpoint.json"
    Checkpoint("gpu.draguard.dev", "n").save(path)
    before = path.read_bytes()

    def crash(p: str) -> None:
        if p == point:
            raise Crash(p)

    with pytest.raises(Crash):
        _sample().save(path, crash=crash)
    assert path.read_bytes() == before
    leftovers = list(tmp_path.glob(".checkpoint.json.*.tmp"))
    assert len(leftovers) == 1
    cleanup_temporaries(tmp_path, "checkpoint.json.")
    assert list(tmp_path.glob(".*.tmp")) == []


def test_atomic_write_replaces_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    atomic_write(path, b"a" * 1000)
    atomic_write(path, b"short")
    assert path.read_bytes() == b"short"


@pytest.mark.parametrize("content", ["{not json", '{"version": 99}', '{"version": 1, "driver": "d"}'])
def test_a_damaged_checkpoint_is_an_error_naming_the_file_never_a_silent_reset(tmp_path: Path, content: str) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text(content)
    with pytest.raises(HarnessError, match="checkpoint is damaged") as err:
        Checkpoint.load(path, "d", "n")
    assert str(path) in str(err.value)


def test_a_missing_checkpoint_means_every_device_is_free(tmp_path: Path) -> None:
    cp = Checkpoint.load(tmp_path / "none.json", "d", "n")
    assert cp.claims == {} and cp.devices == {} and cp.leaks() == []


def test_leaks_names_orphaned_devices_and_devices_held_twice() -> None:
    cp = _sample()
    assert cp.leaks() == []
    cp.devices["gpu-1"] = DeviceRecord(DeviceState.FAILED, "gone")
    cp.devices["gpu-2"] = DeviceRecord(DeviceState.RESETTING, None)
    cp.claims["u2"] = ClaimRecord("u2", "ns", "d", ClaimState.PREPARE_COMPLETED, [PreparedDevice(["r"], "n", "gpu-0")])
    assert cp.leaks() == [
        "device gpu-1 is failed for claim gone, which the driver forgot",
        "device gpu-2 is resetting but held by no claim",
        "device gpu-0 is handed to 2 claims: u1, u2",
    ]


def test_the_checkpoint_file_is_plain_json_other_tools_can_read(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    _sample().save(path)
    raw = json.loads(path.read_text())
    assert raw["claims"]["u1"]["state"] == "PrepareCompleted"
    assert raw["devices"]["gpu-0"] == {"state": "prepared", "claim": "u1", "message": ""}


@pytest.mark.parametrize(("sync", "expected"), [
    ("full", ["fsync {tmp}", "rename checkpoint.json", "fsync {dir}"]),
    ("file", ["fsync {tmp}", "rename checkpoint.json"]),
    ("none", ["rename checkpoint.json"]),
])  # fmt: skip
def test_atomic_write_syncs_the_file_before_the_rename_and_the_directory_after_it(
    tmp_path: Path, synced_writes: list[tuple[str, Path]], sync: str, expected: list[str]
) -> None:
    _sample().save(tmp_path / "checkpoint.json", sync=sync)  # type: ignore[arg-type]
    tmp = tmp_path / f".checkpoint.json.{os.getpid()}.{threading.get_ident()}.tmp"
    events = [f"fsync {path}" if op == "sync" else f"rename {path.name}" for op, path in synced_writes]
    assert events == [e.format(tmp=tmp, dir=tmp_path) for e in expected]
    assert Checkpoint.load(tmp_path / "checkpoint.json", "gpu.draguard.dev", "n") == _sample()


def test_threads_replacing_the_same_file_at_once_never_lose_each_others_temporary_file(tmp_path: Path) -> None:
    """Two chaos steps switching one node's faults at the same moment write the same file from two
    threads of one process; each write is whole, none fails with its temporary file renamed away."""
    target = tmp_path / "faults.json"
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            for _ in range(200):
                atomic_write(target, json.dumps({"writer": i}).encode(), sync="none")
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert json.loads(target.read_text())["writer"] in range(4)
    assert list(tmp_path.glob(".faults.json.*.tmp")) == []


def test_a_cache_folder_is_published_whole_or_not_at_all(tmp_path: Path) -> None:
    from draguard.harness.core.fsio import publishing

    final = tmp_path / "entry"
    with publishing(final) as partial:
        (partial / "binary").write_text("v1")
        assert not final.exists() and partial.name == "entry.partial"
    assert (final / "binary").read_text() == "v1" and not partial.exists()
    with pytest.raises(RuntimeError), publishing(final) as partial:
        (partial / "binary").write_text("v2, half")
        raise RuntimeError("the build broke")
    assert (final / "binary").read_text() == "v1" and not partial.exists()  # the old entry stays whole
    (tmp_path / "entry.partial").mkdir()
    (tmp_path / "entry.partial" / "leftover").write_text("from a killed build")
    with publishing(final) as partial:
        assert list(partial.iterdir()) == []  # a killed build's leftovers never reach the cache
        (partial / "binary").write_text("v3")
    assert sorted(p.name for p in final.iterdir()) == ["binary"] and (final / "binary").read_text() == "v3"
