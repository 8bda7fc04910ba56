"""Chaos steps: one module per fault kind, each registered by name into ``FAULTS``.

A fault is ``def fault(ctx: StepContext, params: Params | None) -> None``: it picks its targets with
``ctx.rng`` among the scenario's own objects, journals its undo with ``ctx.before(...)`` before it
changes anything, and says what it did with ``ctx.note(...)``. Importing this package registers all
of them; the scenario loader then validates each step's ``params`` against the fault's model.

    arrive, preempt, evict, force-delete, drain-node, node-loss, node-restart, node-reboot, driver-restart, driver-rolling-update,
    driver-down,
    driver-crash, checkpoint-corrupt, reset-failure, prepare-failure, prepare-hang, unprepare-failure, device-taint,
    scheduler-restart, controller-manager-restart, apiserver-restart
"""

from __future__ import annotations

from draguard.chaos import (  # noqa: F401  (each module registers itself)
    arrive,
    checkpoint_corrupt,
    component_restart,
    device_failure,
    device_taint,
    drain_node,
    driver_crash,
    driver_down,
    driver_faults,
    driver_restart,
    driver_rolling_update,
    evict,
    force_delete,
    load,
    node_loss,
    node_reboot,
    node_restart,
    preempt,
)
from draguard.harness.core.registry import FAULTS

__all__ = ["FAULTS"]
