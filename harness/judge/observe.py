"""The watch timeline: list+watch informers feed a live cache and a time-ordered event log.

One thread per watched kind lists once, then watches from the list's resourceVersion (re-listing
after ``410 Gone`` or a dropped connection). Every change is appended to the :class:`Timeline` with
its time relative to the run's start, a one-line summary (phase, node, allocation) and the structured
facts reports draw from (:func:`details`: a claim's allocated devices and consumers, a pod's phase,
node, claims and workload, a slice's devices), and wakes
anyone waiting on a condition (``wait_for``): steps triggered by ``when`` and the settle phase use
that instead of polling the API. Talks to: the API server via ``Kube``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draguard.harness.core.errors import HarnessError
from ..kube import WORKLOAD_LABEL, ApiError, Kube, Obj

__all__ = ["Timeline", "TimelineEntry", "Observer", "summarize", "details", "pod_facts"]


@dataclass(frozen=True)
class TimelineEntry:
    t: float
    """Seconds since the run started."""
    source: str
    """``watch``, ``fault``, ``phase``, ``invariant``."""
    kind: str
    name: str
    event: str
    summary: str
    namespace: str | None = None
    data: dict[str, Any] | None = None
    """Structured facts of the object at this change (see :func:`details`), for reports to draw."""

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"t": round(self.t, 3), "source": self.source, "kind": self.kind, "name": self.name,
                             "event": self.event, "summary": self.summary}
        if self.namespace:
            d["namespace"] = self.namespace
        if self.data:
            d["data"] = self.data
        return d


@dataclass
class Timeline:
    """The run's events in time order; the result refers to it (``ScenarioResult.timeline``) through
    :meth:`events`, so the ``json`` report writes it. Memory stays bounded: once :meth:`spool_to` names
    a file, the oldest entries beyond ``keep_in_memory`` move there (JSON lines) and :meth:`events`,
    :meth:`as_list` and :meth:`write_json` read them back in order (a 5000-pod run makes ~100 000)."""

    start: float = field(default_factory=time.monotonic)
    entries: list[TimelineEntry] = field(default_factory=list)
    """The newest entries (all of them unless spooled)."""
    keep_in_memory: int = 20_000
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _spool: Path | None = None
    _spooled: int = 0

    def now(self) -> float:
        return time.monotonic() - self.start

    def spool_to(self, path: Path) -> None:
        """Move old entries to ``path`` (created empty now) whenever more than ``keep_in_memory`` pile up."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        with self._lock:
            self._spool = path

    def add(self, source: str, kind: str, name: str, event: str, summary: str = "", namespace: str | None = None,
            data: dict[str, Any] | None = None) -> TimelineEntry:
        entry = TimelineEntry(self.now(), source, kind, name, event, summary, namespace, data)
        with self._lock:
            self.entries.append(entry)
            if self._spool is not None and len(self.entries) > self.keep_in_memory:
                old = self.entries[: len(self.entries) // 2]
                with self._spool.open("a") as f:
                    f.writelines(json.dumps(e.as_dict()) + "\n" for e in old)
                del self.entries[: len(old)]
                self._spooled += len(old)
        return entry

    def __len__(self) -> int:
        with self._lock:
            return self._spooled + len(self.entries)

    def _iter(self) -> Iterator[dict[str, Any]]:
        with self._lock:
            spool, spooled, newest = self._spool, self._spooled, [e.as_dict() for e in self.entries]
        if spool is not None and spooled:
            with spool.open() as f:
                for i, line in enumerate(f):
                    if i >= spooled:
                        break
                    yield json.loads(line)
        yield from newest

    def as_list(self) -> list[dict[str, Any]]:
        return list(self._iter())

    def write_json(self, path: Path) -> None:
        """Write every entry as one JSON array (one entry per line), without holding them all at once."""
        tmp = path.with_suffix(".tmp")
        with tmp.open("w") as f:
            f.write("[")
            for i, entry in enumerate(self._iter()):
                f.write(("," if i else "") + "\n " + json.dumps(entry))
            f.write("\n]\n")
        tmp.replace(path)

    def events(self) -> Iterator[dict[str, Any]]:
        """The events so far as dicts (``timeline.json`` items); a :class:`TimelineSource`."""
        return self._iter()


def details(obj: Obj) -> dict[str, Any] | None:
    """What reports need to draw an object's change: devices held by a claim and by whom, a pod's phase."""
    kind = obj.get("kind")
    md = obj.get("metadata") or {}
    status = obj.get("status") or {}
    workload = (md.get("labels") or {}).get(WORKLOAD_LABEL)
    if kind == "ResourceClaim":
        alloc = status.get("allocation") or {}
        node = None
        for term in ((alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or []):
            for f in term.get("matchFields") or []:
                if f.get("key") == "metadata.name" and f.get("values"):
                    node = f["values"][0]
        out: dict[str, Any] = {
            "devices": [{"driver": r.get("driver"), "pool": r.get("pool"), "device": r.get("device"),
                         "request": r.get("request")} for r in (alloc.get("devices") or {}).get("results", [])],
            "reservedFor": [r.get("name") for r in status.get("reservedFor") or []],
        }
        if node:
            out["node"] = node
        if workload:
            out["workload"] = workload
        if md.get("deletionTimestamp"):
            out["terminating"] = True
        return out
    if kind == "Pod":
        spec = obj.get("spec") or {}
        claims = {s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []}
        for c in spec.get("resourceClaims") or []:
            if c.get("resourceClaimName"):
                claims[c.get("name")] = c["resourceClaimName"]
        out = {"phase": status.get("phase"), "node": spec.get("nodeName"), "claims": sorted(v for v in claims.values() if v)}
        if workload:
            out["workload"] = workload
        if md.get("deletionTimestamp"):
            out["terminating"] = True
        return out
    if kind == "ResourceSlice":
        spec = obj.get("spec") or {}
        return {"driver": spec.get("driver"), "pool": (spec.get("pool") or {}).get("name"), "node": spec.get("nodeName"),
                "devices": [d.get("name") for d in spec.get("devices") or []]}
    return None


def summarize(obj: Obj) -> str:
    """One line that says what matters about an object for DRA."""
    kind = obj.get("kind")
    status = obj.get("status") or {}
    if kind == "Pod":
        parts = [status.get("phase", "?")]
        node = obj.get("spec", {}).get("nodeName")
        if node:
            parts.append(f"node={node}")
        for c in status.get("conditions", []):
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                parts.append(f"unschedulable: {c.get('message', '')[:120]}")
        if obj["metadata"].get("deletionTimestamp"):
            parts.append("terminating")
        return " ".join(parts)
    if kind == "ResourceClaim":
        alloc = status.get("allocation")
        if not alloc:
            return "unallocated"
        devs = [f"{r['pool']}/{r['device']}" for r in alloc.get("devices", {}).get("results", [])]
        users = [r.get("name") for r in status.get("reservedFor", [])]
        return f"allocated {','.join(devs)} reservedFor={','.join(users) or '-'}"
    if kind == "ResourceSlice":
        return f"{len(obj.get('spec', {}).get('devices', []))} devices pool={obj.get('spec', {}).get('pool', {}).get('name')}"
    if kind == "Node":
        ready = next((c.get("status") for c in status.get("conditions", []) if c.get("type") == "Ready"), "?")
        return f"Ready={ready}"
    if kind == "Event":
        return f"{obj.get('reason')}: {obj.get('message', '')[:160]}"
    return ""


_DELETED_KEPT = 1000
QUIET_POLL = 0.1
"""How often wait_quiet looks at the timeline (seconds)."""


def pod_facts(pod: Obj) -> tuple[str, ...]:
    """What a step condition counts about a pod (:meth:`Observer.tally`): ``phase:<phase>``,
    ``scheduled`` once it has a node, ``live`` until it is being deleted."""
    facts = [f"phase:{(pod.get('status') or {}).get('phase')}"]
    if (pod.get("spec") or {}).get("nodeName"):
        facts.append("scheduled")
    if not pod["metadata"].get("deletionTimestamp"):
        facts.append("live")
    return tuple(facts)


@dataclass
class _Watched:
    kind: str
    namespace: str | None
    label_selector: str | None
    keep: Callable[[Obj], bool] | None


class Observer:
    """Informers for the kinds a run cares about, with a shared cache and condition waiting."""

    def __init__(self, kube: Kube, timeline: Timeline) -> None:
        self.kube = kube
        self.timeline = timeline
        self.cache: dict[str, dict[str, Obj]] = {}
        self.deleted: dict[str, dict[str, Obj]] = {}
        self._watched: list[_Watched] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._synced: dict[str, threading.Event] = {}
        self._changes: Counter[str] = Counter()
        """Changes per kind (:meth:`changes`); :meth:`wait_for` evaluates a predicate again only after one."""
        self._frozen: dict[str, tuple[int, tuple[Obj, ...]]] = {}
        """kind -> (changes when taken, the objects): :meth:`frozen`."""
        self._tallies: dict[str, Counter[str]] = {}
        self._pod_facts: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.errors: list[str] = []

    def watch(self, kind: str, namespace: str | None = None, label_selector: str | None = None,
              keep: Callable[[Obj], bool] | None = None) -> None:
        self._watched.append(_Watched(kind, namespace, label_selector, keep))
        self.cache.setdefault(kind, {})
        self.deleted.setdefault(kind, {})
        self._synced[kind] = threading.Event()

    def start(self, timeout: float = 30.0) -> None:
        for w in self._watched:
            t = threading.Thread(target=self._run, args=(w,), name=f"watch-{w.kind}", daemon=True)
            t.start()
            self._threads.append(t)
        for kind, ev in self._synced.items():
            if not ev.wait(timeout):
                raise HarnessError(f"the {kind} informer did not sync in {timeout:.0f}s: {self.errors[-1:] or ''}")

    def stop(self) -> None:
        self._stop.set()
        with self._changed:
            self._changed.notify_all()

    def _key(self, obj: Obj) -> str:
        md = obj["metadata"]
        return f"{md.get('namespace', '')}/{md['name']}"

    def _apply(self, w: _Watched, etype: str, obj: Obj, record: bool = True) -> None:
        if w.keep is not None and not w.keep(obj):
            return
        key = self._key(obj)
        store = self.cache[w.kind]
        with self._changed:
            if etype == "DELETED":
                store.pop(key, None)
                gone = self.deleted[w.kind]
                gone[key] = obj
                if len(gone) > _DELETED_KEPT:  # bounded: the newest deletions only
                    del gone[next(iter(gone))]
            else:
                old = store.get(key)
                store[key] = obj
                if old is not None and old["metadata"].get("resourceVersion") == obj["metadata"].get("resourceVersion"):
                    record = False
            if w.kind == "Pod":
                self._count_pod(key, None if etype == "DELETED" else obj)
            self._changes[w.kind] += 1
            self._changed.notify_all()
        if record:
            md = obj["metadata"]
            self.timeline.add("watch", w.kind, md["name"], etype, summarize(obj), md.get("namespace"), details(obj))

    def _run(self, w: _Watched) -> None:
        rv = ""
        backoff = 0.2
        while not self._stop.is_set():
            try:
                if not rv:
                    items, rv = self.kube.list(w.kind, w.namespace, w.label_selector)
                    seen = set()
                    for item in items:
                        seen.add(self._key(item))
                        self._apply(w, "ADDED" if self._key(item) not in self.cache[w.kind] else "MODIFIED", item)
                    for key in list(self.cache[w.kind]):
                        if key not in seen:
                            self._apply(w, "DELETED", self.cache[w.kind][key])
                    self._synced[w.kind].set()
                for etype, obj in self.kube.watch(w.kind, w.namespace, rv, w.label_selector, timeout_seconds=120, stop=self._stop):
                    if etype == "BOOKMARK":
                        rv = obj["metadata"].get("resourceVersion", rv)
                        continue
                    rv = obj["metadata"].get("resourceVersion", rv)
                    self._apply(w, etype, obj)
                backoff = 0.2
            except ApiError as exc:
                if exc.status == 410:
                    rv = ""
                    continue
                self.errors.append(str(exc))
                rv = ""
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            except HarnessError as exc:  # connection lost (e.g. an apiserver restart): re-list
                self.errors.append(str(exc))
                rv = ""
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _count_pod(self, key: str, pod: Obj | None) -> None:
        """Keep each workload's tally of pod facts as pods change (called with the lock held)."""
        before = self._pod_facts.pop(key, None)
        if before is not None:
            self._tallies[before[0]].subtract(before[1])
        if pod is None:
            return
        workload = (pod["metadata"].get("labels") or {}).get(WORKLOAD_LABEL)
        if workload is None:
            return
        facts = pod_facts(pod)
        self._pod_facts[key] = (workload, facts)
        self._tallies.setdefault(workload, Counter()).update(facts)

    # -- reading ------------------------------------------------------------------------------
    def objects(self, kind: str) -> list[Obj]:
        with self._changed:
            return list(self.cache.get(kind, {}).values())

    def frozen(self, kind: str) -> tuple[Obj, ...]:
        """The objects of ``kind`` now, as a tuple that is the very same object while nothing of ``kind``
        changed: what is computed from it (a snapshot's published devices) can be kept until it changes."""
        with self._changed:
            count = self._changes[kind]
            kept = self._frozen.get(kind)
            if kept is None or kept[0] != count:
                kept = self._frozen[kind] = (count, tuple(self.cache.get(kind, {}).values()))
            return kept[1]

    def tally(self, workload: str) -> Counter[str]:
        """How many of ``workload``'s pods (by its label) have each of :func:`pod_facts` now: a step
        condition costs the same at 5 pods and 5000, however often the pods change."""
        with self._changed:
            return Counter(self._tallies.get(workload, ()))

    def changes(self, kind: str) -> int:
        """How many changes to ``kind`` the cache has taken so far (a count to pass to :meth:`wait_change`)."""
        with self._changed:
            return self._changes[kind]

    def wait_change(self, kind: str, seen: int, timeout: float) -> int:
        """Block until ``kind`` changed after the count ``seen`` (see :meth:`changes`) or ``timeout``
        passes; the count now (``seen`` on a timeout)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._changes[kind] == seen and not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return self._changes[kind]

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Block until ``predicate()`` is true or ``timeout`` passes. The predicate is evaluated again
        after a change to the cache (or a second without one: it may read other state), outside the
        cache's lock so that the watches never wait for it; one that is slow is evaluated at most
        once per four times its own cost, so that a waiter takes at most a fifth of the process
        while pods change hundreds of times a second."""
        deadline = time.monotonic() + timeout
        seen = -1
        while True:
            with self._changed:
                if self._changes.total() == seen and not self._stop.is_set():
                    self._changed.wait(max(0.0, min(deadline - time.monotonic(), 1.0)))
                seen = self._changes.total()
            started = time.monotonic()
            if predicate():
                return True
            now = time.monotonic()
            if self._stop.is_set() or now >= deadline:
                return False
            cost = now - started
            if cost > 0.001:
                self._stop.wait(min(3 * cost, deadline - now))

    def wait_quiet(self, quiet: float | Callable[[], float], timeout: float) -> bool:
        """Block until nothing changed for ``quiet`` seconds on end (True) or ``timeout`` passes (False).
        The quiet period starts again at each change, not at the next fixed window; a callable ``quiet``
        is asked again as things change (a run with pods still pending needs a longer one)."""
        now = time.monotonic()
        deadline, since, n = now + timeout, now, len(self.timeline)
        while True:
            if len(self.timeline) != n:
                n, since = len(self.timeline), time.monotonic()
            needed = quiet() if callable(quiet) else quiet
            now = time.monotonic()
            if now - since >= needed:
                return True
            if now >= deadline:
                return False
            time.sleep(max(0.0, min(QUIET_POLL, since + needed - now, deadline - now)))
