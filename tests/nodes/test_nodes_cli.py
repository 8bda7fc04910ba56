"""``draguard nodes`` input checks and the building blocks that need no cluster."""

from __future__ import annotations

import fcntl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.harness.core.errors import UsageError
from draguard.harness.nodes import FakeNodesProcess, node_names
from draguard.harness.nodes.heartbeat import Heartbeats
from draguard.harness.nodes.workqueue import WorkQueue

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


@pytest.fixture
def kubeconfig(root: Path) -> Path:
    path = root / "kubeconfig"
    path.write_text(KUBECONFIG)
    return path


def test_a_node_already_served_by_another_process_is_refused_by_name(
    root: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = root / "nodes" / "n1" / "agent.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "w") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        code = main(["nodes", "--kubeconfig", str(kubeconfig), "--node", "n0", "--node", "n1", "--root", str(root / "nodes")])
    assert code == 2
    assert f"node n1: already served by another draguard nodes process (lock {lock} is taken)" in capsys.readouterr().err
    # n0's lock was let go again: a second process could serve it now
    with open(root / "nodes" / "n0" / "agent.lock") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--node", "a", "--count", "2", "--prefix", "p"], "give either --node NAME ... or --count N --prefix P"),
        (["--count", "2"], "give --node NAME (repeatable) or --count N with --prefix P"),
        (["--count", "0", "--prefix", "p"], "--count 0: must be at least 1"),
        (["--node", "Bad_Name"], "node name 'Bad_Name': must be a lower-case DNS subdomain"),
        (["--node", "a", "--label", "novalue"], "--label 'novalue': expected KEY=VALUE"),
        (["--node", "a", "--node", "a"], "node 'a' is given twice"),
    ],
)
def test_bad_node_arguments_exit_2_with_a_message_naming_them(
    root: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["nodes", "--kubeconfig", str(kubeconfig), "--root", str(root), *args]) == 2
    assert message in capsys.readouterr().err


def test_count_and_prefix_name_nodes_from_zero() -> None:
    assert node_names(count=3, prefix="gpu-node-") == ["gpu-node-0", "gpu-node-1", "gpu-node-2"]


def test_node_loss_can_only_be_switched_for_served_nodes(root: Path, kubeconfig: Path) -> None:
    proc = FakeNodesProcess(kubeconfig, ["a"], root=root)
    proc.set_lost("a")
    assert (root / "a" / "lost").exists()
    proc.set_lost("a", False)
    assert not (root / "a" / "lost").exists()
    with pytest.raises(UsageError, match="node 'b' is not served by this process"):
        proc.set_lost("b")


def test_the_work_queue_hands_a_key_to_one_worker_at_a_time_and_backs_off() -> None:
    q = WorkQueue(base_delay=0.05, max_delay=0.2)
    q.add("k")
    q.add("k")
    assert q.get() == "k"
    q.add("k")  # re-added while processing: handed out again only after done()
    assert len(q) == 0
    q.done("k")
    assert q.get() == "k"
    q.done("k")
    assert [q.add_rate_limited("k") for _ in range(4)] == [0.05, 0.1, 0.2, 0.2]
    q.forget("k")
    assert q.add_rate_limited("k") == 0.05
    q.shutdown()
    assert q.get() is None


def test_heartbeats_of_many_nodes_are_spread_over_the_interval() -> None:
    seen: dict[str, list[float]] = {}
    lock = threading.Lock()

    def beat(name: str) -> None:
        with lock:
            seen.setdefault(name, []).append(time.monotonic())

    with ThreadPoolExecutor(4) as pool:
        hb = Heartbeats(pool, interval=0.5)
        hb.add_all({f"n{i}": (lambda n=f"n{i}": beat(n)) for i in range(10)})
        hb.start()
        time.sleep(0.7)
        hb.stop()
    assert len(seen) == 10
    firsts = sorted(times[0] for times in seen.values())
    assert firsts[-1] - firsts[0] >= 0.4, "first beats are spread over the interval, not bunched"
    assert all(1 <= len(times) <= 2 for times in seen.values())
