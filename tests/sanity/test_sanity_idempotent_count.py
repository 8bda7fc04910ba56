"""``--idempotent-count N`` (csi-sanity's IdempotentCount), through ``draguard sanity`` against the fake
driver on the real local control plane: a prepare check makes each prepare and unprepare call it expects
to succeed N times (counted in the recorded gRPC calls) and compares every answer with the first, so a
driver that answers a repeated prepare differently (the non-idempotent-prepare mutant, after
kubernetes-sigs/dra-driver-nvidia-gpu#729) passes with N=1 and fails with N=3, naming the repetition."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from draguard.cli.main import main
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

from .conftest import fake_driver_node

pytestmark = pytest.mark.cluster

CHECK = "sanity.prepare.device-in-use"


@pytest.fixture
def driver(draguard_cluster: Any) -> Callable[[str | None], Any]:
    @contextmanager
    def start(mutant: str | None) -> Iterator[tuple[Path, str]]:
        with fake_driver_node(draguard_cluster, "dg-ic", mutant=mutant) as (_, root, node):
            yield root, node

    return start


def _run(draguard_cluster: Any, root: Path, node: str, out: Path, count: int) -> tuple[int, dict[str, Any], list[Any]]:
    dirs = NodeDirs(root, node)
    code = main(["sanity", "--registration-socket", str(dirs.registration_socket(DEFAULT_DRIVER)),
                 "--kubeconfig", str(draguard_cluster.kubeconfig), "--driver", DEFAULT_DRIVER, "--node", node,
                 "--check", CHECK, "--idempotent-count", str(count), "--out", str(out)])
    (check,) = json.loads((out / "verdict.json").read_text())["checks"]
    calls = [json.loads(line) for line in (out / "grpc-calls.jsonl").read_text().splitlines()]
    return code, check, calls


def _per_claim(calls: list[Any], method: str) -> list[int]:
    """Calls of ``method`` per claim, in the order the claims were first named."""
    counts: Counter[str] = Counter()
    for call in calls:
        if call["method"] == method and call["kind"] == "call":
            counts.update(c["name"] for c in call["claims"])
    return [counts[name] for name in sorted(counts, key=lambda n: int(n.rsplit("-", 1)[1]))]


def test_each_expected_call_is_made_n_times(draguard_cluster: Any, driver: Any, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with driver(None) as (root, node):
        got = {n: _run(draguard_cluster, root, node, tmp_path / str(n), n) for n in (1, 4)}
    capsys.readouterr()
    for n, (code, check, calls) in got.items():
        assert code == 0 and check["status"] == "passed", check
        # device-in-use: prepare the first claim (N), the second once (refused), unprepare the first (N),
        # prepare the second (N); the suite's cleanup unprepares what is left (not counted by the check).
        assert _per_claim(calls, "NodePrepareResources") == [n, n + 1], (n, _per_claim(calls, "NodePrepareResources"))
        assert _per_claim(calls, "NodeUnprepareResources")[0] >= n
    assert json.loads((tmp_path / "4" / "verdict.json").read_text())["environment"]["idempotentCount"] == 4


def test_a_driver_answering_a_repeated_prepare_differently_fails_only_when_calls_repeat(
    draguard_cluster: Any, driver: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with driver("non-idempotent-prepare") as (root, node):
        once = _run(draguard_cluster, root, node, tmp_path / "1", 1)
        thrice = _run(draguard_cluster, root, node, tmp_path / "3", 3)
    capsys.readouterr()
    assert once[0] == 0 and once[1]["status"] == "passed", once[1]
    assert thrice[0] == 1 and thrice[1]["status"] == "failed", thrice[1]
    assert "prepare #2 of 3 of" in thrice[1]["reason"] and "the first answered" in thrice[1]["reason"], thrice[1]
