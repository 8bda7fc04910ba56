"""The interposer's evidence: one JSON line per call that passed through it.

Each line: ``ts`` (start, Unix seconds), ``node``, ``driver``, ``service``, ``method`` (short name),
``kind`` (``call``, or ``duplicate`` / ``stale-retry`` for calls the proxy made itself), ``claims``
([{namespace, name, uid}]), ``duration_s``, ``status`` (gRPC status name), ``error`` (status details),
``claim_errors`` ({uid: error} from the plugin's answer), ``fault`` (the action applied, or null) and
``run`` (the run label, if any). A ``NodePrepareResources`` that ended ``OK`` also has ``answers``:
{uid: [{pool, device, requests, cdi_device_ids}]}, the devices the answer named for each claim it
did not fail (``Device``: ``pool_name``, ``device_name``, ``request_names``, ``cdi_device_ids``);
records written before answers were kept have none, and read as "not recorded". Lines go to
``<node-root>/<node>/proxy-calls.jsonl``, or all to one file. Written by :mod:`.interposer`; read
by tests and reports via :func:`read_calls`, and by the run's judge as :class:`DriverCall` objects
via :func:`driver_call`.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from collections.abc import Mapping
from typing import IO, Any

from draguard.harness.invariants.snapshot import DriverCall, PreparedDevice

__all__ = ["CallRecorder", "read_calls", "driver_call", "CALLS_FILE"]

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


def driver_call(entry: Mapping[str, Any], offset: float = 0.0) -> DriverCall:
    """One record as the invariants read it, timed ``offset`` seconds from its Unix ``ts`` (the run
    passes the scenario's start). ``answers`` is None when the record carries none: another method, a
    failed call, or a record written before answers were kept."""
    answers = entry.get("answers")
    return DriverCall(
        time=round(float(entry.get("ts", 0.0)) + offset, 3), node=str(entry.get("node", "")),
        driver=str(entry.get("driver", "")), method=str(entry.get("method", "")),
        claims=tuple((str(c.get("namespace", "")), str(c.get("name", "")), str(c.get("uid", "")))
                     for c in entry.get("claims") or ()),
        status=str(entry.get("status", "")), error=str(entry.get("error", "")),
        claim_errors=dict(entry.get("claim_errors") or {}),
        injected=entry.get("fault") if entry.get("kind") == "call" else str(entry.get("kind")),
        duration=float(entry["duration_s"]) if isinstance(entry.get("duration_s"), (int, float)) else None,
        answers=None if not isinstance(answers, dict) else {
            str(uid): tuple(PreparedDevice(str(d.get("pool", "")), str(d.get("device", "")),
                                           tuple(str(r) for r in d.get("requests") or ()),
                                           tuple(str(i) for i in d.get("cdi_device_ids") or ()))
                            for d in devices or ())
            for uid, devices in answers.items()
        },
    )  # fmt: skip
