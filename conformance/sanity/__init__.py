"""``draguard sanity``: the gRPC contract of any DRA kubelet plugin, checked the way the kubelet calls it.

Like csi-sanity for CSI drivers: the suite dials the driver's registration and DRA sockets, creates
real allocated ResourceClaims in the API server for the node's published devices, and runs one
registered check per rule, one module per area:

    registration  GetInfo, advertised versions, the endpoint, NotifyRegistrationStatus
    prepare       empty request, one entry per claim, per-claim errors, idempotence, replaced,
                  foreign and in-use claims, a stale prepare
    unprepare     empty request, one entry per claim, idempotence, unknown and deleted claims,
                  a failed device release retried
    cdi           CDI IDs resolve; specs are gone after unprepare
    restart       prepared state survives a driver restart; an interrupted prepare is undone
    concurrency   concurrent calls on one and many claims; no call blocked by a slow one
    health        the DRAResourceHealth stream: opens, published devices only, breaks reported,
                  served implies advertised
    slices        the published pool: complete, unique names, typed values, the node named,
                  counters of partitionable devices

Each check has a stable id (``sanity.<area>.<name>``), a one-line rule, its source, and ends
passed, failed with evidence, skipped with the reason, or error. Entry points: :func:`run_sanity`
(the CLI, ``draguard sanity``) and the pytest module :mod:`.test_sanity`
(``pytest --pyargs draguard.conformance.sanity``). :mod:`.matrix` renders the mutant × check table.
"""

from __future__ import annotations

AREAS = ("registration", "prepare", "unprepare", "cdi", "restart", "concurrency", "health", "slices")

if __name__ != "draguard.conformance.sanity":
    # Imported by file path under another name (``pytest --pyargs`` on an editable install names the
    # test module after its folders): hand back the one real package, so no check registers twice.
    import importlib as _importlib
    import sys as _sys

    _sys.modules[__name__] = _importlib.import_module("draguard.conformance.sanity")
else:
    from . import cdi, concurrency, health, prepare, registration, restart, slices, unprepare  # noqa: F401  (register)
    from .hooks import CommandHooks, FakeDriverHooks
    from .suite import (
        CheckFailed,
        DriverHooks,
        SanityConfig,
        SanityContext,
        Skip,
        open_context,
        require_node,
        require_sockets,
        run_check,
        run_sanity,
        sanity_check,
        sanity_checks,
    )

__all__ = [
    "AREAS",
    "SanityConfig",
    "DriverHooks",
    "SanityContext",
    "CommandHooks",
    "FakeDriverHooks",
    "require_sockets",
    "require_node",
    "Skip",
    "CheckFailed",
    "sanity_check",
    "sanity_checks",
    "open_context",
    "run_check",
    "run_sanity",
]
