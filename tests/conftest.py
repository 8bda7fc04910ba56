"""Shared test configuration: the draguard pytest plugin is loaded through its pytest11 entry point.

The suite runs on three xdist workers, one test file per worker at a time (``make test``: ``--dist
loadfile --no-loadscope-reorder``). Files are handed out in collection order, so the longest ones
(measured with ``--durations``: each runs scenarios on control planes of their own for minutes) are
collected first; a long file that started last would run alone at the end."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

LONGEST_FIRST = (
    "tests/kubelet/test_scenarios_on_kubelet.py",  # ~700 s on the 2-core machine (2026-12-06)
    "tests/scenarios/test_library.py",  # ~620 s
    "tests/mutants/test_kill_matrix.py",  # ~390 s
    "tests/kubelet/test_mutants_on_kubelet.py",  # ~300 s
    "tests/kubelet/test_suites_on_kubelet.py",  # ~300 s
    "tests/sanity/test_sanity_fake_driver.py",  # ~235 s
    "tests/bench/test_bench_smallest.py",  # ~150 s
    "tests/kubelet/test_differential.py",  # ~105 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order
