"""``draguard conformance``: a DRA driver in a cluster, checked the way users rely on it.

Checks are registered per profile as ``conformance.<profile>.<name>`` (:mod:`.checks`):

    core      the driver publishes; template claim; claim lifecycle (prepared before the pod runs,
              unprepared after it ends, deallocated); force-deleted pod; devices reused N times
    sharing   a claim shared by two pods; one claim in several containers
    topology  matchAttribute within a claim
    gang      a gang spread over nodes with matchAttribute
    chaos     driver restart mid-workload; a claim's cleanup after a driver restart; kubelet restart
              (repeated prepares); NoExecute DeviceTaintRule eviction; a failing device release;
              eviction during prepare
    driver-calls  the invariants judged over each check's gRPC calls, where the interposer records them

The core profile also starts several pods at once (concurrent prepares). Capability detection comes first (:func:`.suite.detect`); a check that does not apply skips with
the reason. Node-side facts need :class:`.suite.NodeAccess`; without it those parts skip.
"""

from __future__ import annotations

from . import checks, driver_calls  # noqa: F401  (register)
from .suite import (
    PROFILES,
    ClusterConfig,
    ClusterContext,
    CommandAccess,
    FakeDriverAccess,
    KubeletRestart,
    NodeAccess,
    cluster_check,
    cluster_checks,
    detect,
    open_context,
    run_check,
    run_conformance,
)

__all__ = [
    "PROFILES",
    "ClusterConfig",
    "ClusterContext",
    "CommandAccess",
    "FakeDriverAccess",
    "KubeletRestart",
    "NodeAccess",
    "cluster_check",
    "cluster_checks",
    "detect",
    "open_context",
    "run_check",
    "run_conformance",
]
