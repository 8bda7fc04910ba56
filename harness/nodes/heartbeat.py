"""Spread periodic work of many nodes over one timer thread and a shared thread pool.

200 nodes renewing a lease every 10 s is 20 calls a second; one thread per node would cost 200
threads and bunch the calls together. :class:`Heartbeats` keeps one heap of due times, spreads the
nodes evenly over the period, and runs each beat in the shared executor (never two beats of one node
at once). It knows nothing about Kubernetes: :class:`~.agent.NodeAgent` supplies the beat.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor

__all__ = ["Heartbeats"]

log = logging.getLogger("draguard.nodes")


class Heartbeats:
    """Calls each registered beat every ``interval`` seconds, phases spread evenly."""

    def __init__(self, executor: Executor, interval: float = 10.0) -> None:
        self.executor = executor
        self.interval = interval
        self._beats: dict[str, Callable[[], None]] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._running: set[str] = set()
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="heartbeats", daemon=True)

    def add_all(self, beats: dict[str, Callable[[], None]]) -> None:
        """Register beats; their first runs are spread over one interval, starting now."""
        now = time.monotonic()
        with self._cond:
            n = len(beats)
            for i, (key, beat) in enumerate(sorted(beats.items())):
                self._beats[key] = beat
                heapq.heappush(self._heap, (now + self.interval * i / max(n, 1), next(self._seq), key))
            self._cond.notify()

    def remove(self, key: str) -> None:
        with self._cond:
            self._beats.pop(key, None)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(timeout)
                if self._stop:
                    return
                due, _, key = heapq.heappop(self._heap)
                beat = self._beats.get(key)
                if beat is None:
                    continue
                # next beat keeps the phase; a late timer does not make beats drift together
                heapq.heappush(self._heap, (max(due + self.interval, time.monotonic()), next(self._seq), key))
                if key in self._running:
                    continue
                self._running.add(key)
            try:
                self.executor.submit(self._beat, key, beat)
            except RuntimeError:  # executor shut down
                return

    def _beat(self, key: str, beat: Callable[[], None]) -> None:
        try:
            beat()
        except Exception as exc:  # a failed beat is retried on schedule; the node goes stale if it persists
            log.warning("heartbeat of %s failed: %s", key, exc)
        finally:
            with self._cond:
                self._running.discard(key)
