"""ResourceSlices of the fake driver: built from an :class:`~.topology.Inventory`, published with ``Kube``.

One pool per node, named after the node, with ``spec.nodeName`` set and an ownerReference to the
Node object (so the slices go when the node goes). Counter sets live in slices of their own, as
the 1.35+ API requires ("only one of devices and sharedCounters"); partitionable devices go one
parent per slice, plain devices 64 per slice (the limit once any device carries taints or
consumes counters). Slices carry labels ``draguard.dev/driver`` and ``draguard.dev/node`` for
cleanup and an annotation with the hash of their spec: publishing again with unchanged content
does nothing, a change bumps the pool generation on every slice of the pool.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from draguard.harness.core.errors import HarnessError
from ..kube import ApiError, Kube
from .topology import AttrValue, DeviceInfo, Inventory, Version

__all__ = [
    "LABEL_DRIVER",
    "LABEL_NODE",
    "HASH_ANNOTATION",
    "UNHEALTHY_TAINT",
    "build_slices",
    "SlicePublisher",
]

LABEL_DRIVER = "draguard.dev/driver"
LABEL_NODE = "draguard.dev/node"
HASH_ANNOTATION = "draguard.dev/spec-hash"
UNHEALTHY_TAINT = "unhealthy"
MAX_DEVICES = 64
MAX_COUNTER_SETS = 8


def _attr(value: AttrValue) -> dict[str, Any]:
    if isinstance(value, Version):
        return {"version": str(value)}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": str(value)}


def _device(d: DeviceInfo, driver: str, taint: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": d.name,
        "attributes": {k: _attr(v) for k, v in sorted(d.attributes.items())},
        "capacity": {k: {"value": v} for k, v in sorted(d.capacity.items())},
    }
    if d.consumes:
        out["consumesCounters"] = [
            {"counterSet": cs, "counters": {k: {"value": v} for k, v in sorted(c.items())}} for cs, c in d.consumes
        ]
    taints = [{"key": k, "value": v, "effect": e} if v else {"key": k, "effect": e} for k, v, e in d.taints]
    if taint is not None:
        taints.append({"key": f"{driver}/{UNHEALTHY_TAINT}", "value": taint[:63] or "true", "effect": "NoSchedule"})
    if taints:
        out["taints"] = taints
    if d.allow_multiple:
        out["allowMultipleAllocations"] = True
    return out


def _taint_value(message: str) -> str:
    """A label-value-safe summary of a health message."""
    cleaned = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in message)[:63].strip("-_.")
    return cleaned or "true"


def build_slices(
    inventory: Inventory, driver: str, unhealthy: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The specs (without pool generation and count) of the node's slices, in publishing order."""
    unhealthy = unhealthy or {}
    node = inventory.node
    specs: list[dict[str, Any]] = []
    sets = list(inventory.counter_sets)
    for i in range(0, len(sets), MAX_COUNTER_SETS):
        specs.append(
            {
                "sharedCounters": [
                    {"name": cs.name, "counters": {k: {"value": v} for k, v in sorted(cs.counters.items())}}
                    for cs in sets[i : i + MAX_COUNTER_SETS]
                ]
            }
        )
    groups: list[list[DeviceInfo]] = []
    plain: list[DeviceInfo] = []
    by_parent: dict[str, list[DeviceInfo]] = {}
    for d in inventory.devices:
        if d.consumes:
            by_parent.setdefault(d.parent or d.name, []).append(d)
        else:
            plain.append(d)
    for devs in by_parent.values():
        groups += [devs[i : i + MAX_DEVICES] for i in range(0, len(devs), MAX_DEVICES)]
    groups += [plain[i : i + MAX_DEVICES] for i in range(0, len(plain), MAX_DEVICES)]
    for devs in groups:
        specs.append(
            {
                "devices": [
                    _device(d, driver, _taint_value(unhealthy[d.name]) if d.name in unhealthy else None) for d in devs
                ]
            }
        )
    for spec in specs:
        spec.update({"driver": driver, "nodeName": node})
    return specs


