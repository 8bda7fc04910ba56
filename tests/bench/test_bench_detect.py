"""The live detection benchmark: which report answers which injected violation, and what counts as missed."""

from __future__ import annotations

from draguard.harness.bench_detect import detected, seen_by_watch


def _entry(t: float, summary: str, kind: str = "no-double-allocation", source: str = "invariant") -> dict[str, object]:
    return {"t": t, "source": source, "kind": kind, "event": "violated", "summary": summary}


def test_each_injection_is_answered_by_the_first_report_naming_its_claim() -> None:
    timeline = [
        _entry(3.0, "device gpu.draguard.dev/n-0/gpu-1 is allocated 2 times: to ResourceClaim/ns/p-0-gpu-x, ResourceClaim/ns/dup-10"),
        _entry(9.0, "device gpu.draguard.dev/n-0/gpu-1 is allocated 3 times: to ResourceClaim/ns/dup-10, ResourceClaim/ns/x"),
        _entry(4.0, "ResourceClaim/ns/dup-1 is half allocated", kind="claim-atomic"),  # another invariant: not an answer
        _entry(4.5, "ResourceClaim/ns/dup-1 created", source="watch", kind="ResourceClaim"),  # not a report at all
    ]
    # dup-10 sent at monotonic 102.2, the timeline started at 100: reported 0.8 s later.
    latencies, missed = detected(timeline, {"dup-1": 101.0, "dup-10": 102.2}, start=100.0)
    assert latencies == {"dup-10": 0.8}
    assert missed == ["dup-1"]  # "dup-1" is a prefix of "dup-10": no false answer


def test_nothing_reported_is_everything_missed() -> None:
    assert detected([], {"dup-0": 1.0, "dup-1": 2.0}, start=0.0) == ({}, ["dup-0", "dup-1"])


def test_the_watch_part_is_the_first_modified_event_of_the_claim() -> None:
    def watched(t: float, name: str, event: str) -> dict[str, object]:
        return {"t": t, "source": "watch", "kind": "ResourceClaim", "event": event, "name": name, "summary": ""}

    timeline = [watched(1.9, "dup-0", "ADDED"),  # created unallocated: not the violation yet
                watched(2.3, "dup-0", "MODIFIED"), watched(2.8, "dup-0", "MODIFIED"),
                watched(2.5, "p-1-gpu-x", "MODIFIED")]  # fmt: skip
    assert seen_by_watch(timeline, {"dup-0": 102.0, "dup-1": 103.0}, start=100.0) == {"dup-0": 0.3}
