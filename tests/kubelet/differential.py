"""Helpers of the differential tests: a scenario on the other agent, and the DRA calls a driver saw,
reduced to what must agree between the fake agent and the hollow kubelet."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path
from typing import Any

from draguard.harness.proxy.recorder import read_calls
from draguard.harness.result import ScenarioResult
from draguard.harness.scenario.types import Scenario

DRA_METHODS = ("NodePrepareResources", "NodeUnprepareResources")
_GENERATED = re.compile(r"-[a-z0-9]{5}$")


def on_agent(scenario: Scenario, agent: str, interpose: bool = True) -> Scenario:
    """The same scenario with every node run by ``agent`` (and the interposer recording calls)."""
    nodes = tuple(dataclasses.replace(n, agent=agent) for n in scenario.nodes)
    driver = dataclasses.replace(scenario.driver, interpose=interpose or scenario.driver.interpose)
    return dataclasses.replace(scenario, nodes=nodes, driver=driver)


def claim_key(claim: dict[str, Any]) -> str:
    """A claim's name without the random suffix of a generated (template) claim."""
    return _GENERATED.sub("", str(claim.get("name", "")))


def call_profile(report_dir: Path, scenario: str) -> dict[str, Any]:
    """What must agree between agents about the DRA calls the driver saw (see docs/kubelet-differential.md).

    - ``successes``: per claim, the methods of its successful calls in order (prepare before unprepare,
      each once unless the scenario makes the node forget);
    - ``failures``: how many calls of each method failed (the injected faults, retried);
    - ``batches``: how many claims each successful prepare and unprepare carried (one call per pod and
      driver on both agents).
    """
    calls = [c for c in read_calls(report_dir / scenario / "grpc-calls.jsonl")
             if c.get("method") in DRA_METHODS and c.get("kind", "call") == "call"]
    calls.sort(key=lambda c: float(c.get("ts", 0)))
    successes: dict[str, list[str]] = {}
    failures: Counter[str] = Counter()
    batches: Counter[tuple[str, int]] = Counter()
    for c in calls:
        ok = c.get("status") == "OK" and not c.get("claim_errors")
        if not ok:
            failures[c["method"]] += 1
            continue
        batches[(c["method"], len(c.get("claims", [])))] += 1
        for claim in c.get("claims", []):
            successes.setdefault(claim_key(claim), []).append(c["method"])
    return {"successes": successes, "failures": dict(failures), "batches": dict(batches)}


def verdict(result: ScenarioResult) -> dict[str, str]:
    return {name: r.status for name, r in result.invariants.items()}
