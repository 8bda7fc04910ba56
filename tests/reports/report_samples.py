"""Results to render, built like the runner builds them (timeline events as the watch records them).

``deadlock_result`` mirrors gang-deadlock-per-pod: two gangs of 4 pods x 2 GPUs on 2 nodes x 4 GPUs,
two members of each bound and holding devices, gang-atomic violated. ``broken_result`` adds what a
broken driver shows: a claim still holding its device after cleanup (a leak) and two claims on one
device at once (a double allocation). ``load_result`` mirrors driver-restart-under-churn: a ``load``
step whose claim churn kept up (or, asked for, fell behind) and a driver restart during it.
"""

from __future__ import annotations

from typing import Any

from draguard.harness.result import (Evidence, InvariantResult, LoadKind, LoadPhase, LoadSummary, RunResult, ScenarioResult,
                                     StepResult, TimelineEvents)

DRIVER = "gpu.draguard.dev"
NS = "dg-test"


def _slice(t: float, node: str) -> dict[str, Any]:
    return {"t": t, "source": "watch", "kind": "ResourceSlice", "name": f"{node}-{DRIVER}", "event": "ADDED",
            "summary": "4 devices", "data": {"driver": DRIVER, "pool": node, "node": node,
                                            "devices": [f"gpu-{i}" for i in range(4)]}}


def _claim(t: float, name: str, workload: str, devices: list[tuple[str, str]], pod: str | None,
           event: str = "MODIFIED") -> dict[str, Any]:
    return {"t": t, "source": "watch", "kind": "ResourceClaim", "name": name, "namespace": NS, "event": event,
            "summary": "allocated" if devices else "unallocated",
            "data": {"devices": [{"driver": DRIVER, "pool": p, "device": d, "request": "gpu"} for p, d in devices],
                     "reservedFor": [pod] if pod else [], "workload": workload}}


