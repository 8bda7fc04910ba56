"""Fake nodes: the kubelet's DRA role for nodes without machines (``draguard nodes``).

One process hosts many nodes (:class:`FakeNodes`, one :class:`NodeAgent` each): Node objects kept
Ready by lease heartbeats, plugin discovery through registration sockets, NodePrepareResources
before a pod may run and NodeUnprepareResources after its last user is gone, and a checkpoint that
survives restarts. :class:`FakeNodesProcess` runs it as a child process for the runner and chaos.
"""

from __future__ import annotations

from .agent import LOST_FILE, FakeNodes, NodeAgent
from .checkpoint import CHECKPOINT_FILE, Checkpoint
from .manager import DraManager, PodClaim, PrepareError
from .node import FAKE_NODE_LABEL, KUBELET_VERSION, RUN_LABEL, NodeSpec
from .plugins import NodePlugins
from .process import FakeNodesProcess, default_root, node_names

__all__ = [
    "FakeNodes",
    "NodeAgent",
    "NodeSpec",
    "FakeNodesProcess",
    "DraManager",
    "PodClaim",
    "PrepareError",
    "NodePlugins",
    "Checkpoint",
    "CHECKPOINT_FILE",
    "LOST_FILE",
    "FAKE_NODE_LABEL",
    "RUN_LABEL",
    "KUBELET_VERSION",
    "default_root",
    "node_names",
]
