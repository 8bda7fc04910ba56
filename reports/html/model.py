"""What the HTML report draws, derived from a scenario's timeline events and its verdict.

Pure functions over the events of ``timeline.json`` (the watch records structured ``data``: a
claim's allocated devices and consumers, a pod's phase, node and claims, a slice's devices):

- **device rows**: every device the driver published, grouped by node;
- **claim bars**: for each claim and each device it was allocated, the span allocated → prepared
  (a consuming pod running, which the node side allows only after NodePrepareResources) →
  unprepared (its consumers gone) → released (deallocated or deleted); a claim still holding the
  device when the timeline ends is marked ``held at end`` (a leak after cleanup);
- **overlaps**: two claims holding one device at once (a double allocation);
- **pod segments**: each pod's phase over time (pending, scheduled, running, terminating);
- **markers**: chaos steps; **violation spans**: devices an invariant's evidence names, from the
  time it was seen.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from draguard.harness.result import ScenarioResult

__all__ = ["DeviceRow", "ClaimBar", "Overlap", "PodSegment", "Marker", "ViolationSpan", "Picture", "picture"]


@dataclass(frozen=True)
class DeviceRow:
    id: str
    """``driver/pool/device``, as invariant evidence names devices."""
    node: str
    device: str

    @property
    def label(self) -> str:
        return f"{self.node} / {self.device}"


@dataclass(frozen=True)
class ClaimBar:
    device: str
    claim: str
    workload: str
    state: str
    """``allocated``, ``prepared`` or ``unprepared``."""
    start: float
    end: float
    pods: tuple[str, ...] = ()
    held_at_end: bool = False


@dataclass(frozen=True)
class Overlap:
    device: str
    start: float
    end: float
    claims: tuple[str, ...]


@dataclass(frozen=True)
class PodSegment:
    pod: str
    workload: str
    phase: str
    start: float
    end: float
    node: str | None = None


@dataclass(frozen=True)
class Marker:
    t: float
    label: str
    kind: str
    """``fault`` (a chaos step started) or ``violation`` (an invariant was first seen broken)."""


@dataclass(frozen=True)
class ViolationSpan:
    device: str
    invariant: str
    message: str
    start: float
    end: float


@dataclass
class Picture:
    end: float
    begin: float = 0.0
    """When the first device appeared (the control plane's start-up before it is not drawn)."""
    rows: list[DeviceRow] = field(default_factory=list)
    bars: list[ClaimBar] = field(default_factory=list)
    overlaps: list[Overlap] = field(default_factory=list)
    pods: list[PodSegment] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    violations: list[ViolationSpan] = field(default_factory=list)

    def workloads(self) -> list[str]:
        return sorted({b.workload for b in self.bars} | {p.workload for p in self.pods})


def _natural(s: str) -> list[Any]:
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", s)]


def _key(e: dict[str, Any]) -> str:
    return f"{e.get('namespace') or ''}/{e['name']}"


def _pod_phase(data: dict[str, Any]) -> str:
    if data.get("terminating"):
        return "Terminating"
    phase = data.get("phase") or "Pending"
    if phase == "Pending" and data.get("node"):
        return "Scheduled"
    return str(phase)


def picture(events: Iterable[dict[str, Any]], scenario: ScenarioResult | None = None) -> Picture:
    evs = sorted(events, key=lambda e: float(e.get("t", 0.0)))
    end = max((float(e["t"]) for e in evs), default=0.0)
    pic = Picture(end=end)

    # -- device rows, from the published slices (and any device a claim names) ------------------
    rows: dict[str, DeviceRow] = {}
    for e in evs:
        d = e.get("data") or {}
        if e.get("kind") == "ResourceSlice" and e.get("event") != "DELETED":
            for name in d.get("devices") or []:
                rid = f"{d.get('driver')}/{d.get('pool')}/{name}"
                rows.setdefault(rid, DeviceRow(rid, str(d.get("node") or d.get("pool")), str(name)))

    # -- pods: phases, and which claims each consumes ---------------------------------------------
    pod_events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in evs:
        if e.get("kind") == "Pod" and e.get("source") == "watch":
            pod_events[_key(e)].append(e)
    claim_pods: dict[str, set[str]] = defaultdict(set)
    pod_workload: dict[str, str] = {}
    running_at: dict[str, float] = {}
    gone_at: dict[str, float] = {}
    for key, pes in pod_events.items():
        name = pes[0]["name"]
        seg_start, seg_phase, seg_node = None, None, None
        for e in pes:
            d = e.get("data") or {}
            ns = e.get("namespace") or ""
            for c in d.get("claims") or []:
                claim_pods[f"{ns}/{c}"].add(name)
            if d.get("workload"):
                pod_workload[key] = str(d["workload"])
            t = float(e["t"])
            phase = "Deleted" if e.get("event") == "DELETED" else _pod_phase(d)
            if phase == "Running" and key not in running_at:
                running_at[key] = t
            if phase in ("Terminating", "Deleted", "Succeeded", "Failed") and key not in gone_at:
                gone_at[key] = t
            if phase != seg_phase:
                if seg_phase is not None and seg_start is not None and seg_phase != "Deleted":
                    pic.pods.append(PodSegment(name, pod_workload.get(key, "-"), seg_phase, seg_start, t, seg_node))
                seg_start, seg_phase = t, phase
            seg_node = d.get("node") or seg_node
        if seg_phase is not None and seg_start is not None and seg_phase != "Deleted":
            pic.pods.append(PodSegment(name, pod_workload.get(key, "-"), seg_phase, seg_start, end, seg_node))

    # -- claims: allocated -> prepared -> unprepared -> released, per device --------------------
    claim_events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in evs:
        if e.get("kind") == "ResourceClaim" and e.get("source") == "watch":
            claim_events[_key(e)].append(e)
    for key, ces in claim_events.items():
        ns = ces[0].get("namespace") or ""
        name = ces[0]["name"]
        consumers = sorted(claim_pods.get(key, ()))
        consumer_keys = [f"{ns}/{p}" for p in consumers]
        workload = next((str((e.get("data") or {}).get("workload")) for e in ces if (e.get("data") or {}).get("workload")), None)
        workload = workload or next((pod_workload[k] for k in consumer_keys if k in pod_workload), "-")
        held: tuple[str, ...] = ()
        since = 0.0
        spans: list[tuple[tuple[str, ...], float, float, bool]] = []
        unreserved_at: float | None = None
        reserved = False
        for e in ces:
            d = e.get("data") or {}
            t = float(e["t"])
            devs = () if e.get("event") == "DELETED" else tuple(
                f"{x.get('driver')}/{x.get('pool')}/{x.get('device')}" for x in d.get("devices") or [])
            if d.get("reservedFor"):
                reserved, unreserved_at = True, None
            elif reserved and unreserved_at is None:
                unreserved_at = t
            if devs != held:
                if held:
                    spans.append((held, since, t, False))
                held, since = devs, t
        if held:
            spans.append((held, since, end, True))
        for devices, a, r, at_end in spans:
            prepared = min((running_at[k] for k in consumer_keys if k in running_at and a <= running_at[k] < r), default=None)
            unprep: float | None = None
            if prepared is not None:
                after = [gone_at[k] for k in consumer_keys if k in gone_at and gone_at[k] >= prepared]
                candidates = after + ([unreserved_at] if unreserved_at is not None and unreserved_at >= prepared else [])
                unprep = min(candidates, default=None)
                if unprep is not None and unprep >= r:
                    unprep = None
            cuts = [("allocated", a, prepared if prepared is not None else r)]
            if prepared is not None:
                cuts.append(("prepared", prepared, unprep if unprep is not None else r))
            if unprep is not None:
                cuts.append(("unprepared", unprep, r))
            for dev in devices:
                if dev not in rows:
                    driver, _, rest = dev.partition("/")
                    pool, _, device = rest.partition("/")
                    rows[dev] = DeviceRow(dev, pool, device)
                for state, s0, s1 in cuts:
                    if s1 > s0 or (s1 == s0 and state == "allocated"):
                        pic.bars.append(ClaimBar(dev, name, workload, state, s0, max(s1, s0 + 0.05), tuple(consumers),
                                                 at_end and state == cuts[-1][0]))

    # -- double allocations: two claims holding one device at the same time ----------------------
    per_device: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for b in pic.bars:
        per_device[b.device].append((b.start, b.end, b.claim))
    for dev, spans_ in per_device.items():
        merged: dict[str, tuple[float, float]] = {}
        for s0, s1, claim in spans_:
            lo, hi = merged.get(claim, (s0, s1))
            merged[claim] = (min(lo, s0), max(hi, s1))
        items = sorted(merged.items(), key=lambda kv: kv[1][0])
        for i, (c1, (a1, b1)) in enumerate(items):
            for c2, (a2, b2) in items[i + 1:]:
                lo, hi = max(a1, a2), min(b1, b2)
                if hi > lo:
                    pic.overlaps.append(Overlap(dev, lo, hi, (c1, c2)))

    # -- markers: chaos steps and first violations ----------------------------------------------
    for e in evs:
        if e.get("source") == "fault" and e.get("event") == "start":
            pic.markers.append(Marker(float(e["t"]), f"{e['name']} ({e['kind']})", "fault"))
        if e.get("source") == "invariant" and e.get("event") == "violated":
            pic.markers.append(Marker(float(e["t"]), f"{e['kind']}: {e.get('summary', '')}", "violation"))

    # -- violation spans: the devices an invariant's evidence names ----------------------------
    if scenario is not None:
        for inv in scenario.invariants.values():
            for v in inv.violations:
                t0 = v.time if v.time is not None else 0.0
                for dev in v.devices:
                    if dev in rows:
                        pic.violations.append(ViolationSpan(dev, inv.name, v.message, t0, max(end, t0 + 0.5)))

    firsts = [float(e["t"]) for e in evs if e.get("kind") in ("ResourceSlice", "ResourceClaim", "Pod")]
    pic.begin = max(0.0, min(firsts, default=0.0) - 1.0)
    pic.rows = sorted(rows.values(), key=lambda r: (_natural(r.node), _natural(r.device)))
    return pic
