"""Benchmark hook for ``draguard bench``: the cost of keeping many fake nodes alive in one process.

:func:`heartbeat_load` starts ``count`` fake nodes in this process against a cluster, lets them
heartbeat for a while, and reports the CPU they used and how fresh their leases stayed. The lead's
bench command decides what passes (the design target: 200 nodes on 2 cores). Talks to the API
server through :class:`~draguard.harness.kube.Kube`.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from draguard.harness.kube import Kube

from draguard.harness.nodes.agent import FakeNodes
from draguard.harness.nodes.node import LEASE_NAMESPACE, NodeSpec

__all__ = ["heartbeat_load"]


def _renewed_at(renew_time: str) -> float:
    """A Lease's renewTime (RFC 3339 with microseconds) as seconds since the epoch."""
    return datetime.strptime(renew_time.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def _age(renew_time: str) -> float:
    return time.time() - _renewed_at(renew_time)


def heartbeat_load(
    kube: Kube,
    count: int = 200,
    duration: float = 30.0,
    interval: float = 10.0,
    root: Path | None = None,
    cleanup: bool = True,
) -> dict[str, Any]:
    """Run ``count`` nodes for ``duration`` seconds; returns timings, CPU use and lease freshness.

    Keys: ``nodes``, ``start_s`` (until all nodes exist and pods were listed), ``seconds`` (the
    steady-state window), ``cpu_s`` and ``cores`` (CPU of this process in the window, and that divided
    by the window), ``lease_max_age_s`` / ``lease_mean_age_s`` (renewTime ages at the end; healthy
    when below ``interval`` plus a little), ``stale_leases`` (older than the 40 s lease duration).
    """
    run = uuid.uuid4().hex[:6]
    specs = [NodeSpec(f"bench-{run}-{i}", run_id=f"bench-{run}") for i in range(count)]
    tmp = None
    if root is None:
        tmp = tempfile.TemporaryDirectory(prefix="dgbench", dir="/tmp")
        root = Path(tmp.name)
    nodes = FakeNodes(kube, specs, root, heartbeat_interval=interval, workers=4)
    started = time.monotonic()
    nodes.start(timeout=max(60.0, count * 0.5))
    start_s = time.monotonic() - started
    try:
        cpu0, t0 = time.process_time(), time.monotonic()
        time.sleep(duration)
        cpu_s, seconds = time.process_time() - cpu0, time.monotonic() - t0
        names = {s.name for s in specs}
        leases = [
            lease for lease in kube.items("Lease", LEASE_NAMESPACE) if lease["metadata"]["name"] in names
        ]
        ages = [_age(lease["spec"]["renewTime"]) for lease in leases]
    finally:
        nodes.stop()
        if cleanup:
            nodes.delete_nodes()
        if tmp is not None:
            tmp.cleanup()
    return {
        "nodes": count,
        "start_s": round(start_s, 3),
        "seconds": round(seconds, 3),
        "cpu_s": round(cpu_s, 3),
        "cores": round(cpu_s / seconds, 4) if seconds else 0.0,
        "leases": len(leases),
        "lease_max_age_s": round(max(ages), 3) if ages else None,
        "lease_mean_age_s": round(sum(ages) / len(ages), 3) if ages else None,
        "stale_leases": sum(1 for a in ages if a > 40) + (count - len(leases)),
    }
