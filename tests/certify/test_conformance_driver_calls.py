"""The cluster suite judges the driver's gRPC calls and the node's CDI folder, check by check.

The upstream DRA test driver (and its planted-bug variants, harness/driver/upstream_variants.py) runs
behind the gRPC interposer on fake nodes of the local control plane, as ``draguard run --cluster local``
puts it there: the driver as released passes the checks that exercise repeated and concurrent
prepares and every ``conformance.driver-calls.*`` judgement; each variant is caught by the judgement
aimed at its bug, with the check and the claim in the reason."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.conformance.cluster import ClusterConfig, run_conformance
from draguard.conformance.cluster.calls import CallJudge, RecordFile
from draguard.harness.core.errors import HarnessError
from draguard.harness.driver.external import TEST_DRIVER_NAME, ExternalPluginProcess, find_test_driver
from draguard.harness.driver.upstream_variants import build_variant
from draguard.harness.nodes import FakeNodesProcess
from draguard.harness.proxy import Interposer
from draguard.harness.result import CheckResult
from support import upstream_on_fake_nodes

NOT_GIVEN_WITHOUT = {
    "conformance.chaos.kubelet-restart": "restart_kubelet",
    "conformance.chaos.restart-cleanup": "CDI folder",
    "conformance.core.claim-error-isolated": "interposer",
}
"""Checks that need what a run without the interposer, the node's CDI folder or a kubelet restart hook
lacks: they skip saying which (the driver-call judgements are not applicable, saying why)."""


def not_passed(checks: Iterable[CheckResult]) -> dict[str, tuple[str, str]]:
    """The checks of a run that neither passed nor said that the run lacks what they need."""
    out = {}
    for c in checks:
        lacks = NOT_GIVEN_WITHOUT.get(c.id)
        if c.status == "passed" or (lacks and c.status == "skipped" and lacks in c.reason) or (
                c.id.startswith("conformance.driver-calls.") and c.status == "not-applicable"
                and "no gRPC interposer" in c.reason):
            continue
        out[c.id] = (c.status, c.reason)
    return out


SELECT = ("conformance.core.template-claim", "conformance.core.concurrent-prepare", "conformance.chaos.kubelet-restart",
          "conformance.driver-calls.*")


def _entry(ts: float, method: str, uid: str, ids: list[str], status: str = "OK") -> dict[str, Any]:
    """One line as the interposer's recorder writes it (harness/proxy/recorder.py)."""
    entry: dict[str, Any] = {"ts": ts, "node": "n0", "driver": "d.example.com", "service": "v1", "method": method,
                             "kind": "call", "claims": [{"namespace": "ns", "name": "c0", "uid": uid}],
                             "duration_s": 0.01, "status": status, "error": "", "claim_errors": {}, "fault": None}
    if method == "NodePrepareResources":
        entry["answers"] = {uid: [{"pool": "n0", "device": "gpu-0", "requests": [], "cdi_device_ids": ids}]}
    return entry


def test_a_repeated_prepare_answering_other_cdi_ids_is_found_in_the_check_that_made_it(tmp_path: Path) -> None:
    record = tmp_path / "calls.jsonl"
    record.write_text(json.dumps(_entry(time.time() - 5, "NodePrepareResources", "u1", ["d.example.com/gpu=a"])) + "\n")
    judge = CallJudge(RecordFile(record), quiet=0.2)
    window = judge.open("conformance.chaos.kubelet-restart")
    assert window.start == 1  # the calls before the check are not its own
    now = time.time()
    with record.open("a") as f:
        f.write(json.dumps(_entry(now, "NodePrepareResources", "u2", ["d.example.com/gpu=x"])) + "\n")
        f.write(json.dumps(_entry(now + 0.1, "NodePrepareResources", "u2", ["d.example.com/gpu=y"])) + "\n")
    assert judge.answered_ids(window, "n0", "u2") == ["d.example.com/gpu=y"]
    judge.settle(window, timeout=3)
    found = judge.judge(window)
    assert [f.invariant for f in (x.violation for x in found)] == ["prepare-idempotent"]
    assert found[0].check == "conformance.chaos.kubelet-restart" and "ResourceClaim ns/c0" in found[0].violation.message
    assert judge.calls_judged == {"conformance.chaos.kubelet-restart": 2}
    assert judge.judge(window) == []  # a breach is reported once


class _Hooks:
    def __init__(self, procs: dict[str, ExternalPluginProcess], agent: FakeNodesProcess) -> None:
        self.procs, self.agent = procs, agent

    def restart(self, node: str) -> None:
        self.procs[node].stop()
        self.procs[node].start()

    def restart_kubelet(self, node: str) -> None:
        self.agent.restart()


def _binary(variant: str, bin_dir: Any) -> Path:
    if variant == "unmodified":
        return find_test_driver(bin_dir)
    return build_variant(variant, progress=lambda _: None)


@pytest.fixture
def interposed(draguard_cluster: Any, request: pytest.FixtureRequest) -> Iterator[tuple[ClusterConfig, Any, Interposer]]:
    """The variant named by the test's parameter on two fake nodes, behind the interposer; its CDI folders known."""
    bin_dir = draguard_cluster.local.bin_dir if draguard_cluster.local is not None else None
    try:
        binary = _binary(request.param, bin_dir)
    except HarnessError as exc:
        pytest.skip(str(exc))
    with upstream_on_fake_nodes(draguard_cluster, "dgc", binary, interpose=True) as up:
        config = ClusterConfig(kubeconfig=Path(draguard_cluster.kubeconfig), driver=TEST_DRIVER_NAME,
                               device_class=up.device_class, wait_timeout=45.0, select=SELECT,
                               cdi_dir=str(up.root / "{node}" / "cdi"))
        yield config, _Hooks(up.procs, up.agent), up.interposer


def _run(interposed: tuple[ClusterConfig, Any, Interposer]) -> dict[str, tuple[str, str]]:
    config, hooks, interposer = interposed
    result = run_conformance(config, hooks, calls=interposer.recorder)
    got = {c.id: (c.status, c.reason) for c in result.checks}
    print("\n".join(f"{k}: {v}" for k, v in got.items()))
    return got


@pytest.mark.cluster
@pytest.mark.parametrize("interposed", ["unmodified"], indirect=True)
def test_the_released_driver_passes_every_driver_call_judgement(interposed: tuple[ClusterConfig, Any, Interposer]) -> None:
    got = _run(interposed)
    assert {k for k, (s, _) in got.items() if s != "passed"} == set(), got
    assert len([k for k in got if k.startswith("conformance.driver-calls.")]) == 5
    assert "judged over" in got["conformance.driver-calls.prepare-idempotent"][1]


@pytest.mark.cluster
@pytest.mark.parametrize(("interposed", "caught", "words"), [
    ("non-idempotent-prepare", "conformance.driver-calls.prepare-idempotent", "in conformance.chaos.kubelet-restart"),
    ("lock-across-slow-prepare", "conformance.driver-calls.lock-free-handlers", "in conformance.core.concurrent-prepare"),
    ("cdi-left-behind", "conformance.core.template-claim", "left the CDI spec"),
], indirect=["interposed"])
def test_a_variant_is_caught_by_the_judgement_aimed_at_its_bug(
    interposed: tuple[ClusterConfig, Any, Interposer], caught: str, words: str,
) -> None:
    got = _run(interposed)
    status, reason = got[caught]
    assert status == "failed" and words in reason, got
    assert "draguard-conformance-" in reason or "claim(s)" in reason  # the claims, by namespace/name or UID