def _pod(t: float, name: str, workload: str, phase: str, node: str | None, claim: str | None,
         event: str = "MODIFIED", terminating: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {"phase": phase, "node": node, "claims": [claim] if claim else [], "workload": workload}
    if terminating:
        data["terminating"] = True
    return {"t": t, "source": "watch", "kind": "Pod", "name": name, "namespace": NS, "event": event,
            "summary": phase, "data": data}


def deadlock_events() -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = [{"t": 0.1, "source": "phase", "kind": "Run", "name": "s", "event": "phase", "summary": "up"}]
    ev += [_slice(1.0, "gpu-node-0"), _slice(1.1, "gpu-node-1")]
    holders = {"gang-a": [("gpu-node-0", ["gpu-0", "gpu-1"]), ("gpu-node-1", ["gpu-0", "gpu-1"])],
               "gang-b": [("gpu-node-0", ["gpu-2", "gpu-3"]), ("gpu-node-1", ["gpu-2", "gpu-3"])]}
    t = 2.0
    for gang, places in holders.items():
        for m in range(4):
            pod, claim = f"{gang}-{m}", f"{gang}-{m}-gpus-x{m}"
            ev.append(_pod(t, pod, gang, "Pending", None, None, "ADDED"))
            ev.append(_claim(t, claim, gang, [], None, "ADDED"))
            if m < 2:
                node, devs = places[m]
                ev.append(_claim(t + 0.5, claim, gang, [(node, d) for d in devs], pod))
                ev.append(_pod(t + 0.5, pod, gang, "Pending", node, claim))
                ev.append(_pod(t + 1.5, pod, gang, "Running", node, claim))
            else:
                ev.append(_pod(t + 0.6, pod, gang, "Pending", None, claim))
            t += 0.2
    ev.append({"t": 12.0, "source": "invariant", "kind": "gang-atomic", "name": "s", "event": "violated",
               "summary": "gang gang-a is partial: 2 of 4 members hold devices"})
    # cleanup: pods deleted, claims deallocated
    t = 20.0
    for gang in holders:
        for m in range(4):
            pod, claim = f"{gang}-{m}", f"{gang}-{m}-gpus-x{m}"
            ev.append(_pod(t, pod, gang, "Running" if m < 2 else "Pending", None, claim, terminating=True))
            ev.append(_pod(t + 0.5, pod, gang, "Running", None, claim, "DELETED"))
            ev.append(_claim(t + 1.0, claim, gang, [], None, "DELETED"))
            t += 0.1
    return sorted(ev, key=lambda e: e["t"])


def deadlock_result() -> RunResult:
    s = ScenarioResult("gang-deadlock-per-pod", "scenarios/gang-deadlock-per-pod.yaml", 1, violate=("gang-atomic",),
                       duration=25.0, environment={"kubernetesVersion": "v1.37.2", "nodes": 2, "seed": 1,
                                                   "driver": {"name": DRIVER, "kind": "fake", "mutant": None}})
    s.invariants["gang-atomic"] = InvariantResult("gang-atomic", "a gang holds devices for all members or none", "violated",
                                                  "violate", [
        Evidence("gang gang-a is partial: 2 of 4 members hold devices", (f"Pod/{NS}/gang-a-0", f"Pod/{NS}/gang-a-1"),
                 (f"{DRIVER}/gpu-node-0/gpu-0", f"{DRIVER}/gpu-node-0/gpu-1", f"{DRIVER}/gpu-node-1/gpu-0",
                  f"{DRIVER}/gpu-node-1/gpu-1"), 12.0),
        Evidence("gang gang-b is partial: 2 of 4 members hold devices", (f"Pod/{NS}/gang-b-0",),
                 (f"{DRIVER}/gpu-node-0/gpu-2", f"{DRIVER}/gpu-node-0/gpu-3"), 12.0)])
    s.invariants["no-leak"] = InvariantResult("no-leak", "every device is free after cleanup", "held", "hold")
    s.invariants["topology"] = InvariantResult("topology", "allocations satisfy the constraints", "not-checked", None)
    s.steps.append(StepResult("0-evict", "evict", 8.0, True, "evicted gang-a-0", due=8.0, ran=8.01, finished=8.3, fired=1))
    ev = deadlock_events()
    ev.append({"t": 8.01, "source": "fault", "kind": "evict", "name": "0-evict", "event": "start", "summary": "target=gang-a-0"})
    s.timeline = TimelineEvents(tuple(sorted(ev, key=lambda e: e["t"])))
    return RunResult("r-deadlock", [s], environment={"draguardVersion": "0.1.0", "started": 1_800_000_000.0})


def broken_result() -> RunResult:
    run = deadlock_result()
    s = run.scenarios[0]
    assert s.timeline is not None
    ev = list(s.timeline.events())
    # a claim that still holds gpu-node-1/gpu-3 after cleanup, and one sharing gpu-node-0/gpu-0 with gang-a-0's
    ev.append(_claim(22.0, "leaky", "gang-c", [("gpu-node-1", "gpu-3")], None, "ADDED"))
    ev.append(_claim(3.0, "double", "gang-c", [("gpu-node-0", "gpu-0")], None, "ADDED"))
    ev.append(_claim(6.0, "double", "gang-c", [], None, "DELETED"))
    s.timeline = TimelineEvents(tuple(sorted(ev, key=lambda e: e["t"])))
    s.invariants["no-leak"] = InvariantResult("no-leak", "every device is free after cleanup", "violated", "hold",
                                              [Evidence("claim leaky still allocated after cleanup", ("ResourceClaim/dg-test/leaky",),
                                                        (f"{DRIVER}/gpu-node-1/gpu-3",), 24.0)])
    s.invariants["no-double-allocation"] = InvariantResult(
        "no-double-allocation", "a device is held by one claim at a time", "violated", "hold",
        [Evidence("gpu-node-0/gpu-0 allocated to gang-a-0-gpus-x0 and double", (), (f"{DRIVER}/gpu-node-0/gpu-0",), 3.0)])
    return run


def load_summary(fell_behind: bool = False) -> LoadSummary:
    """What the load step of driver-restart-under-churn measured (times from a run on the 2-core machine)."""
    def phase(name: str, count: int, p50: float, p90: float, p99: float, top: float, failures: int = 0) -> LoadPhase:
        return LoadPhase(name, count, failures, p50, p90, p99, top)

    return LoadSummary(
        target_rate=3.0, achieved_rate=1.8 if fell_behind else 3.6, fell_behind=fell_behind, behind_ratio=0.9,
        duration=20.0, operations_started=36 if fell_behind else 72, operations_finished=35 if fell_behind else 72,
        users=12,
        kinds=(
            LoadKind("gang", 30, 0, (phase("allocated", 30, 680, 1500, 1500, 1508), phase("prepared", 30, 760, 1600, 1600, 1611),
                                     phase("running", 30, 810, 1600, 1700, 1662), phase("released", 30, 140, 350, 410, 405))),
            LoadKind("template", 19, 1, (phase("allocated", 19, 290, 590, 1300, 1303),
                                         phase("prepared", 19, 390, 640, 1400, 1442),
                                         phase("running", 19, 420, 640, 1500, 1456, failures=1),
                                         phase("released", 19, 230, 300, 310, 308))),
            LoadKind("shared", 23, 0, (phase("allocated", 23, 200, 460, 630, 628), phase("prepared", 23, 440, 970, 970, 970),
                                       phase("running", 23, 460, 1000, 1000, 1008), phase("released", 23, 260, 470, 500, 496))),
        ),
        violations={"no-leak": ("21.3s: device gpu-node-1/gpu-5 still allocated to load-ab-t1-0",)} if fell_behind else {},
        errors=("template running: load-ab-t1: not running after 60s (×1)",),
        files="driver-restart-under-churn/load-churn",
    )  # fmt: skip


def load_result(fell_behind: bool = False) -> RunResult:
    """driver-restart-under-churn: a load step (claim churn) and a driver restart during it."""
    s = ScenarioResult("driver-restart-under-churn", "scenarios/driver-restart-under-churn.yaml", 21, duration=48.0,
                       environment={"kubernetesVersion": "v1.37.2", "nodes": 2, "seed": 21,
                                    "driver": {"name": DRIVER, "kind": "fake", "mutant": None}})
    for name in ("no-leak", "no-double-allocation"):
        s.invariants[name] = InvariantResult(name, f"{name} holds", "held", None)
    load = load_summary(fell_behind)
    detail = (f"step churn: the load fell behind its target rate: {load.headline}" if fell_behind
              else f"load: {load.headline}")  # fmt: skip
    s.steps.append(StepResult("churn", "load", 0.0, not fell_behind, detail, due=0.0, ran=0.01, finished=23.4,
                              fired=load.operations_finished, status="error" if fell_behind else "ok", load=load))
    s.steps.append(StepResult("restart-drivers", "driver-restart", 6.0, True, "restarted 2 drivers", due=6.0, ran=6.02,
                              finished=7.1, fired=2))
    ev = deadlock_events()
    ev += [{"t": 0.01, "source": "fault", "kind": "load", "name": "churn", "event": "start", "summary": "target=None"},
           {"t": 6.02, "source": "fault", "kind": "driver-restart", "name": "restart-drivers", "event": "start",
            "summary": "target=all"}]  # fmt: skip
    s.timeline = TimelineEvents(tuple(sorted(ev, key=lambda e: e["t"])))
    return RunResult("r-load", [s], environment={"draguardVersion": "0.1.0", "started": 1_800_000_000.0})
