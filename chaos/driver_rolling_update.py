"""``driver-rolling-update``: a node's DRA driver is replaced by a new instance started beside it.

A DaemonSet rolling update with surge (``maxSurge: 1, maxUnavailable: 0``) starts the new driver pod
before it stops the old one. The kubeletplugin helper's RollingUpdate mode gives each instance its own
sockets, named after its pod UID, over one shared plugin data directory; the kubelet (1.33 and later)
keeps both registrations and prefers the most recent connected one, so a claim prepared by the old
instance is unprepared by the new one (k8s.io/dynamic-resource-allocation/kubeletplugin, draplugin.go;
pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go). A correct driver loads the shared state at the start
of every call; one that keeps books of its own forgets what its predecessor prepared.

draguard's fake driver (a process per node, or a node of the driver host): the new instance starts,
both serve for ``overlap``, then the old one is stopped with SIGTERM.
"""

from __future__ import annotations

from datetime import timedelta

from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.scenario.format import Params, PositiveDuration


class DriverRollingUpdateParams(Params):
    overlap: PositiveDuration = timedelta(seconds=1)
    """How long the old and the new instance serve side by side before the old one stops."""


@FAULTS.register("driver-rolling-update", summary="start a new instance of the DRA driver beside the old one on the "
                 "targeted node, then stop the old one (a DaemonSet rolling update with surge)",
                 params=DriverRollingUpdateParams, needs=("fake-driver", "rolling-update"))  # fmt: skip
def driver_rolling_update(ctx: StepContext, params: DriverRollingUpdateParams | None) -> None:
    params = params or DriverRollingUpdateParams()
    for node in ctx.target_nodes():
        instance = ctx.fake_driver(node).rolling_update(params.overlap.total_seconds())
        ctx.fired()
        ctx.note(f"driver on {node}: instance {instance} started beside the old one, which stopped after "
                 f"{params.overlap.total_seconds():g}s")  # fmt: skip
