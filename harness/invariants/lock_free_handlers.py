"""``lock-free-handlers``: a call about one claim does not wait on a slow call about another.

The kubelet calls ``NodePrepareResources`` and ``NodeUnprepareResources`` for different pods at the same
time, and a driver that holds one lock across slow work (resetting a device, setting one up) makes every
other pod on the node wait for it: a pod that needs a free device starts only when an unrelated one is
done, and a kubelet whose call times out retries it. Device work must not hold a driver-wide lock; only
the driver's books need one, briefly (kubernetes-sigs/dra-driver-nvidia-gpu PR #332 took ``d.Lock()``
for a whole unprepare; the ``k8s.io/dynamic-resource-allocation/kubeletplugin`` helper serializes calls
by default, and does its slow API reads before it does, ``draplugin.go``).

Judged for any driver from the gRPC interposer's start and end times of each call (:attr:`DriverCall.duration`),
on one node and driver at a time, counting only the driver's own answers to calls it was sent as the node
made them. A call B **waited** on a call A when all of these hold:

- A and B name no claim in common, and A ran its course while B was in flight: A answered after B
  started and before B answered (B may have been sent first and lost the race for the lock);
- B spent at least :data:`MIN_WAIT` seconds in flight while A was;
- B took at least :data:`MIN_WAIT` seconds longer than its method's own time on that node (the median of
  the calls of that method that overlapped no other call there; the shortest one when none did);
- once A answered, B answered within its own time plus :data:`SLACK`: it did its work after A was done.

A driver that handles calls in parallel answers B after its own time whatever A does, so the third rule
fails for it; a driver that is slow for every call alike (its own time is long) is not held to it either.
Each wait is a violation naming both calls.
"""

from __future__ import annotations

from bisect import bisect_left
from statistics import median

from draguard.harness.core.registry import INVARIANTS
from draguard.harness.invariants.calls import PREPARE, UNPREPARE, drivers_answer
from draguard.harness.invariants.snapshot import DriverCall, Snapshot
from draguard.harness.invariants.violation import Violation

__all__ = ["NAME", "MIN_WAIT", "SLACK", "check", "waits"]

NAME = "lock-free-handlers"

MIN_WAIT = 1.0
"""Seconds: a shorter wait is not told apart from scheduling noise on a loaded machine."""
SLACK = 0.5
"""Seconds beyond its own time that B may take after A answered and still count as having waited on A."""


def _timed(snapshot: Snapshot) -> dict[tuple[str, str], list[DriverCall]]:
    out: dict[tuple[str, str], list[DriverCall]] = {}
    for call in snapshot.driver_calls:
        if (call.method in (PREPARE, UNPREPARE) and call.duration is not None and call.injected is None
                and drivers_answer(call)):
            out.setdefault((call.node, call.driver), []).append(call)
    return out


def _own_times(calls: list[DriverCall]) -> dict[str, float]:
    """Method -> its own time: the median of the calls that overlapped no other, else the shortest.
    ``calls`` sorted by start."""
    solo: dict[str, list[float]] = {}
    every: dict[str, list[float]] = {}
    reach = float("-inf")  # the latest end among the calls before
    for i, c in enumerate(calls):
        assert c.duration is not None and c.end is not None
        every.setdefault(c.method, []).append(c.duration)
        after = calls[i + 1].time if i + 1 < len(calls) else float("inf")
        if reach <= c.time and after >= c.end:
            solo.setdefault(c.method, []).append(c.duration)
        reach = max(reach, c.end)
    return {m: median(solo[m]) if m in solo else min(d) for m, d in every.items()}


def waits(snapshot: Snapshot) -> list[tuple[DriverCall, DriverCall]]:
    """Every (A, B) where B waited on A, by the rules of the module docstring."""
    found: list[tuple[DriverCall, DriverCall]] = []
    for calls in _timed(snapshot).values():
        calls.sort(key=lambda c: c.time)
        starts = [c.time for c in calls]
        longest = max(c.duration or 0.0 for c in calls)
        own = _own_times(calls)
        for b in calls:
            assert b.duration is not None and b.end is not None
            if b.duration < own[b.method] + MIN_WAIT:
                continue
            mine = {uid for _, _, uid in b.claims}
            best: DriverCall | None = None
            for a in calls[bisect_left(starts, b.time - longest):]:
                a_end = a.end
                assert a_end is not None
                if a.time >= b.end:
                    break
                if (a is b or not b.time < a_end <= b.end or a_end - max(a.time, b.time) < MIN_WAIT
                        or b.end - a_end > own[b.method] + SLACK or mine & {uid for _, _, uid in a.claims}):
                    continue
                if best is None or a_end > (best.end or 0.0):
                    best = a
            if best is not None:
                found.append((best, b))
    return found


def _about(call: DriverCall) -> str:
    return ", ".join(f"{ns}/{name}" for ns, name, _ in call.claims) or "no claims"


@INVARIANTS.register(NAME, summary="A call about one claim does not wait on a slow call about another: the driver's "
                     "handlers hold no lock across slow work.", judged="continuously", needs=("interposer",))  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for a, b in waits(snapshot):
        assert a.end is not None and b.end is not None and b.duration is not None
        claims = tuple(f"ResourceClaim/{ns}/{name}" for ns, name, _ in (*b.claims, *a.claims))
        out.append(Violation(
            NAME, f"{b.driver} on {b.node}: {b.method} of {_about(b)} was in flight from {b.time:.1f}s while {a.method} of "
            f"{_about(a)} ran, waited {a.end - max(a.time, b.time):.1f}s for it and answered {b.end - a.end:.2f}s after it "
            f"({b.duration:.1f}s in all): the driver handled them one at a time",
            tuple(dict.fromkeys(claims)), (), b.time, key=f"{b.node}/{b.time:.3f}/{b.method}"))
    return out
