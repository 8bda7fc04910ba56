"""The observer's cache as waiters see it: workload tallies and ``wait_for`` under a stream of changes.

No cluster: the changes are fed to ``Observer._apply`` as the watch threads feed them, from real
threads, so what is checked is the locking and counting the runner relies on during a burst of
thousands of pod events (a step condition that re-counts every pod under the cache's lock on every
event would hold the watches up).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from draguard.harness.runner.deploy import WORKLOAD_LABEL
from draguard.harness.judge.observe import Observer, Timeline, _Watched

POD = _Watched("Pod", "ns", None, None)


def observer() -> Observer:
    obs = Observer(kube=None, timeline=Timeline())  # type: ignore[arg-type]  # no watch is started
    obs.watch("Pod", "ns")
    return obs


def pod(name: str, rv: int, workload: str | None = "w", phase: str = "Pending", node: str | None = None,
        deleting: bool = False) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": str(rv),
                          "labels": {WORKLOAD_LABEL: workload} if workload else {}}
    if deleting:
        md["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    return {"kind": "Pod", "metadata": md, "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


def test_tally_follows_every_change_of_a_pod() -> None:
    obs = observer()
    for i in range(3):
        obs._apply(POD, "ADDED", pod(f"w-{i}", 1))
    obs._apply(POD, "ADDED", pod("other-0", 1, workload="other"))
    obs._apply(POD, "ADDED", pod("bare", 1, workload=None))
    assert obs.tally("w") == {"phase:Pending": 3, "live": 3}
    obs._apply(POD, "MODIFIED", pod("w-0", 2, node="n1"))
    obs._apply(POD, "MODIFIED", pod("w-1", 2, phase="Running", node="n1"))
    t = obs.tally("w")
    assert (t["phase:Pending"], t["phase:Running"], t["scheduled"], t["live"]) == (2, 1, 2, 3)
    obs._apply(POD, "MODIFIED", pod("w-1", 3, phase="Running", node="n1", deleting=True))
    assert obs.tally("w")["live"] == 2 and obs.tally("w")["phase:Running"] == 1
    obs._apply(POD, "DELETED", pod("w-1", 4, phase="Running", node="n1", deleting=True))
    t = obs.tally("w")
    assert (t["phase:Running"], t["scheduled"], t["live"], t["phase:Pending"]) == (0, 1, 2, 2)
    # a pod whose workload label changes is counted under its new workload only
    obs._apply(POD, "MODIFIED", pod("w-2", 5, workload="other"))
    assert obs.tally("w")["live"] == 1 and obs.tally("other")["live"] == 2
    assert obs.tally("nobody") == {}


def test_tally_agrees_with_counting_the_cache_after_a_random_stream() -> None:
    import random

    rng = random.Random(7)
    obs = observer()
    for rv in range(2000):
        name = f"p-{rng.randrange(50)}"
        if rng.random() < 0.15:
            obs._apply(POD, "DELETED", pod(name, rv))
            continue
        obs._apply(POD, "MODIFIED", pod(name, rv, workload=rng.choice(["a", "b", None]),
                                        phase=rng.choice(["Pending", "Running", "Failed"]),
                                        node=rng.choice([None, "n1"]), deleting=rng.random() < 0.2))
    for workload in ("a", "b"):
        pods = [p for p in obs.objects("Pod") if p["metadata"]["labels"].get(WORKLOAD_LABEL) == workload]
        t = obs.tally(workload)
        assert t["live"] == sum(1 for p in pods if "deletionTimestamp" not in p["metadata"])
        assert t["scheduled"] == sum(1 for p in pods if p["spec"].get("nodeName"))
        for phase in ("Pending", "Running", "Failed"):
            assert t[f"phase:{phase}"] == sum(1 for p in pods if p["status"]["phase"] == phase)


def test_wait_for_does_not_hold_the_watches_while_it_evaluates() -> None:
    obs = observer()
    inside, release = threading.Event(), threading.Event()

    def slow() -> bool:
        inside.set()
        release.wait(5)
        return True

    waiter = threading.Thread(target=obs.wait_for, args=(slow, 10))
    waiter.start()
    assert inside.wait(5)
    applied = threading.Event()
    # a watch delivering an event while the predicate runs is not blocked by it
    threading.Thread(target=lambda: (obs._apply(POD, "ADDED", pod("w-0", 1)), applied.set())).start()
    assert applied.wait(2), "the watch waited for the predicate"
    release.set()
    waiter.join(5)


def test_wait_for_evaluates_again_on_a_change_and_returns_when_true() -> None:
    obs = observer()
    calls = []

    def three_running() -> bool:
        calls.append(1)
        return obs.tally("w")["phase:Running"] >= 3

    def feed() -> None:
        for i in range(3):
            time.sleep(0.05)
            obs._apply(POD, "ADDED", pod(f"w-{i}", 1, phase="Running"))

    threading.Thread(target=feed).start()
    started = time.monotonic()
    assert obs.wait_for(three_running, 5)
    assert time.monotonic() - started < 1.0  # woken by the changes, not by the one-second re-check
    assert 2 <= len(calls) <= 4
    assert not obs.wait_for(lambda: False, 0.2)


def test_a_slow_predicate_is_evaluated_at_most_once_per_four_times_its_cost() -> None:
    obs = observer()
    stop = threading.Event()
    calls = []

    def slow() -> bool:
        calls.append(time.monotonic())
        time.sleep(0.02)
        return False

    def churn() -> None:  # a change every millisecond: without the pause it would run back to back
        rv = 0
        while not stop.is_set():
            rv += 1
            obs._apply(POD, "MODIFIED", pod("w-0", rv))
            time.sleep(0.001)

    feeder = threading.Thread(target=churn)
    feeder.start()
    try:
        assert not obs.wait_for(slow, 1.0)
    finally:
        stop.set()
        feeder.join()
    # 20 ms each, then 60 ms of pause: about 12 in a second (back to back it would be about 50)
    assert 5 <= len(calls) <= 16, len(calls)


def test_wait_change_wakes_on_a_change_of_its_kind_only() -> None:
    obs = observer()
    obs.watch("ResourceClaim", "ns")
    claims = _Watched("ResourceClaim", "ns", None, None)
    seen = obs.changes("ResourceClaim")
    assert obs.wait_change("ResourceClaim", seen, 0.05) == seen  # nothing changed: the count it was given
    threading.Timer(0.05, lambda: obs._apply(POD, "ADDED", pod("w-0", 1))).start()
    threading.Timer(0.3, lambda: obs._apply(claims, "ADDED", {"metadata": {"name": "c", "namespace": "ns",
                                                                        "resourceVersion": "1"}})).start()  # fmt: skip
    started = time.monotonic()
    assert obs.wait_change("ResourceClaim", seen, 5) == seen + 1
    assert 0.25 <= time.monotonic() - started < 2  # not woken for good by the pod's change


def test_wait_quiet_waits_for_the_quiet_period_after_the_last_change_not_for_a_fixed_window() -> None:
    """Settling (``Runner._settle``) judges once nothing changed for a while: the period counts from the
    last change, so it ends one period after it (not at the end of a later window), and a stream of
    changes never counts as quiet."""
    obs = observer()
    stop = threading.Event()

    def changes(until: float, prefix: str) -> None:
        i = 0
        while time.monotonic() < until and not stop.is_set():
            i += 1
            obs._apply(POD, "ADDED", pod(f"{prefix}-{i}", i))
            time.sleep(0.05)

    started = time.monotonic()
    feeder = threading.Thread(target=changes, args=(started + 0.7, "a"))
    feeder.start()
    assert obs.wait_quiet(quiet=0.5, timeout=5.0)
    feeder.join()
    took = time.monotonic() - started
    last = max(e["t"] for e in obs.timeline.events())
    # quiet for the whole period after the last change, and ended about one period after it: the old
    # fixed windows (0-0.5, 0.5-1.0, 1.0-1.5 s) ended at 1.5 s at the earliest
    assert obs.timeline.now() - last >= 0.5, (took, last)
    assert 0.7 + 0.5 - 0.1 <= took < 1.45, took
    feeder = threading.Thread(target=changes, args=(time.monotonic() + 10, "b"))
    feeder.start()
    try:
        assert not obs.wait_quiet(quiet=0.5, timeout=1.5), "changes every 50 ms are never quiet"
    finally:
        stop.set()
        feeder.join()


def test_frozen_is_the_same_tuple_until_its_kind_changes() -> None:
    obs = observer()
    obs.watch("ResourceClaim", "ns")
    obs._apply(POD, "ADDED", pod("w-0", 1))
    first = obs.frozen("Pod")
    assert obs.frozen("Pod") is first and [p["metadata"]["name"] for p in first] == ["w-0"]
    claim = {"kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ns", "resourceVersion": "1"}}
    obs._apply(_Watched("ResourceClaim", "ns", None, None), "ADDED", claim)
    assert obs.frozen("Pod") is first, "a change of another kind keeps it"
    obs._apply(POD, "MODIFIED", pod("w-0", 2, phase="Running", node="n1"))
    second = obs.frozen("Pod")
    assert second is not first and second[0]["status"]["phase"] == "Running"
    obs._apply(POD, "DELETED", pod("w-0", 3, phase="Running", node="n1"))
    assert obs.frozen("Pod") == ()


def test_a_run_with_a_pod_not_running_needs_the_longer_quiet_period_to_settle() -> None:
    """After an API server restart the scheduler retries a pending pod only after its back-off (up to
    10 s); judged after 4 s of quiet, the correct driver's gang was reported partial (1 run in 4 of
    tests/cluster/test_cluster_failures.py's overlap scenario)."""
    from draguard.harness.runner.runner import RETRY_QUIET, SETTLE_QUIET, quiet_needed

    assert RETRY_QUIET > 10 > SETTLE_QUIET
    running = [pod("w-0", 1, phase="Running", node="n"), pod("w-1", 1, phase="Succeeded", node="n")]
    assert quiet_needed(running) == SETTLE_QUIET and quiet_needed([]) == SETTLE_QUIET
    assert quiet_needed([*running, pod("w-2", 1)]) == RETRY_QUIET  # pending, not bound
    assert quiet_needed([*running, pod("w-2", 1, node="n")]) == RETRY_QUIET  # bound, not started
    assert quiet_needed([*running, pod("w-2", 1, phase="Running", node="n", deleting=True)]) == RETRY_QUIET


def test_wait_quiet_asks_a_callable_period_again_as_things_change() -> None:
    obs = observer()
    needed = [0.2]
    started = time.monotonic()
    assert obs.wait_quiet(quiet=lambda: needed[0], timeout=2.0)
    assert time.monotonic() - started < 0.6
    needed[0] = 5.0
    assert not obs.wait_quiet(quiet=lambda: needed[0], timeout=0.5), "5 s of quiet cannot come within 0.5 s"
