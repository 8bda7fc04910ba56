"""A keyed work queue with per-key exponential backoff, after client-go's rate-limited workqueue.

A key is queued at most once, is never handed to two workers at once, and a key added while being
processed is handed out again after :meth:`WorkQueue.done`. Used by :mod:`.agent` for pod syncs.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque

__all__ = ["WorkQueue"]


class WorkQueue:
    """Keys to work on; ``get`` blocks until one is due or the queue shuts down (then ``None``)."""

    def __init__(self, base_delay: float = 0.5, max_delay: float = 30.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._delayed: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._failures: dict[str, int] = {}
        self._shutdown = False

    def add(self, key: str) -> None:
        with self._cond:
            if self._shutdown or key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        with self._cond:
            heapq.heappush(self._delayed, (time.monotonic() + delay, next(self._seq), key))
            self._cond.notify()

    def add_rate_limited(self, key: str) -> float:
        """Requeue after an exponentially growing delay; returns the delay."""
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        delay: float = min(self.base_delay * (2**n), self.max_delay)
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def get(self) -> str | None:
        with self._cond:
            while True:
                if self._shutdown:
                    return None
                now = time.monotonic()
                while self._delayed and self._delayed[0][0] <= now:
                    _, _, key = heapq.heappop(self._delayed)
                    if key not in self._dirty:
                        self._dirty.add(key)
                        if key not in self._processing:
                            self._queue.append(key)
                if self._queue:
                    key = self._queue.popleft()
                    self._processing.add(key)
                    self._dirty.discard(key)
                    return key
                timeout = self._delayed[0][0] - now if self._delayed else None
                self._cond.wait(timeout)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue) + len(self._delayed)
