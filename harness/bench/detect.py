"""``detection``: how long a live run takes to report a violation, measured end to end.

``invariant-cost`` judges synthetic snapshots and adds the judging interval: a model of the latency.
This benchmark makes the violation happen in a live run and times its report:

1. A scenario runs on the local backend with fake nodes and the driver host (``nodes`` x ``devices``,
   ``pods`` single-device pods). A held-back workload arrives once every pod is Running (step
   ``ready``) and another one a while later (step ``done``): the window between them is the run's
   steady state, judged continuously by the runner as in any scenario.
2. This benchmark double-allocates devices through the API, one at a time at irregular intervals: a
   new ResourceClaim (run label, run namespace) whose status allocates a device that a Running
   pod's claim holds, as a broken scheduler or a stale allocation would. Half of them while the
   pods are still being scheduled (from a tenth Running: the runner's watches and rounds busy with
   the backlog), half in the steady state; each is counted in the phase it was sent in (before or
   after step ``ready`` started).
   Each time the monotonic clock is read just before the write is sent: the violation exists
   from some moment after that. The claims are deleted again before the run's cleanup.
   The writes are sent by a child process of their own (``python -m draguard.harness.bench.detect``):
   the write's round trip (``write_s``, from just before it is sent until the API server's answer is
   read) is then the API server's, not time the runner's threads kept the writer from its answer.
3. The runner reports a breach when it records it: its ``invariant`` timeline entry (the same clock)
   names the claims of the device. Detection latency = that entry's time - the time before the
   write; an injection without a report within the run is counted as missed.

What it includes: the API write, the watch event reaching the runner, the wait for the next judging
round (``JUDGE_INTERVAL``), the snapshot and the evaluation at that fleet's size. The target is the
issue's: p99 under 1 s, and nothing missed. ``gang-atomic`` reports a partial gang only after its
grace period (``spec.timing.gangGrace``, 30 s by default, by design: gangs bind over time); its
latency past the grace is the same judging round.

Talks to: the local backend (through the runner), the API server (the injected claims).
"""

from __future__ import annotations

import json
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from draguard.harness.core.errors import DraguardError, HarnessError
from draguard.harness.kube import RUN_LABEL, Kube
from draguard.harness.runner.runner import JUDGE_INTERVAL, Runner, RunOptions
from draguard.harness.scenario.loader import parse_scenario

if TYPE_CHECKING:
    from draguard.harness.runner.runner import Runner

__all__ = ["bench_detection", "detected", "seen_by_watch", "summarize"]

Progress = Callable[[str], None]

DRIVER = "gpu.draguard.dev"


