"""The settle phase of a run: wait until nothing changed for a quiet period (longer while a pod is not
running: the scheduler's and kubelet's back-offs) or the settle timeout, and for the progress the
scenario expects; then the judge judges every invariant but the after-cleanup ones, gangs settled.

Talks to: the run's watches (through the observer), the :class:`~draguard.harness.judge.Judge`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from ..invariants import judged
from ..judge import Judge
from ..kube import Obj
from ..scenario.types import Scenario
from .context import RunHandles

__all__ = ["settle", "quiet_needed", "SETTLE_QUIET", "RETRY_QUIET"]

SETTLE_QUIET = 4.0
"""Seconds without a change after which a run whose pods all run (or ended) is settled."""
RETRY_QUIET = 11.0
"""Seconds without a change after which a run with a pod not running is settled: the scheduler retries
a pod that failed to schedule (an API server restart, no device free yet) only after its back-off,
up to ``podMaxBackoffSeconds`` (10 s by default, kube-scheduler's KubeSchedulerConfiguration v1), and
a kubelet retries a failed prepare after a back-off of about as long. After 4 s of quiet such a pod may
still be bound later: a gang judged partial then shows the scheduler's back-off, not a partial gang."""


def quiet_needed(pods: Iterable[Obj]) -> float:
    """The quiet period that settles a run with ``pods``: ``RETRY_QUIET`` while one is not running
    (pending, bound and not started, or being deleted), else ``SETTLE_QUIET``."""
    waiting = any((p.get("status") or {}).get("phase") not in ("Running", "Succeeded", "Failed")
                  or p["metadata"].get("deletionTimestamp") for p in pods)
    return RETRY_QUIET if waiting else SETTLE_QUIET


def settle(h: RunHandles, scenario: Scenario, judge: Judge, log: Callable[[str], None]) -> None:
    """Wait for the run to settle, then have ``judge`` judge it settled."""
    quiet_of: tuple[object, float] = (None, SETTLE_QUIET)

    def settle_quiet() -> float:
        """How long the run must be without a change to be settled now: ``RETRY_QUIET`` while a pod of
        the run is not running (pending, bound and not started, being deleted), else ``SETTLE_QUIET``."""
        nonlocal quiet_of
        pods = h.observer.frozen("Pod")
        if pods is not quiet_of[0]:
            quiet_of = (pods, quiet_needed(pods))
        return quiet_of[1]

    timeout = scenario.settle.timeout.total_seconds()
    deadline = time.monotonic() + timeout
    quiet = h.observer.wait_quiet(quiet=lambda: min(settle_quiet(), timeout), timeout=timeout)
    # Quiet is not settled while expected progress has not come yet: a kubelet retries a failed
    # prepare only after its back-off (about 10 s), longer than the quiet period. Wait for it,
    # within the settle timeout and the fleet's retry grace (real kubelets), then for quiet again.
    wanted = scenario.expect.progress
    deadline += h.fleet.retry_grace  # real kubelets: their retry back-off and resync come on top of the settle
    while wanted and len(judge.progress_seen) < len(wanted) and time.monotonic() < deadline:
        time.sleep(0.5)
        if len(judge.progress_seen) == len(wanted):
            quiet = h.observer.wait_quiet(quiet=lambda: min(settle_quiet(), timeout),
                                          timeout=max(0.0, deadline - time.monotonic()))
    judge.settled = True
    log("settled" if quiet else f"settle timeout ({timeout:.0f}s) reached before {settle_quiet():.0f}s "
        "without a change")
    judge.judge(judged("continuously", "at-settle"))
