"""The interposer's evidence: one JSON line per call that passed through it.

Each line: ``ts`` (start, Unix seconds), ``node``, ``driver``, ``service``, ``method`` (short name),
``kind`` (``call``, or ``duplicate`` / ``stale-retry`` for calls the proxy made itself), ``claims``
([{namespace, name, uid}]), ``duration_s``, ``status`` (gRPC status name), ``error`` (status details),
``claim_errors`` ({uid: error} from the plugin's answer), ``fault`` (the action applied, or null) and
``run`` (the run label, if any). Lines go to ``<node-root>/<node>/proxy-calls.jsonl``, or all to one
file. Written by :mod:`.interposer`; read by tests, invariants and reports via :func:`read_calls`.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import IO, Any

__all__ = ["CallRecorder", "read_calls", "CALLS_FILE"]

CALLS_FILE = "proxy-calls.jsonl"


class CallRecorder:
    """Appends call records, thread-safe, one flushed line each."""

    def __init__(self, node_root: Path, record: Path | None = None, run_label: str | None = None) -> None:
        self.node_root = node_root
        self.record = record
        self.run_label = run_label
        self._lock = threading.Lock()
        self._files: dict[Path, IO[str]] = {}
        self._calls: list[dict[str, Any]] = []

    def path_for(self, node: str) -> Path:
        return self.record if self.record is not None else self.node_root / node / CALLS_FILE

    def write(self, entry: dict[str, Any]) -> None:
        if self.run_label:
            entry = {**entry, "run": self.run_label}
        line = json.dumps(entry, sort_keys=True) + "\n"
        path = self.path_for(str(entry.get("node", "")))
        with self._lock:
            f = self._files.get(path)
            if f is None:
                path.parent.mkdir(parents=True, exist_ok=True)
                f = self._files[path] = open(path, "a")
            f.write(line)
            f.flush()
            self._calls.append(entry)

    def recorded(self, since: int = 0) -> list[dict[str, Any]]:
        """The entries written so far from the ``since``-th on, in order (the run judges them while it goes on)."""
        with self._lock:
            return self._calls[since:]

    def close(self) -> None:
        with self._lock:
            for f in self._files.values():
                f.close()
            self._files.clear()


def read_calls(path: Path) -> list[dict[str, Any]]:
    """The records of a calls file (a torn last line, from a crash, is skipped)."""
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
