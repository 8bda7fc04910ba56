"""Shared test configuration: the draguard pytest plugin is loaded through its pytest11 entry point.

The suite runs on three xdist workers, one test file per worker at a time (``make test``: ``--dist
loadfile --no-loadscope-reorder``). Files are handed out in collection order, so the longest ones
(measured with ``--durations``: each runs scenarios on control planes of their own for minutes) are
collected first; a long file that started last would run alone at the end."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest
from xdist.scheduler import LoadFileScheduling

pytest_plugins = ["pytester"]

LONGEST_FIRST = (
    "tests/kind/test_kind_certify.py",  # the kind tests share one cluster (one scope below): this file's before the one that brings it down
    "tests/kind/test_kind_chaos.py",  # likewise: before test_kind_cluster.py
    "tests/kind/test_kind_fake_driver.py",  # likewise: before test_kind_cluster.py
    "tests/kind/test_kind_incluster.py",  # likewise: before test_kind_cluster.py
    "tests/kind/test_kind_cluster.py",  # ~90-115 s warm; cold (node image, its Go builds, CoreDNS the longest) 20-35 min (2026-12-07)
    "tests/kubelet/test_scenarios_on_kubelet.py",  # ~700 s on the 2-core machine (2026-12-06)
    "tests/scenarios/test_library.py",  # ~620 s
    "tests/mutants/test_kill_matrix.py",  # ~390 s
    "tests/kubelet/test_mutants_on_kubelet.py",  # ~300 s
    "tests/kubelet/test_suites_on_kubelet.py",  # ~300 s
    "tests/sanity/test_sanity_fake_driver.py",  # ~235 s
    "tests/bench/test_bench_smallest.py",  # ~150 s
    "tests/docs/test_readme_scenarios.py",  # ~150 s
    "tests/kubelet/test_differential.py",  # ~105 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order


KIND_TESTS = "tests/kind/"
"""The files here share one session-scoped kind cluster (tests/kind/conftest.py) and the private dockerd
under it: split across xdist workers, each worker would start a cluster of its own, and one file's test that
kills the private dockerd would kill the other's nodes."""


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadfile`` with the kind tests' files as one unit, run by one worker in collection order."""
    if config.getoption("dist", None) != "loadfile":
        return None
    class KindFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return KIND_TESTS if path.startswith(KIND_TESTS) else path

    return KindFilesTogether(config, log)  # type: ignore[arg-type]


class _Watchdog:
    """Names the tests still running when a test has run for longer than ``STUCK_AFTER``, and when the
    session is ended by SIGTERM (CI's time limit): the dots of a hung run say nothing about which test
    hung. On the xdist controller the workers' tests are seen through their start and finish reports."""

    STUCK_AFTER = 900.0
    """Seconds; the longest test (the kill matrix's first, which runs its module's cells) takes ~400 s."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.running: dict[str, float] = {}
        self.lock = threading.Lock()
        self.reported: set[str] = set()

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        with self.lock:
            self.running[nodeid] = time.monotonic()

    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        with self.lock:
            self.running.pop(nodeid, None)

    def describe(self, why: str) -> str:
        now = time.monotonic()
        with self.lock:
            running = sorted(self.running.items(), key=lambda kv: kv[1])
        lines = [f"[test watchdog] {why}, {now - self.started:.0f} s into the session; running:"]
        lines += [f"[test watchdog]   {nodeid} for {now - t0:.0f} s" for nodeid, t0 in running] or [
            "[test watchdog]   nothing"]
        return "\n".join(lines) + "\n"

    def watch(self) -> None:
        while True:
            time.sleep(30.0)
            now = time.monotonic()
            with self.lock:
                stuck = [n for n, t0 in self.running.items() if now - t0 > self.STUCK_AFTER and n not in self.reported]
                self.reported.update(stuck)
            if stuck:
                sys.__stderr__.write(self.describe(f"{len(stuck)} test(s) over {self.STUCK_AFTER:.0f} s"))
                sys.__stderr__.flush()

    def on_sigterm(self, signum: int, frame: object) -> None:
        sys.__stderr__.write(self.describe("ended by SIGTERM"))
        sys.__stderr__.flush()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: its controller watches
        return
    watchdog = _Watchdog()
    config.pluginmanager.register(watchdog, "draguard-test-watchdog")
    threading.Thread(target=watchdog.watch, name="test-watchdog", daemon=True).start()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, watchdog.on_sigterm)
