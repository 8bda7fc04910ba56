"""``no-leak``: nothing outlives its consumer.

- no allocated claim reserved for no one, and no ``reservedFor`` entry naming a pod that is gone or
  finished;
- no pod that was deleted still there with its claims: no-leak is judged after the cleanup wait, so
  such a pod is stuck Terminating because its node could not unprepare its claims (the driver keeps
  failing NodeUnprepareResources), and its devices never come back;
- no claim prepared in a driver that is not an allocated claim, and no CDI spec without a prepared
  claim on its node;
- once no live pod uses a claim, the device inventory is back to its starting count (published,
  unallocated, free in the driver);
- on real GPUs (``Snapshot.gpu_usage``, filled by an NVML probe), no process or memory left on a
  device that no claim holds;
- in the device truth (what the hardware says, whatever the driver's books say): no device left
  dirty or with a failed reset while no claim holds it, no container running for a pod that is
  gone, no partition left on a parent for a partition no claim holds, and no device handed to a
  claim's container while still dirty from another claim.
"""

from __future__ import annotations

from draguard.harness.invariants.snapshot import DeviceId, Snapshot, is_allocated, pod_claims, pod_is_live, ref
from draguard.harness.invariants.violation import Violation
from draguard.harness.core.registry import INVARIANTS

__all__ = ["NAME", "check"]

NAME = "no-leak"


