"""DRA calls in flight in a fake driver, counted where the runner can read them.

The kubelet gives up on a NodePrepareResources call after 45 s (``pkg/kubelet/cm/dra/plugin``,
the plugin client's call timeout), but the driver goes on: a prepare that outlives the caller
still completes and changes the node. The runner judges the after-cleanup invariants only once no
call is in flight, so such a late prepare is seen. The driver writes ``<plugin dir>/calls.json``
(``{"pid", "inFlight"}``) when a call starts and when it ends; a file left by a dead process counts
as nothing in flight.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .state import atomic_write

__all__ = ["CALLS_FILE", "CallsInFlight", "in_flight"]

CALLS_FILE = "calls.json"


class CallsInFlight:
    """The driver's side: ``with calls.call(): ...`` around each DRA call."""

    def __init__(self, plugin_dir: Path) -> None:
        self.path = plugin_dir / CALLS_FILE
        self._lock = threading.Lock()
        self._n = 0
        self._write()

    def _write(self) -> None:
        # Not durable: the counter is live state (a file left by a dead process counts as nothing), so the
        # four fsyncs per call bought nothing (py-spy put a quarter of a fake prepare's samples in this
        # write; leaving them out did not change driver-calls' latency beyond this machine's noise).
        atomic_write(self.path, json.dumps({"pid": os.getpid(), "inFlight": self._n}).encode(), point="calls",
                     sync="none")  # fmt: skip

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
        data = json.loads((plugin_dir / CALLS_FILE).read_bytes())
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
