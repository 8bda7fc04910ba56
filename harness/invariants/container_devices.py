"""``container-devices``: every container gets the devices prepared for it.

A prepare that succeeds is worth nothing if the container runtime cannot hand the devices in. The
fake node's runtime resolves every CDI device ID the driver returned against the specs on disk
(:mod:`draguard.harness.cdi`) and records, in the device truth, each container it could not
create (an ID that resolves to nothing: an incomplete or missing CDI spec) and each container that
got a device whose last reset had failed. Both are violations.

On real nodes the runtime is the judge: containerd resolves a container's CDI devices when it
creates it and fails the creation when one does not resolve ("CDI device injection failed:
unresolvable CDI devices ...", containerd pkg/cdi/oci_opt.go; the kubelet reports it as the
container's ``CreateContainerError`` in the pod's status). Such a container of the run's pods is a
violation too, whatever the driver. There, against draguard's fake driver installed on the nodes, the
installed fleet also reports what it saw of each running container of the run: devices its environment
(the CDI edits) names that are not its claims', or its claims' devices it lacks, and a device it started on
that the device truth had failed (:meth:`draguard.harness.fleet.installed.InstalledFleet.node_truths`).
"""

from __future__ import annotations

from draguard.harness.invariants.snapshot import Snapshot
from draguard.harness.invariants.violation import Violation
from draguard.harness.core.registry import INVARIANTS

__all__ = ["NAME", "check"]

NAME = "container-devices"


@INVARIANTS.register(NAME, summary="Every container gets the devices prepared for its claims: each CDI device ID "
                     "resolves on its node, and no device it gets is broken.", judged="continuously")  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = _refused_by_the_runtime(snapshot)
    for t in snapshot.device_truth:
        seen: set[str] = set()
        for i in t.incidents:
            if i.kind not in ("container-failed", "unhealthy-in-use") or i.message in seen:
                continue
            seen.add(i.message)  # a runtime retries a failed container: one violation per distinct failure
            pod = (f"Pod/{i.pod}",) if i.pod else ()
            out.append(Violation(NAME, f"node {t.node}: {i.message} (device truth)", (f"Node/{t.node}", *pod),
                                 (snapshot.truth_device(t.node, i.device),) if i.device else (), snapshot.time))  # fmt: skip
    return out


RUNTIME_REFUSED = ("CreateContainerError", "RunContainerError")
"""Waiting reasons of a container the kubelet asked the runtime for and did not get."""


def _refused_by_the_runtime(snapshot: Snapshot) -> list[Violation]:
    """The run's containers a real node's runtime refused; a fake node's runtime (and a hollow kubelet's
    feed) records each refusal in the device truth, judged below: counted once, there."""
    out: list[Violation] = []
    truth_nodes = {t.node for t in snapshot.device_truth if t.recorded}
    for pod in snapshot.pods:
        md, status = pod["metadata"], pod.get("status") or {}
        if (pod.get("spec") or {}).get("nodeName") in truth_nodes:
            continue
        for cs in (*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())):
            waiting = (cs.get("state") or {}).get("waiting") or {}
            message = str(waiting.get("message") or "")
            if waiting.get("reason") in RUNTIME_REFUSED and "CDI" in message:
                node = (pod.get("spec") or {}).get("nodeName") or "?"
                out.append(Violation(
                    NAME, f"node {node}: the container runtime could not create container {cs.get('name')} of pod "
                          f"{md.get('namespace')}/{md['name']} with its CDI devices: {message[:400]}",
                    (f"Pod/{md.get('namespace')}/{md['name']}", f"Node/{node}"), (), snapshot.time))
    return out