def _consumers(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for claim in snapshot.claims:
        this = ref("ResourceClaim", claim)
        reserved = (claim.get("status") or {}).get("reservedFor") or ()
        for entry in reserved:
            if entry.get("resource") != "pods" or entry.get("apiGroup"):
                continue
            pod = snapshot.pods_by_uid.get(entry.get("uid", ""))
            if pod is None:
                out.append(Violation(NAME, f"{this}: reservedFor names pod {entry.get('name')} "
                                     f"(uid {entry.get('uid')}), which is gone", (this,), (), snapshot.time))  # fmt: skip
            elif not pod_is_live(pod):
                out.append(Violation(NAME, f"{this}: reservedFor names pod {entry.get('name')}, which has finished "
                                     f"({pod['status']['phase']})", (this, ref("Pod", pod)), (), snapshot.time))  # fmt: skip
        if is_allocated(claim) and not reserved:
            devices = tuple(str(d) for c, _, d in snapshot.allocated() if c is claim)
            out.append(Violation(NAME, f"{this}: allocated but reserved for no consumer", (this,), devices,
                                 snapshot.time))  # fmt: skip
    return out


def _stuck_deleting(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for pod in snapshot.pods:
        md = pod.get("metadata") or {}
        if not md.get("deletionTimestamp") or not pod_is_live(pod) or not (pod.get("spec") or {}).get("resourceClaims"):
            continue
        this = ref("Pod", pod)
        claims = [c for _, c in pod_claims(pod, snapshot) if c is not None]
        devices = tuple(str(d) for c, _, d in snapshot.allocated() if any(c is x for x in claims))
        out.append(Violation(NAME, f"{this} was deleted at {md['deletionTimestamp']} and is still there, holding "
                             f"{len(claims)} claim(s): its node cannot unprepare them", (this,)
                             + tuple(ref("ResourceClaim", c) for c in claims), devices, snapshot.time))  # fmt: skip
    return out


def _drivers(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    allocated = {c["metadata"].get("uid") for c in snapshot.claims if is_allocated(c)}
    for state in snapshot.drivers:
        for uid, devices in sorted(state.prepared.items()):
            if uid not in allocated:
                out.append(Violation(NAME, f"driver {state.driver} on node {state.node} still has claim {uid} "
                                     "prepared, but no allocated claim has that uid",
                                     (f"Node/{state.node}",), tuple(str(d) for d in devices), snapshot.time))  # fmt: skip
        for uid in sorted(state.cdi_specs - set(state.prepared)):
            out.append(Violation(NAME, f"node {state.node} has a CDI spec for claim {uid}, which driver "
                                 f"{state.driver} has not prepared", (f"Node/{state.node}",), (), snapshot.time))  # fmt: skip
    return out


def _held_by_drivers(snapshot: Snapshot) -> set[DeviceId]:
    held: set[DeviceId] = set()
    by_node_name = {(node, d.driver, d.device): d for d, node in snapshot.device_nodes.items()}
    for state in snapshot.drivers:
        for devices in state.prepared.values():
            held.update(devices)
        for name, device_state in state.devices.items():
            if device_state.state != "free" or device_state.claims:
                device_id = by_node_name.get((state.node, state.driver, name))
                held.add(device_id or DeviceId(state.driver, state.node, name))
    return held


def _inventory(snapshot: Snapshot) -> list[Violation]:
    if not snapshot.initial_inventory:
        return []
    consumers = [p for p in snapshot.pods if pod_is_live(p) and (p.get("spec") or {}).get("resourceClaims")]
    if consumers:
        return []  # judged once consumers are gone
    allocated = {d for _, _, d in snapshot.allocated()}
    available = set(snapshot.devices) - allocated - _held_by_drivers(snapshot)
    missing = sorted(snapshot.initial_inventory - available)
    if not missing:
        return []
    return [Violation(NAME, f"device inventory is {len(snapshot.initial_inventory) - len(missing)} of "
                      f"{len(snapshot.initial_inventory)} at the start after all consumers left; missing "
                      f"{len(missing)} device(s)", (), tuple(str(d) for d in missing), snapshot.time)]  # fmt: skip


def _gpus(snapshot: Snapshot) -> list[Violation]:
    if not snapshot.gpu_usage:
        return []
    allocated = {d for _, _, d in snapshot.allocated()}
    out: list[Violation] = []
    for device, usage in sorted(snapshot.gpu_usage.items()):
        if device in allocated or not (usage.processes or usage.memory_used_bytes):
            continue
        out.append(Violation(NAME, f"freed device {device} still has {len(usage.processes)} process(es) and "
                             f"{usage.memory_used_bytes} bytes of memory in use", (), (str(device),), snapshot.time))  # fmt: skip
    return out


def _truth(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    held = snapshot.held_on_nodes
    live_pods = {uid for uid, p in snapshot.pods_by_uid.items() if pod_is_live(p)}
    for t in snapshot.device_truth:
        node = f"Node/{t.node}"
        for name, rec in sorted(t.devices.items()):
            where = f"device {name} on node {t.node}"
            holders = held.get((t.node, name), set())
            if rec.reset != "clean" and not rec.containers and not holders:
                state = (f"its last reset failed ({rec.reset_error})" if rec.reset == "failed"
                         else "it was not reset after its last use")  # fmt: skip
                out.append(Violation(NAME, f"{where} is {rec.reset}: {state}; it was used by claim(s) "
                                     f"{', '.join(rec.used_by) or '?'} and no claim holds it now (device truth)",
                                     (node,), (snapshot.truth_device(t.node, name),), snapshot.time))  # fmt: skip
            for c in rec.containers:
                if c.id.split("/")[0] not in live_pods:
                    out.append(Violation(NAME, f"{where}: container {c.id} of pod {c.pod} still runs (pid {c.pid}, "
                                         f"{c.memory_bytes} bytes) although the pod is gone or finished (device truth)",
                                         (node,), (snapshot.truth_device(t.node, name),), snapshot.time))  # fmt: skip
            for part in rec.partitions:
                if not held.get((t.node, part)):
                    out.append(Violation(NAME, f"{where} keeps partition {part}, which no claim holds (device truth)",
                                         (node,),
                                         (snapshot.truth_device(t.node, name), snapshot.truth_device(t.node, part)),
                                         snapshot.time))  # fmt: skip
        for i in t.incidents:
            if i.kind == "dirty-handoff":
                out.append(Violation(NAME, f"node {t.node}: {i.message} (device truth)", (node,),
                                     (snapshot.truth_device(t.node, i.device),), snapshot.time))  # fmt: skip
    return out


@INVARIANTS.register(NAME, summary="Once consumers are gone, no allocation, reservation, prepared claim, CDI spec "
                     "or GPU memory is left, and the device inventory is back to its starting count.",
                     judged="after-cleanup")  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    return (_consumers(snapshot) + _stuck_deleting(snapshot) + _drivers(snapshot) + _inventory(snapshot)
            + _gpus(snapshot) + _truth(snapshot))