def _scenario(nodes: int, pods: int, devices: int, window: float) -> str:
    claim = f"claims: [{{name: gpu, requests: [{{name: gpu, deviceClassName: {DRIVER}}}]}}]"
    wait = max(120, pods // 2)
    return f"""
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {{name: bench-detection}}
spec:
  driver: {{hosting: shared}}
  nodes: [{{namePrefix: n, count: {nodes}, topology: {{gpus: {devices}}}}}]
  deviceClasses: [{{name: {DRIVER}, selectors: ["device.driver == '{DRIVER}'"]}}]
  workloads:
    - {{name: p, replicas: {pods}, {claim}}}
    - {{name: ready, replicas: 1, {claim}}}
    - {{name: done, replicas: 1, {claim}}}
  timeline:
    - {{name: ready, when: {{workload: p, phase: Running}}, timeout: {wait}s, fault: arrive, params: {{workload: ready}}}}
    - {{name: done, after: {{step: ready, delay: {window:.0f}s}}, fault: arrive, params: {{workload: done}}}}
  settle: {{timeout: 60s, cleanup: {wait}s}}
  expect: {{violate: [no-double-allocation]}}
"""


class _Injector:
    """Double-allocates held devices while the pods are scheduled and in the steady state; remembers
    when each write was sent."""

    def __init__(self, runner: Runner, injections: int, pods: int, seed: int, interval: float, progress: Progress) -> None:
        self.runner, self.injections, self.pods, self.progress = runner, injections, pods, progress
        self.interval = interval
        self.rng = random.Random(seed)
        self.sent: dict[str, float] = {}  # claim name -> monotonic time just before its allocation was written
        self.acked: dict[str, float] = {}  # claim name -> monotonic time the API server answered that write
        self.used: set[tuple[str, str, str]] = set()  # devices double-allocated so far
        self.error: BaseException | None = None
        self.writer: subprocess.Popen[str] | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="detection-injector", daemon=True)

    def _running_claims(self) -> list[dict[str, Any]]:
        """Allocated claims of Running pods of ``p``, from the run's own watch (listing thousands of pods
        from the API every half second would load the runner's process and the API server it measures)."""
        running = {p["metadata"]["name"] for p in self.runner.live_objects("Pod")
                   if (p.get("status") or {}).get("phase") == "Running" and p["metadata"]["name"].startswith("p-")}  # fmt: skip
        out = []
        for c in self.runner.live_objects("ResourceClaim"):
            reserved = [r.get("name") for r in (c.get("status") or {}).get("reservedFor") or []]
            if any(r in running for r in reserved) and (c.get("status") or {}).get("allocation"):
                out.append(c)
        return out

    def _run(self) -> None:
        try:
            first = self.injections // 2
            kube: Kube | None = None
            for running, count in ((max(1, self.pods // 10), first), (self.pods, self.injections - first)):
                kube = self._wait_running(running)
                if kube is None:
                    return
                self._start_writer()
                self.progress(f"detection: {running} pod(s) Running; injecting {count} double allocation(s)")
                if not self._inject(kube, count):
                    return
            # Gone again before the run's cleanup, whose no-leak judges what is left allocated.
            if kube is not None and not self.stop.wait(3 * self.interval + 2):
                for name in self.sent:
                    kube.delete("ResourceClaim", name, self.runner.live_namespace())
        except BaseException as exc:  # noqa: BLE001 - reported by the benchmark
            self.error = exc

    def _inject(self, kube: Kube, count: int) -> bool:
        """``count`` double allocations of devices not used so far; False when stopped first."""
        namespace = self.runner.live_namespace()
        held = [c for c in self._running_claims() if _device(c) not in self.used]
        self.rng.shuffle(held)
        for victim in held[:count]:
            if self.stop.wait(self.rng.uniform(0.6, 1.4)):  # irregular: injections fall anywhere in a judging round
                return False
            result = dict(victim["status"]["allocation"]["devices"]["results"][0])
            self.used.add(_device(victim))
            name = f"dup-{len(self.sent)}"
            claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": name, "namespace": namespace, "labels": {RUN_LABEL: self.runner.run_id}},
                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}  # fmt: skip
            status = {"allocation": {"devices": {"results": [result]},
                                     "nodeSelector": victim["status"]["allocation"].get("nodeSelector")}}  # fmt: skip
            self.sent[name], self.acked[name] = self._write(claim, status)
        return True

    def _write(self, claim: dict[str, Any], status: dict[str, Any]) -> tuple[float, float]:
        """Create ``claim`` and write ``status`` through the writer process: (sent, answered), monotonic."""
        self._start_writer()
        assert self.writer is not None and self.writer.stdin is not None and self.writer.stdout is not None
        self.writer.stdin.write(json.dumps([claim, status]) + "\n")
        self.writer.stdin.flush()
        answer = json.loads(self.writer.stdout.readline() or '{"error": "the writer process ended"}')
        if isinstance(answer, dict):
            raise HarnessError(f"detection: writing claim {claim['metadata']['name']}: {answer['error']}")
        return float(answer[0]), float(answer[1])

    def _start_writer(self) -> None:
        if self.writer is None:
            kubeconfig = self.runner.live_kubeconfig()
            if kubeconfig is None:
                raise HarnessError("detection: the run has no kubeconfig to write its claims with")
            self.writer = subprocess.Popen(
                [sys.executable, "-m", "draguard.harness.bench.detect", str(kubeconfig), self.runner.live_namespace()],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
            assert self.writer.stdout is not None
            if json.loads(self.writer.stdout.readline() or "null") != "ready":
                raise HarnessError("detection: the writer process did not start")

    def watched(self) -> dict[str, float]:
        """When the writer's own watch of the run's claims saw each injected claim allocated (monotonic)."""
        if self.writer is None or self.writer.poll() is not None:
            return {}
        assert self.writer.stdin is not None and self.writer.stdout is not None
        self.writer.stdin.write('"report"\n')
        self.writer.stdin.flush()
        answer = json.loads(self.writer.stdout.readline() or "{}")
        return {str(k): float(v) for k, v in answer.items()} if isinstance(answer, dict) and "error" not in answer else {}

    def close(self) -> None:
        if self.writer is not None:
            self.writer.kill()
            self.writer.wait()
            self.writer = None

    def _wait_running(self, pods: int) -> Kube | None:
        """The run's client once ``pods`` pods of ``p`` are Running (None when stopped first)."""
        while not self.stop.wait(0.5):
            kube = self.runner.live_kube()
            namespace = self.runner.live_namespace()
            if kube is None or not namespace:
                continue
            if len(self._running_claims()) >= pods:
                return kube
        return None


def _device(claim: dict[str, Any]) -> tuple[str, str, str]:
    r = claim["status"]["allocation"]["devices"]["results"][0]
    return str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", ""))


def detected(timeline: list[dict[str, Any]], sent: dict[str, float], start: float) -> tuple[dict[str, float], list[str]]:
    """Latency of each injected claim's first ``no-double-allocation`` report (timeline time minus the
    monotonic time just before its write, less the timeline's ``start``), and the claims never reported."""
    reported: dict[str, float] = {}
    for e in timeline:
        if e["source"] == "invariant" and e["kind"] == "no-double-allocation":
            for name in _CLAIM.findall(str(e["summary"])):
                if name in sent:
                    reported.setdefault(name, e["t"])
    latencies = {n: round(reported[n] - (t - start), 3) for n, t in sent.items() if n in reported}
    return latencies, sorted(set(sent) - set(reported))


def seen_by_watch(timeline: list[dict[str, Any]], sent: dict[str, float], start: float) -> dict[str, float]:
    """Time from just before each injected claim's allocation was written to the runner's watch seeing
    it (the claim's first MODIFIED event: it was created unallocated): the part of the latency spent
    before any judging round could see the violation."""
    seen: dict[str, float] = {}
    for e in timeline:
        if e["source"] == "watch" and e["kind"] == "ResourceClaim" and e["event"] == "MODIFIED" and e["name"] in sent:
            seen.setdefault(e["name"], e["t"])
    return {n: round(seen[n] - (sent[n] - start), 3) for n in sent if n in seen}


_CLAIM = re.compile(r"ResourceClaim/[^/\s,]+/([^\s,]+)")
"""A claim's name in a violation's summary (``ResourceClaim/<namespace>/<name>``)."""


def _one(nodes: int, pods: int, devices: int, injections: int, seed: int, progress: Progress) -> dict[str, Any]:
    window = injections * 1.4 + 15  # every injection sent, and a few rounds to report the last one
    scenario = parse_scenario(_scenario(nodes, pods, devices, window), "bench-detection.yaml")
    runner = Runner(scenario, RunOptions(backend="local", progress=progress))
    injector = _Injector(runner, injections, pods, seed, JUDGE_INTERVAL, progress)
    injector.thread.start()
    try:
        result = runner.run()
    finally:
        injector.stop.set()
        injector.thread.join(timeout=30)
        independent = injector.watched()
        injector.close()
    if result.record is not None:
        result.record.discard()  # no report is rendered: what the run recorded goes
    if injector.error is not None:
        raise injector.error
    timeline = list(result.timeline.events()) if result.timeline is not None else []
    start = runner.timeline.start
    latencies, missed = detected(timeline, injector.sent, start)
    watched = seen_by_watch(timeline, injector.sent, start)
    ready = next((e["t"] for e in timeline if e["source"] == "fault" and e["name"] == "ready" and e["event"] == "start"), None)
    phase = {n: "scheduling" if ready is None or t - start < ready else "steady" for n, t in injector.sent.items()}
    progress(f"detection: {len(latencies)}/{len(injector.sent)} reported, latency "
             f"p50 {statistics.median(latencies.values()) if latencies else None} s, max "
             f"{max(latencies.values()) if latencies else None} s; run ok={result.ok}")  # fmt: skip
    return {"injected": len(injector.sent), "reported": len(latencies), "missed": missed,
            "latency_s": latencies, "watch_s": watched, "phase": phase,
            "write_s": {n: round(injector.acked[n] - t, 3) for n, t in injector.sent.items() if n in injector.acked},
            "api_watch_s": {n: round(independent[n] - t, 3) for n, t in injector.sent.items() if n in independent},
            "judge_interval_s": JUDGE_INTERVAL, "run_ok": result.ok,
            "run_error": result.error, "shortfalls": result.shortfalls, "wall_s": round(result.duration, 1)}  # fmt: skip


def bench_detection(repeat: int, progress: Progress, nodes: int = 500, pods: int = 1000, devices: int = 8,
                    injections: int = 30) -> dict[str, Any]:  # fmt: skip
    """``injections``: double allocations injected per run (at most ``pods``)."""
    if pods + 2 > nodes * devices:
        raise HarnessError(f"detection: {pods} pods and 2 arrivals do not fit on {nodes} nodes x {devices} devices")
    runs = [_one(nodes, pods, devices, min(injections, pods), seed, progress) for seed in range(repeat)]
    return summarize(runs, nodes, pods, devices, min(injections, pods))


def summarize(runs: list[dict[str, Any]], nodes: int, pods: int, devices: int, injections: int) -> dict[str, Any]:
    """The benchmark's result from its runs' samples (percentiles over every injection of every run)."""
    values = sorted(v for r in runs for v in r["latency_s"].values())
    injected = sum(r["injected"] for r in runs)
    reported = sum(r["reported"] for r in runs)

    def q(f: float, of: list[float] | None = None) -> float | None:
        v = values if of is None else of
        return round(v[min(len(v) - 1, int(len(v) * f))], 3) if v else None

    by_phase: dict[str, dict[str, Any]] = {}
    for label in ("scheduling", "steady"):
        mine = sorted(v for r in runs for n, v in r["latency_s"].items() if r["phase"][n] == label)
        sent = sum(1 for r in runs for p in r["phase"].values() if p == label)
        watch = sorted(v for r in runs for n, v in r["watch_s"].items() if r["phase"][n] == label)
        write = sorted(v for r in runs for n, v in r.get("write_s", {}).items() if r["phase"][n] == label)
        api = sorted(v for r in runs for n, v in r.get("api_watch_s", {}).items() if r["phase"][n] == label)
        # draguard's own part: from the API server showing the violation to a watcher to the report
        own = sorted(round(r["latency_s"][n] - v, 3) for r in runs for n, v in r.get("api_watch_s", {}).items()
                     if r["phase"][n] == label and n in r["latency_s"])  # fmt: skip
        by_phase[label] = {"injected": sent, "reported": len(mine), "p50": q(0.5, mine), "p99": q(0.99, mine),
                           "max": mine[-1] if mine else None, "watch_p50": q(0.5, watch), "watch_p99": q(0.99, watch),
                           "write_p50": q(0.5, write), "write_p99": q(0.99, write),
                           "api_watch_p50": q(0.5, api), "api_watch_p99": q(0.99, api),
                           "after_api_p50": q(0.5, own), "after_api_p99": q(0.99, own)}  # fmt: skip
    p99 = q(0.99)
    own_all = sorted(round(r["latency_s"][n] - v, 3) for r in runs for n, v in r.get("api_watch_s", {}).items()
                     if n in r["latency_s"])  # fmt: skip
    return {
        "unit": "s (detection latency p50, live)",
        "median": q(0.5),
        "nodes": nodes, "pods": pods, "devices_per_node": devices, "injections_per_run": injections,
        "injected": injected, "reported": reported,
        "latency_s": {"p50": q(0.5), "p90": q(0.9), "p99": p99, "max": values[-1] if values else None, "n": len(values)},
        "by_phase": by_phase,
        "what": "a ResourceClaim double-allocating a device a Running pod holds, written through the API while the "
                "pods are scheduled (from a tenth Running) and in the steady state (all Running); latency from just "
                "before the write to the runner's no-double-allocation report",
        "target": "every injected violation reported, p99 under 1 s",
        "met": bool(values) and reported == injected and p99 is not None and p99 < 1.0,
        "after_api_s": {"p50": q(0.5, own_all), "p99": q(0.99, own_all), "max": own_all[-1] if own_all else None},
        "met_after_api": bool(own_all) and reported == injected and (q(0.99, own_all) or 0.0) < 1.0,
        "parts": "write: the write's round trip (the violation is committed within it); api_watch: until a watch "
                 "in a process of its own, not slowed by the runner, saw it (the API server's part); after_api: "
                 "from then to the report (the runner's watch, its judging round, the record: draguard's part). "
                 "met: the whole latency from just before the write; met_after_api: draguard's part",
        "samples": runs,
    }  # fmt: skip


def _writer(kubeconfig: str, namespace: str) -> int:
    """The writer process: for each ``[claim, status]`` line on stdin, create the claim, then write its
    status; answer ``[sent, answered]`` (monotonic, the clock the runner's timeline reads) or
    ``{"error": ...}`` on stdout. It also watches the namespace's claims as the runner does (every
    claim of the run), in a process the runner's threads do not slow: on a ``"report"`` line it answers
    when that watch first saw each written claim allocated, the API server's part of the latency."""
    kube = Kube.from_kubeconfig(Path(kubeconfig))
    written: set[str] = set()
    seen: dict[str, float] = {}
    lock = threading.Lock()
    listed = threading.Event()

    def changed(etype: str, obj: dict[str, Any]) -> None:
        if etype == "MODIFIED" and (obj.get("status") or {}).get("allocation"):
            with lock:
                seen.setdefault(obj["metadata"].get("name", ""), time.monotonic())

    def watch() -> None:
        kube.list_watch("ResourceClaim", lambda items: listed.set(), changed, threading.Event(), namespace,
                        timeout_seconds=300)  # fmt: skip

    threading.Thread(target=watch, daemon=True).start()
    listed.wait(60)
    print(json.dumps("ready"), flush=True)  # written claims are seen by the watch from now on
    for line in sys.stdin:
        request = json.loads(line)
        if request == "report":
            with lock:
                print(json.dumps({n: t for n, t in seen.items() if n in written}), flush=True)
            continue
        claim, status = request
        try:
            obj = kube.create(claim)
            obj["status"] = status
            written.add(claim["metadata"]["name"])
            sent = time.monotonic()
            kube.replace(obj, "status")
            print(json.dumps([sent, time.monotonic()]), flush=True)
        except DraguardError as exc:
            print(json.dumps({"error": str(exc)}), flush=True)
    return 0


if __name__ == "__main__":
    from draguard.harness.core.process import child_main

    sys.exit(child_main(lambda argv: _writer(argv[0], argv[1])))
