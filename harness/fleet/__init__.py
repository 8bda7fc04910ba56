"""Fleets: who runs a scenario's nodes and drivers (:mod:`draguard.harness.fleet.base`). Importing this
package registers every fleet in :data:`FLEETS`."""

from .base import FLEET_CAPABILITIES, FLEETS, Fleet, FleetRun, fleet_for
from . import external, fake, installed, kubelet  # noqa: F401  (they register themselves)

__all__ = ["FLEET_CAPABILITIES", "FLEETS", "Fleet", "FleetRun", "fleet_for"]
