"""The invariants: named rules judged over a frozen :class:`~.snapshot.Snapshot`.

One module per invariant; each registers a pure ``check(snapshot) -> list[Violation]`` into
:data:`~draguard.harness.core.registry.INVARIANTS` under its stable name, with its rule sentence as the
summary. Importing this package registers all of them. Reports, tests and scenario files
(``expect.hold`` / ``expect.violate``) use these names:

    claim-atomic, gang-atomic, no-double-allocation, topology, no-leak, no-legacy-mix,
    sharing-explicit, container-devices, per-claim-errors,
    prepare-idempotent, unprepare-unknown, prepared-devices-allocated, no-prepare-loop,
    cdi-specs-resolve, lock-free-handlers

The last seven judge any driver from what every driver exposes: its gRPC calls and answers as the
interposer recorded them (:mod:`.calls` reads that record for them), with its node's CDI folder for
``cdi-specs-resolve``.
"""

from __future__ import annotations

from collections.abc import Iterable

from draguard.harness.invariants import (  # noqa: F401  (each registers itself)
    cdi_specs_resolve,
    claim_atomic,
    container_devices,
    gang_atomic,
    lock_free_handlers,
    no_double_allocation,
    no_leak,
    no_legacy_mix,
    no_prepare_loop,
    per_claim_errors,
    prepare_idempotent,
    prepared_devices,
    sharing_explicit,
    topology,
    unprepare_unknown,
)
from draguard.harness.invariants.snapshot import (
    DeviceId,
    DeviceState,
    DriverCall,
    Gang,
    PreparedDevice,
    GpuProbe,
    GpuUsage,
    NodeDriverState,
    Snapshot,
)
from draguard.harness.invariants.violation import Violation
from draguard.harness.core.registry import INVARIANTS

__all__ = [
    "NAMES",
    "evaluate",
    "judged",
    "Violation",
    "Snapshot",
    "DeviceId",
    "DeviceState",
    "DriverCall",
    "PreparedDevice",
    "NodeDriverState",
    "Gang",
    "GpuUsage",
    "GpuProbe",
]

NAMES = (
    claim_atomic.NAME,
    gang_atomic.NAME,
    no_double_allocation.NAME,
    topology.NAME,
    no_leak.NAME,
    no_legacy_mix.NAME,
    sharing_explicit.NAME,
    container_devices.NAME,
    per_claim_errors.NAME,
    prepare_idempotent.NAME,
    unprepare_unknown.NAME,
    prepared_devices.NAME,
    no_prepare_loop.NAME,
    cdi_specs_resolve.NAME,
    lock_free_handlers.NAME,
)
"""Every invariant defined here, in the order of the issue."""


def evaluate(snapshot: Snapshot, names: Iterable[str] | None = None) -> dict[str, list[Violation]]:
    """Judge ``snapshot`` by each named invariant (all registered ones when ``names`` is None).

    Raises KeyError naming the known invariants for an unknown name.
    """
    chosen = list(names) if names is not None else INVARIANTS.names()
    return {name: list(INVARIANTS.get(name).target(snapshot)) for name in chosen}


def judged(*when: str) -> list[str]:
    """Registered invariants judged at any of ``when`` (``continuously``, ``at-settle``,
    ``after-cleanup``), as each declared at registration (default ``at-settle``)."""
    return [e.name for e in INVARIANTS if e.meta.get("judged", "at-settle") in when]
