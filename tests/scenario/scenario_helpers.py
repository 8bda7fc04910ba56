"""Shared pieces of the scenario tests: the planned fault kinds (the real ones come from
draguard.chaos) with two parameter models, and the example scenario's path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from draguard.harness.core.registry import Registry
from draguard.harness.scenario.format import Duration, Params

DATA = Path(__file__).parent / "data"
EXAMPLE = DATA / "gang-deadlock.yaml"

PLANNED_FAULTS = (
    "preempt", "evict", "force-delete", "drain-node", "node-loss", "driver-restart", "driver-down",
    "reset-failure", "prepare-failure", "prepare-hang", "unprepare-failure", "device-taint",
    "scheduler-restart", "controller-manager-restart", "apiserver-restart", "node-restart",
)  # fmt: skip


class EvictParams(Params):
    grace_period: Duration | None = None
    """Grace period of the eviction."""


class DrainParams(Params):
    timeout: Duration
    """How long the drain may take."""
    force: bool = False
    """Delete pods that an eviction cannot remove."""


def _noop(*_: Any) -> None:
    return None


def planned_faults() -> Registry[Any]:
    registry: Registry[Any] = Registry("fault")
    params = {"evict": EvictParams, "drain-node": DrainParams}
    for name in PLANNED_FAULTS:
        registry.register(name, summary=f"the {name} fault", params=params.get(name))(_noop)
    return registry