def _hash(spec: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]


class SlicePublisher:
    """Keeps one node's slices in the API server equal to the inventory."""

    def __init__(self, kube: Kube, driver: str, node: str, log: logging.Logger | None = None) -> None:
        self.kube = kube
        self.driver = driver
        self.node = node
        self.log = log or logging.getLogger("draguard.driver")
        self._built: tuple[Any, list[dict[str, Any]], list[str]] | None = None

    def _specs(self, inventory: Inventory, unhealthy: Mapping[str, str] | None) -> tuple[list[dict[str, Any]], list[str]]:
        """The slice specs and their hashes, built again only when the inventory or the health changed
        (a verification round of 500 nodes spent most of its time hashing unchanged specs)."""
        health = tuple(sorted((unhealthy or {}).items()))
        built = self._built
        if built is None or built[0][0] is not inventory or built[0][1] != health:
            specs = build_slices(inventory, self.driver, unhealthy)
            built = self._built = ((inventory, health), specs, [_hash(s) for s in specs])
        return built[1], built[2]

    @property
    def label_selector(self) -> str:
        return f"{LABEL_DRIVER}={self.driver},{LABEL_NODE}={self.node}"

    def slice_name(self, i: int) -> str:
        return f"{self.node}-{self.driver}-{i}"

    def existing(self) -> list[dict[str, Any]]:
        field = f"spec.nodeName={self.node},spec.driver={self.driver}"
        return self.kube.list("ResourceSlice", field_selector=field)[0]

    def publish(self, inventory: Inventory, unhealthy: Mapping[str, str] | None = None) -> bool:
        """Make the API match; returns True when something was written.

        Raises :class:`~draguard.harness.core.errors.HarnessError` when the Node does not exist (the
        ownerReference needs its uid) or the API server refuses the slices.
        """
        specs, hashes = self._specs(inventory, unhealthy)
        current = {s["metadata"]["name"]: s for s in self.existing()}
        wanted_names = [self.slice_name(i) for i in range(len(specs))]
        if set(current) == set(wanted_names) and all(
            current[n]["metadata"].get("annotations", {}).get(HASH_ANNOTATION) == h
            and current[n]["spec"]["pool"]["resourceSliceCount"] == len(specs)
            for n, h in zip(wanted_names, hashes)
        ):
            return False
        node = self.kube.get("Node", self.node)
        if node is None:
            raise HarnessError(f"Node {self.node} does not exist; its ResourceSlices need it as owner")
        generation = 1 + max((int(s["spec"]["pool"].get("generation", 0)) for s in current.values()), default=0)
        owner = {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": node["metadata"]["uid"], "controller": True}
        for name, spec, h in zip(wanted_names, specs, hashes):
            body: dict[str, Any] = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {
                    "name": name,
                    "labels": {LABEL_DRIVER: self.driver, LABEL_NODE: self.node},
                    "annotations": {HASH_ANNOTATION: h},
                    "ownerReferences": [owner],
                },
                "spec": {
                    **spec,
                    "pool": {"name": self.node, "generation": generation, "resourceSliceCount": len(specs)},
                },
            }
            old = current.get(name)
            if old is not None and old["spec"].get("nodeName") == self.node:
                body["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                self.kube.replace(body)
            else:
                if old is not None:
                    self.kube.delete("ResourceSlice", name)
                self.kube.create(body)
        for name in set(current) - set(wanted_names):
            self.kube.delete("ResourceSlice", name)
        self.log.info("published %d ResourceSlices (pool %s, generation %d)", len(specs), self.node, generation)
        return True

    def delete_all(self) -> int:
        """Remove this node's slices of this driver (what the kubelet does 30 s after a driver goes)."""
        gone = 0
        for s in self.existing():
            try:
                gone += self.kube.delete("ResourceSlice", s["metadata"]["name"])
            except ApiError as exc:
                if not exc.not_found:
                    raise
        return gone
