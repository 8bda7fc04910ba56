"""DRA calls in flight in a fake driver, counted where the runner can read them.

The kubelet gives up on a NodePrepareResources call after 45 s (``pkg/kubelet/cm/dra/plugin``,
the plugin client's call timeout), but the driver goes on: a prepare that outlives the caller
still completes and changes the node. The runner judges the after-cleanup invariants only once no
call is in flight, so such a late prepare is seen. The driver writes ``<plugin dir>/calls.json``
(``{"pid", "inFlight"}``) when a call starts and when it ends; a file left by a dead process counts
as nothing in flight.

The file is created once per driver (replacing a previous process's whole) and then rewritten in
place, one ``pwrite`` of a fixed-width record under an exclusive ``flock``; a reader holds a shared
``flock`` while it reads, so it never sees half a record. Replacing the file by rename twice per
call cost about 0.4 ms each on a busy disk (a journalled create and rename), more than the
upstream test driver's whole unprepare.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["CALLS_FILE", "CallsInFlight", "in_flight"]

CALLS_FILE = "calls.json"


class CallsInFlight:
    """The driver's side: ``with calls.call(): ...`` around each DRA call."""

    _WIDTH = 64
    """Bytes of every record (padded with spaces, which JSON allows): a rewrite never leaves a longer one's tail."""

    def __init__(self, plugin_dir: Path) -> None:
        self.path = plugin_dir / CALLS_FILE
        self._lock = threading.Lock()
        self._n = 0
        # Not synced to disk: the counter is live state (a file left by a dead process counts as nothing).
        tmp = self.path.with_name(f".{CALLS_FILE}.{os.getpid()}.tmp")
        self._fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        weakref.finalize(self, os.close, self._fd)  # a driver host restarts nodes: one descriptor per start
        self._write()
        os.replace(tmp, self.path)

    def _record(self) -> bytes:
        return json.dumps({"pid": os.getpid(), "inFlight": self._n}).encode().ljust(self._WIDTH)

    def _write(self) -> None:
        record = self._record()
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            os.pwrite(self._fd, record, 0)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    @contextmanager
    def call(self) -> Iterator[None]:
        with self._lock:
            self._n += 1
            self._write()
        try:
            yield
        finally:
            with self._lock:
                self._n -= 1
                self._write()


def in_flight(plugin_dir: Path) -> int:
    """Calls in flight in the driver serving ``plugin_dir`` (0 when it is not running or never wrote)."""
    try:
        with open(plugin_dir / CALLS_FILE, "rb") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH)  # the writer rewrites in place under LOCK_EX
            raw = f.read()
        data = json.loads(raw)
        pid, n = int(data["pid"]), int(data["inFlight"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return 0
    except PermissionError:
        pass
    return n
