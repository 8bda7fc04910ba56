"""The gRPC interposer (``draguard proxy``): records and perturbs the calls between nodes and plugins.

Sits between the node side (fake nodes) and any DRA plugin's registration and DRA sockets, so that
drivers without fault hooks can still be given errors, delays, hangs, duplicated calls and stale
retries, per method and per claim, and every call is kept as evidence.
"""

from __future__ import annotations

from draguard.harness.proxy.call_rules import Action, FaultRule, FaultSet, claim_matches, load_rules
from .interposer import Interposer, PluginProxy
from .recorder import CALLS_FILE, CallRecorder, driver_call, read_calls

__all__ = [
    "Interposer",
    "PluginProxy",
    "FaultSet",
    "FaultRule",
    "Action",
    "claim_matches",
    "CallRecorder",
    "CALLS_FILE",
    "read_calls",
    "driver_call",
    "load_rules",
]
