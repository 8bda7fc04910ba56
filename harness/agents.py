"""Node agents: what plays the kubelet's part on a scenario's nodes, and what each can do.

``fake`` is draguard's own node agent (:mod:`draguard.harness.nodes`): hundreds of nodes in one
process, node faults from marker files. ``kubelet`` is the hollow DRA kubelet
(:mod:`draguard.harness.kubelet`): upstream's kubelet code, one process per node.

A fault that needs something of the nodes it targets registers ``node_capability=<name>`` in
:data:`~draguard.harness.core.registry.FAULTS`; the scenario checker rejects a step whose target nodes
run an agent without that capability, and node groups larger than an agent can serve.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

__all__ = ["AgentName", "AGENTS", "CAPABILITIES", "MAX_NODES", "capable"]

AgentName = Literal["fake", "kubelet"]
AGENTS: tuple[AgentName, ...] = ("fake", "kubelet")

CAPABILITIES: Mapping[str, frozenset[str]] = {
    # restart: the agent process is killed (or stopped) and started again, recovering from its checkpoint.
    # loss: the node stops heartbeating and syncing pods, and may come back.
    # loss-in-place: during a loss the agent stays alive and keeps its memory (the fake agent only stops
    #   acting on the node); a lost kubelet is a stopped process that comes back from its checkpoint.
    "fake": frozenset({"restart", "loss", "loss-in-place"}),
    "kubelet": frozenset({"restart", "loss"}),
}

MAX_NODES: Mapping[str, int] = {"fake": 1000, "kubelet": 16}
"""Nodes of one agent per scenario: a hollow kubelet costs about 100 MB and a process each."""


def capable(agent: str, capability: str) -> bool:
    return capability in CAPABILITIES.get(agent, frozenset())
