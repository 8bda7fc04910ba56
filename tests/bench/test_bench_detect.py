"""The live detection benchmark: which report answers which injected violation, and what counts as missed."""

from __future__ import annotations

from draguard.harness.bench.detect import detected, seen_by_watch


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


def test_the_summary_splits_each_phase_into_the_api_servers_part_and_draguards() -> None:
    from draguard.harness.bench.detect import summarize

    def run(latency: dict[str, float], api: dict[str, float], phase: str) -> dict[str, object]:
        return {"injected": len(latency) + 1, "reported": len(latency), "latency_s": latency, "api_watch_s": api,
                "write_s": dict(api), "watch_s": dict(api), "phase": {n: phase for n in [*latency, "dup-9"]}}

    runs = [run({"dup-0": 1.2, "dup-1": 0.3}, {"dup-0": 1.0, "dup-1": 0.2, "dup-9": 0.1}, "scheduling"),
            run({"dup-2": 0.2}, {"dup-2": 0.05}, "steady")]
    r = summarize(runs, nodes=2, pods=4, devices=2, injections=3)  # type: ignore[arg-type]
    assert r["by_phase"]["scheduling"]["after_api_p99"] == 0.2 and r["by_phase"]["steady"]["after_api_p50"] == 0.15
    assert r["after_api_s"]["max"] == 0.2 and r["latency_s"]["max"] == 1.2
    # one injection never reported (dup-9 is in neither run's latencies): neither target is met
    assert r["reported"] == 3 and r["injected"] == 5 and not r["met"] and not r["met_after_api"]
    whole = summarize([dict(runs[0], injected=2)], nodes=2, pods=4, devices=2, injections=2)  # type: ignore[arg-type]
    assert not whole["met"] and whole["met_after_api"]  # 1.2 s in all, 0.2 s of it draguard's
