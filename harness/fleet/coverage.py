"""What draguard sees of a driver it did not write (the upstream test driver it runs, or a driver already
installed in the cluster): the invariants judged in part or not at all without the fake driver's books
and device truth, the nodes a retargeted scenario's pods are pinned to, and the free devices its
no-leak compares against.

Used by the external and installed fleets, the judge, the deployment and retargeting
(:mod:`draguard.harness.campaign.retarget`). Talks to: the cluster (ResourceSlices, ResourceClaims).
"""

from __future__ import annotations

from collections.abc import Mapping

from draguard.harness.driver.topology import preset
from draguard.harness.kube import Kube, Obj
from draguard.harness.scenario.types import Scenario

__all__ = ["PARTIAL", "LOCAL_PARTIAL", "BOOKS_PARTIAL", "NOT_JUDGED", "REAL_NODES", "FAKE_RUNTIMES", "runs_containers", "coverage", "scenario_devices", "pinned_nodes",
           "free_devices"]

PARTIAL: Mapping[str, str] = {
    "no-leak": "judged from the API only (reservations, allocations, pods stuck deleting, the device inventory of "
               "the driver's slices on the scenario's nodes); the driver's checkpoint, CDI specs and device truth "
               "are not readable for an installed driver",
    "no-double-allocation": "judged from the API's allocations only; the driver's own books and the device truth "
                            "are not readable for an installed driver",
    "sharing-explicit": "judged from the API only (a shared device's claims name a sharing strategy); sharing state "
                        "left on a device is not readable for an installed driver",
}
"""Invariants judged from the API alone against an installed driver -> what is left out."""

LOCAL_PARTIAL: Mapping[str, str] = {
    **PARTIAL,
    "no-leak": "judged from the API and from the CDI specs the upstream test driver leaves on each node (its outside "
               "view of what it holds prepared); its in-memory books and the device truth are not readable",
}
"""As :data:`PARTIAL`, when draguard reads the upstream test driver's CDI specs on the nodes: it runs the
driver itself (``--cluster local``), or the driver runs on the nodes of draguard's kind cluster."""

BOOKS_PARTIAL: Mapping[str, str] = {
    **{name: why for name, why in PARTIAL.items() if name != "no-leak"},
    "no-double-allocation": "judged from the API's allocations and from draguard's fake driver's books and device "
                            "truth read in each node; which containers run on each device is not recorded there (a "
                            "real runtime runs them)",
}
"""As :data:`PARTIAL`, when the installed driver is draguard's fake driver on draguard's kind cluster, whose
checkpoint and CDI specs draguard reads in the node containers, and its device truth inside its pods:
``no-leak`` is judged whole (the API, the books, the CDI specs, each device's reset state and health)."""

NOT_JUDGED: Mapping[str, str] = {
    "container-devices": "needs the fake node's device truth (which devices each container got, and whether its "
                         "CDI IDs resolved); an installed driver's nodes do not expose it",
}
"""Invariants that cannot be judged against an installed driver -> why."""

REAL_NODES: Mapping[str, str] = {
    "container-devices": "judged from what the nodes' container runtime reports in the pods' statuses (a container "
                         "it could not create because a CDI device did not resolve); whether a device a container got "
                         "was broken is not readable for an installed driver",
}
"""What real nodes (a kubelet and a container runtime: a cluster's own) let draguard judge of an invariant
that :data:`NOT_JUDGED` lists for nodes without a runtime."""


FAKE_RUNTIMES = ("draguard", "fakeRuntime", "kwok")
"""Schemes of ``status.nodeInfo.containerRuntimeVersion`` on nodes without a container runtime: draguard's
fake node agents (``draguard://``), hollow kubelets (cri-api's fake runtime, ``fakeRuntime://``), kwok."""


def runs_containers(node: Obj) -> bool:
    """Whether ``node`` reports a real container runtime (containerd, CRI-O...), which says in the pods'
    statuses what it could not do."""
    version = str(((node.get("status") or {}).get("nodeInfo") or {}).get("containerRuntimeVersion") or "")
    return bool(version) and version.split("://", 1)[0] not in FAKE_RUNTIMES


def coverage(real_nodes: bool, node_files: bool, books: bool = False) -> tuple[dict[str, str], dict[str, str]]:
    """(invariant -> what is left out, invariant -> why it is not judged) for a driver draguard did not
    start: on the cluster's own nodes with a container runtime (``real_nodes``), where draguard reads the
    upstream test driver's CDI specs on the nodes (``node_files``), and where it reads draguard's fake
    driver's books there (``books``)."""
    partial = dict(BOOKS_PARTIAL if books else LOCAL_PARTIAL if node_files else PARTIAL)
    not_judged = dict(NOT_JUDGED)
    if real_nodes:
        partial.update(REAL_NODES)
        for name in REAL_NODES:
            not_judged.pop(name, None)
        if books:  # draguard's fake driver there: each container's environment and devices are seen too
            partial.pop("container-devices", None)
    return partial, not_judged

def scenario_devices(scenario: Scenario) -> dict[str, int]:
    """Scenario node -> how many devices its fake topology has (0 when it has none)."""
    out: dict[str, int] = {}
    for node in scenario.nodes:
        t = node.topology
        if t is None:
            out[node.name] = 0
        elif t.preset:
            out[node.name] = len(preset(t.preset))
        else:
            out[node.name] = t.gpus or len(t.devices)
    return out


def pinned_nodes(sc: Scenario) -> list[str] | None:
    """The nodes a retargeted scenario's pods are pinned to (None: not retargeted, no pinning)."""
    return [n.name for n in sc.nodes] if sc.driver.kind == "external" and sc.nodes else None


def free_devices(kube: Kube, driver: str, nodes: list[str]) -> frozenset[tuple[str, str, str]]:
    """(driver, pool, device) published for ``nodes`` and not allocated to any claim now: the inventory
    a retargeted run's no-leak compares against (other users' devices are not this run's to return)."""
    slices, _ = kube.list("ResourceSlice", field_selector=f"spec.driver={driver}")
    published = {(driver, s["spec"]["pool"]["name"], d["name"]) for s in slices
                 if s["spec"].get("nodeName") in nodes for d in s["spec"].get("devices") or []}
    taken: set[tuple[str, str, str]] = set()
    for claim in kube.items("ResourceClaim"):
        results: list[Obj] = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        taken.update((r.get("driver", ""), r.get("pool", ""), r.get("device", "")) for r in results)
    return frozenset(published - taken)
