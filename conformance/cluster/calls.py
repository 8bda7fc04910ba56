"""The driver's gRPC calls during the cluster suite: recorded by the interposer, judged check by check.

Where the gRPC interposer (:mod:`draguard.harness.proxy`) sits between the node agents and the driver,
every DRA call and its answer is in its record (:class:`CallRecord`: the interposer's in-memory
recorder, or the JSON-lines file that ``draguard proxy --record`` writes). :class:`CallJudge` cuts that
record into the window of each check (the calls from the check's start until the driver went quiet
after its cleanup) and judges the invariants that judge any driver from its calls alone
(:data:`JUDGED`, from :mod:`draguard.harness.invariants`) over each window, with the claims the check
saw. What it finds is kept per invariant with the check it was seen in; the suite's
``conformance.driver-calls.<invariant>`` checks report it (:mod:`.driver_calls`).

It also answers, from the same record, which CDI device IDs the driver answered for a claim, so the
suite can resolve them in the node's CDI folder.

Talks to: the interposer's record only (never the driver, never the API server).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import draguard.harness.invariants  # noqa: F401  (registers the invariants)
from draguard.harness.core.registry import INVARIANTS
from draguard.harness.invariants.calls import PREPARE, UNPREPARE, history_of
from draguard.harness.invariants.snapshot import DriverCall, Obj, Snapshot
from draguard.harness.invariants.violation import Violation
from draguard.harness.proxy.recorder import driver_call, read_calls

__all__ = ["JUDGED", "CallRecord", "RecordFile", "Finding", "CallJudge", "Window"]

JUDGED = ("prepare-idempotent", "unprepare-unknown", "per-claim-errors", "lock-free-handlers",
          "prepared-devices-allocated")
"""The invariants judged over each check's calls: they read only the calls, their answers and the claims
(``cdi-specs-resolve`` and ``no-leak`` read node files: the suite judges the CDI folder itself, check by
check, where it can read it)."""


class CallRecord(Protocol):
    """The interposer's record: its entries from the ``since``-th on, in order."""

    def recorded(self, since: int = 0) -> list[dict[str, Any]]: ...


class RecordFile:
    """A record the interposer writes to a file (``draguard proxy --record FILE``), read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def recorded(self, since: int = 0) -> list[dict[str, Any]]:
        return read_calls(self.path)[since:]


@dataclass(frozen=True)
class Finding:
    """A breach of an invariant, in the calls of one check."""

    check: str
    violation: Violation


@dataclass
class Window:
    """One check's stretch of the record: where it starts, and when (Unix seconds)."""

    check: str
    start: int
    started: float
    claims: dict[str, Obj] = field(default_factory=dict)
    """uid -> the ResourceClaim as the check last saw it (allocated), for prepared-devices-allocated."""


class CallJudge:
    """Judges :data:`JUDGED` over each check's window of ``record``; keeps what it found."""

    def __init__(self, record: CallRecord, quiet: float = 2.0) -> None:
        self.record = record
        self.quiet = quiet
        """Seconds without a new call after which the driver counts as quiet (a check's calls are over)."""
        self.found: dict[str, dict[tuple[str, str], Finding]] = {name: {} for name in JUDGED}
        self.calls_judged: dict[str, int] = {}
        """check id -> how many DRA calls of its window were judged."""
        self._lock = threading.Lock()

    # -- windows ------------------------------------------------------------------------------------
    def open(self, check: str) -> Window:
        return Window(check, len(self.record.recorded()), time.time())

    def calls(self, window: Window) -> tuple[DriverCall, ...]:
        """The window's calls so far, timed in seconds from the check's start."""
        return tuple(driver_call(e, -window.started) for e in self.record.recorded(window.start))

    def settle(self, window: Window, timeout: float) -> None:
        """Wait until no call was recorded for :attr:`quiet` seconds (at most ``timeout``): the calls the
        check's cleanup set off (unprepares of deleted pods) are then in its window, not the next check's."""
        deadline = time.monotonic() + timeout
        seen, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            now = len(self.record.recorded(window.start))
            if now != seen:
                seen, since = now, time.monotonic()
            elif time.monotonic() - since >= self.quiet:
                return
            time.sleep(0.25)

    # -- judging ------------------------------------------------------------------------------------
    def judge(self, window: Window) -> list[Finding]:
        """Judge the window's calls now; returns the findings new since its last judging."""
        calls = self.calls(window)
        snapshot = Snapshot(time=round(time.time() - window.started, 3), claims=tuple(window.claims.values()),
                            driver_calls=calls)
        new: list[Finding] = []
        with self._lock:
            self.calls_judged[window.check] = sum(1 for c in calls if c.method in (PREPARE, UNPREPARE))
            for name in JUDGED:
                for v in INVARIANTS.get(name).target(snapshot):
                    key = (window.check, v.key or v.message)
                    if key not in self.found[name]:
                        self.found[name][key] = finding = Finding(window.check, v)
                        new.append(finding)
        return new

    def findings(self, invariant: str) -> list[Finding]:
        with self._lock:
            return list(self.found[invariant].values())

    # -- answers ------------------------------------------------------------------------------------
    def answered_ids(self, window: Window, node: str, uid: str) -> list[str] | None:
        """The CDI device IDs of the devices the driver's last successful prepare of claim ``uid`` on
        ``node`` answered, while it holds it prepared; None when the record has no such answer."""
        for (n, _, u), st in history_of(Snapshot(time=0.0, driver_calls=self.calls(window))).states.items():
            if n == node and u == uid and st.prepared and st.answer is not None:
                return list(dict.fromkeys(i for d in st.answer for i in d.cdi_ids))
        return None

    def claims_called(self, window: Window) -> Iterable[tuple[str, str]]:
        """(node, claim uid) of every claim a prepare of the window named."""
        return {(c.node, uid) for c in self.calls(window) if c.method == PREPARE for _, _, uid in c.claims}
