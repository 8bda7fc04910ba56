"""Readers that poll a file keep what they parsed while its stamp (mtime, size) stays the same, but only
when the stamp vouches for the read: on a coarse file clock a rewrite of the same size in the tick of
a read keeps the stamp, and trusting it kept stale content (a device's health, a driver's books)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from draguard.harness.devices.nvml import FakeNvml
from draguard.harness.devices.truth import DeviceTruth, InstalledDevice
from draguard.harness.core import fsio as state
from draguard.harness.core.fsio import STAMP_SETTLED_AFTER, vouches


def test_a_stamp_vouches_only_for_a_read_made_after_its_mtime_settled() -> None:
    now = time.time()
    recent = (int((now - STAMP_SETTLED_AFTER / 2) * 1e9), 100)
    old = (int((now - STAMP_SETTLED_AFTER - 1) * 1e9), 100)
    assert vouches((old, None), now)
    assert not vouches((recent,), now)
    assert not vouches((old, recent), now)


def _machine(tmp_path: Path) -> DeviceTruth:
    truth = DeviceTruth(tmp_path, "n0")
    truth.install([InstalledDevice("gpu-0", "GPU-0")])
    return truth


def test_health_changed_in_the_tick_of_the_last_read_is_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    machine = _machine(tmp_path)
    nvml = FakeNvml(DeviceTruth(tmp_path, "n0"))
    tick = (time.time_ns(), 4096)  # a coarse clock: the rewrite below keeps the stamp
    monkeypatch.setattr(state, "file_stamp", lambda path: tick)
    assert nvml.unhealthy() == {}
    machine.set_health("gpu-0", "XID 79: fallen off the bus")
    assert nvml.unhealthy() == {"gpu-0": "XID 79: fallen off the bus"}


def test_a_settled_stamp_is_trusted_the_file_is_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _machine(tmp_path)
    truth = DeviceTruth(tmp_path, "n0")
    nvml = FakeNvml(truth)
    settled = (time.time_ns() - int((STAMP_SETTLED_AFTER + 1) * 1e9), 4096)
    monkeypatch.setattr(state, "file_stamp", lambda path: settled)
    reads = []
    real = truth.read
    monkeypatch.setattr(truth, "read", lambda: reads.append(1) or real())
    for _ in range(3):
        assert nvml.unhealthy() == {}
    assert len(reads) == 1
