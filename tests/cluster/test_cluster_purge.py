"""``draguard cluster down --purge`` on a cluster ``draguard cluster up`` started in another process
stops every component and removes the run directory in one call; after a plain ``down`` it removes
what is left. Through the CLI as a user runs it (each command its own process); and the stop of an
attached cluster waits for a component that takes a while to die after SIGKILL (a process with a
large address space: etcd after a long run), instead of calling it "could not stop"."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from draguard.harness.cluster import binaries as bins
from draguard.harness.cluster.local import LocalCluster
from draguard.harness.core.process import pid_alive

SLOW_TO_DIE = ("b = bytearray(512 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
               "print('ready', flush=True)\nimport time; time.sleep(120)")


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "draguard.cli.main", "cluster", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def name() -> Iterator[str]:
    if not bins.cache_entry().exists() and not os.environ.get("DRAGUARD_BIN_DIR"):
        pytest.skip(f"no control-plane binaries in {bins.cache_entry()} (make binaries builds them)")
    n = f"purge-{uuid.uuid4().hex[:6]}"
    yield n
    cluster = LocalCluster(n)
    if cluster.state_file.exists():  # a failed test must not leave a control plane running
        LocalCluster.attach(n).down(remove=True)


def _up(name: str) -> tuple[Path, list[int]]:
    up = _cli("up", "--name", name)
    assert up.returncode == 0, up.stderr[-2000:]
    cluster = LocalCluster(name)
    pids = [int(p) for p in json.loads(cluster.state_file.read_text())["pids"].values()]
    assert pids and all(pid_alive(p) for p in pids)
    return cluster.dir, pids


def test_down_purge_stops_a_cluster_started_by_up_and_removes_its_directory(name: str) -> None:
    run_dir, pids = _up(name)
    down = _cli("down", "--name", name, "--purge")
    assert down.returncode == 0, down.stderr
    assert "could not stop" not in down.stderr
    assert not any(pid_alive(p) for p in pids)
    assert not run_dir.exists()


def test_down_then_down_purge_removes_what_the_first_down_left(name: str) -> None:
    run_dir, pids = _up(name)
    assert _cli("down", "--name", name).returncode == 0
    assert run_dir.exists() and not any(pid_alive(p) for p in pids)
    purge = _cli("down", "--name", name, "--purge")
    assert purge.returncode == 0, purge.stderr
    assert "no cluster named" not in purge.stderr
    assert not run_dir.exists()
    again = _cli("down", "--name", name, "--purge")  # nothing left: the usual answer, exit 2
    assert again.returncode == 2 and "no cluster named" in again.stderr


def test_down_purge_of_an_attached_cluster_waits_for_a_component_slow_to_die(tmp_path: Path) -> None:
    # A real process that takes ~0.1-0.2 s to die after SIGKILL (its 512 MiB are unmapped first),
    # standing in for the etcd of an attached cluster.
    slow = subprocess.Popen([sys.executable, "-c", SLOW_TO_DIE], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert slow.stdout is not None and slow.stdout.readline().strip() == b"ready"
        cluster = LocalCluster("slow", base_dir=tmp_path)
        cluster.dir.mkdir(parents=True)
        cluster.state_file.write_text(json.dumps({"pids": {"etcd": slow.pid}, "binaries": str(tmp_path),
                                                  "ports": {"etcd-client": 1, "etcd-peer": 2}}))
        LocalCluster.attach("slow", base_dir=tmp_path).down(remove=True)
        assert not pid_alive(slow.pid)
        assert not cluster.dir.exists()
    finally:
        if slow.poll() is None:
            os.killpg(slow.pid, signal.SIGKILL)
        slow.wait()
