"""Pre-flight: what a command needs from the cluster, checked before it starts anything.

:func:`allocatable` answers whether claims asking a DeviceClass can be allocated at all: the class
exists, and some device published in a ResourceSlice matches its CEL selectors (evaluated as the
scheduler does, by :mod:`draguard.harness.cel`). A command that would otherwise create claims and
wait for each of them (``draguard load``) calls :func:`require_allocatable` and exits 2 at once
with the cause, instead of timing out operation after operation. Talks to the API server (reads
DeviceClasses and ResourceSlices; creates nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from draguard.harness.cel import CelError, compile_selector
from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.kube import ApiError, Kube

__all__ = ["Allocatable", "allocatable", "require_allocatable", "require_node"]


@dataclass(frozen=True)
class Allocatable:
    """The devices a DeviceClass selects, or why none can be allocated."""

    device_class: str
    devices: tuple[str, ...]
    """``driver/pool/device`` of each published device the class selects."""
    problem: str = ""
    """Why nothing can be allocated ("" when some device can)."""


def allocatable(kube: Kube, device_class: str, where: str = "") -> Allocatable:
    """Which published devices ``device_class`` selects; ``problem`` says why none, if none.

    :class:`UsageError` when the cluster cannot be read, naming ``where`` (its kubeconfig) if given."""
    try:
        dc = kube.get("DeviceClass", device_class)
        if dc is None:
            names = sorted(c["metadata"]["name"] for c in kube.items("DeviceClass"))
            return Allocatable(device_class, (), f"no DeviceClass {device_class} in the cluster "
                                                 f"(DeviceClasses: {', '.join(names) or 'none'})")
        slices = kube.items("ResourceSlice")
    except (ApiError, HarnessError) as exc:
        raise UsageError(f"{where + ': ' if where else ''}cannot read the cluster's DeviceClasses and "
                         f"ResourceSlices: {exc}") from exc
    try:
        selectors = [compile_selector(s["cel"]["expression"]) for s in (dc.get("spec") or {}).get("selectors") or []
                     if (s.get("cel") or {}).get("expression")]
    except CelError as exc:
        return Allocatable(device_class, (), f"DeviceClass {device_class}: a selector does not compile: {exc}")
    found: list[str] = []
    drivers: set[str] = set()
    published = 0
    for sl in slices:
        spec = sl.get("spec") or {}
        driver = str(spec.get("driver", ""))
        pool = str((spec.get("pool") or {}).get("name", ""))
        for d in spec.get("devices") or []:
            drivers.add(driver)
            published += 1
            try:
                if all(sel.evaluate(d, driver) for sel in selectors):
                    found.append(f"{driver}/{pool}/{d.get('name')}")
            except CelError:
                continue  # the scheduler cannot allocate a device its class's selector fails on
    if not found:
        what = (f"{published} device(s) published, by {', '.join(sorted(drivers))}, none of them selected by it"
                if published else "no ResourceSlice publishes any device")
        return Allocatable(device_class, (), f"no device published for DeviceClass {device_class}: {what}")
    return Allocatable(device_class, tuple(found))


def require_allocatable(kube: Kube, device_class: str, flag: str = "--device-class", where: str = "") -> Allocatable:
    """:func:`allocatable`, or :class:`UsageError` (exit 2) saying that nothing can be allocated and why."""
    got = allocatable(kube, device_class, where)
    if got.problem:
        raise UsageError(f"{flag} {device_class}: nothing can be allocated: {got.problem}")
    return got


def require_node(kube: Kube, node: str, flag: str = "--node", where: str = "") -> None:
    """:class:`UsageError` (exit 2) unless the API server answers and has Node ``node``: a process that serves
    one node (a driver for a fake node) would otherwise start and keep retrying in the background."""
    try:
        found = kube.get("Node", node)
    except (ApiError, HarnessError) as exc:
        raise UsageError(f"{where + ': ' if where else ''}cannot reach the API server: {exc}") from exc
    if found is None:
        raise UsageError(f"{flag} {node}: no such Node in the cluster{' (' + where + ')' if where else ''}; "
                         "start its node agent first (draguard nodes)")
