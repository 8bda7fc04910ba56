"""The ``conformance.driver-calls`` checks: one per invariant judged over the driver's gRPC calls.

Every check before them had its calls judged (:class:`.calls.CallJudge`, from the gRPC interposer's
record, check by check); each of these reports one invariant of :data:`.calls.JUDGED`: failed with
every breach (the check it was seen in, the call, the claim), passed with how many calls were judged,
skipped when no check called the driver, and not applicable, with the reason, where no interposer sits
in front of the driver (:func:`.suite.run_check`). They run last (their profile is the last).
"""

from __future__ import annotations

from draguard.harness.core.registry import INVARIANTS
from draguard.harness.result import Evidence

from ..checks import CheckFailed, Skip
from .calls import JUDGED
from .suite import CheckFn, ClusterContext, cluster_check

__all__: list[str] = []

SOURCE = ("k8s.io/kubelet/pkg/apis/dra/v1/api.proto (NodePrepareResources, NodeUnprepareResources); "
          "pkg/kubelet/cm/dra/manager.go; judged as draguard's invariant {name} (harness/invariants) judges it")

SHOWN = 5
"""Breaches named in the reason (all of them are in the evidence)."""


def _judge(name: str) -> CheckFn:
    def check(ctx: ClusterContext) -> None:
        assert ctx.calls is not None  # run_check reports these not applicable without a record
        judged = {c: n for c, n in ctx.calls.calls_judged.items() if n}
        if not judged:
            raise Skip("no check before it called the driver's NodePrepareResources or NodeUnprepareResources "
                       "through the interposer")
        found = ctx.calls.findings(name)
        if found:
            lines = [f"in {f.check}: {f.violation.message}" for f in found]
            more = f" (and {len(lines) - SHOWN} more in the evidence)" if len(lines) > SHOWN else ""
            raise CheckFailed(f"{len(found)} breach(es) of {name}: " + " | ".join(lines[:SHOWN]) + more,
                              [Evidence(f"{f.check}: {f.violation.message}", f.violation.objects, f.violation.devices,
                                        f.violation.time) for f in found])
        ctx.notes.append(f"judged over {sum(judged.values())} prepare/unprepare call(s) of {len(judged)} check(s)")

    return check


for _name in JUDGED:
    cluster_check(f"conformance.driver-calls.{_name}", rule=INVARIANTS.get(_name).summary,
                  source=SOURCE.format(name=f"`{_name}`"), needs=("gRPC interposer record",), allocates=False,
                  driver_calls=True)(_judge(_name))
