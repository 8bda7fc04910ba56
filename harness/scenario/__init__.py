"""The scenario format: the external model (``model``), its loader and checks, and the frozen
internal values the runner reads (``types``). Data flows file -> ``loader`` -> ``types.Scenario``.

Public entry points are re-exported here::

    from draguard.harness.scenario import load_scenarios, Scenario
"""

from draguard.harness.scenario.loader import discover, load_scenario, load_scenarios, parse_scenario, problems_of
from draguard.harness.scenario.schema import json_schema
from draguard.harness.scenario.types import Scenario

__all__ = [
    "Scenario",
    "discover",
    "json_schema",
    "load_scenario",
    "load_scenarios",
    "parse_scenario",
    "problems_of",
]
