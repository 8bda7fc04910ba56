"""Limits of the DRA API (resource.k8s.io/v1) and of the devices draguard describes, and Kubernetes
quantities: one home for the bounds that the scenario format (:mod:`draguard.harness.scenario.format`)
and the fake driver's topology files (:mod:`draguard.harness.driver.topology`) both enforce.

The API's own limits are those of ``k8s.io/api/resource/v1/types.go`` (``ResourceSliceMaxDevices``,
``ResourceSliceMaxAttributesAndCapacitiesPerDevice``, ``DeviceAttributeMaxValueLength``,
``DeviceRequestsMaxSize``). Talks to nothing.
"""

from __future__ import annotations

import re
from decimal import Decimal

__all__ = [
    "MAX_DEVICES_PER_NODE",
    "MAX_DEVICE_INDEX",
    "MAX_NUMA_NODE",
    "MAX_ATTRIBUTES_PER_DEVICE",
    "MAX_ATTRIBUTE_INT",
    "MAX_ATTRIBUTE_STRING",
    "MAX_QUANTITY",
    "MAX_REQUESTS_PER_CLAIM",
    "MAX_DEVICES_PER_REQUEST",
    "quantity_amount",
]

MAX_DEVICES_PER_NODE = 128
"""``topology.gpus`` and ``topology.devices``: one ResourceSlice holds at most 128 devices (resource/v1)."""
MAX_DEVICE_INDEX = 1023
"""A device's ``index`` attribute."""
MAX_NUMA_NODE = 1023
"""A device's ``numaNode`` attribute (Linux builds with at most 1024 NUMA nodes)."""
MAX_ATTRIBUTES_PER_DEVICE = 32
"""A device's attributes, and its capacities, each: resource/v1 takes at most 32 of both together per
device, and the API server judges that sum with what the driver adds."""
MAX_ATTRIBUTE_INT = 2**63 - 1
"""An integer attribute is an int64 in the API."""
MAX_ATTRIBUTE_STRING = 64
"""A string attribute's length (resource/v1)."""
MAX_QUANTITY = 2**63 - 1
"""A quantity (``80Gi``, ``4``), in its base unit: a device's memory and capacities."""
MAX_REQUESTS_PER_CLAIM = 32
"""A claim's ``requests``, ``constraints`` and ``config`` (resource/v1's limit for each)."""
MAX_DEVICES_PER_REQUEST = 128
"""A request's (or sub-request's) ``count``: no node publishes more devices than a slice holds."""

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_QUANTITY_FACTOR: dict[str, Decimal] = {
    "": Decimal(1), "m": Decimal("0.001"),
    **{s: Decimal(10) ** (3 * (i + 1)) for i, s in enumerate("kMGTPE")},
    **{s + "i": Decimal(2) ** (10 * (i + 1)) for i, s in enumerate("KMGTPE")},
}  # fmt: skip


def _short(value: str) -> str:
    return repr(value) if len(value) <= 40 else repr(value[:37] + "...")


def quantity_amount(value: str) -> Decimal:
    """The amount of a quantity (``"80Gi"`` -> 85899345920) in its base unit.

    A :class:`~decimal.Decimal`, so that a number of any length is compared, never converted to an
    int or float (Python refuses long digit strings, and a float overflows to infinity)."""
    match = _QUANTITY.match(value)
    if match is None:
        raise ValueError(f"expected a Kubernetes quantity like '80Gi' or '4', got {_short(value)}")
    return Decimal(match.group(1)) * _QUANTITY_FACTOR[match.group(2) or ""]
