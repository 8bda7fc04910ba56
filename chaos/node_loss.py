"""``node-loss``: a node stops heartbeating (power loss, partition); optionally comes back.

The node lifecycle controller marks it NotReady and, after the pods' tolerations, evicts them. The
node's agent stops syncing too, so prepared devices stay prepared until it returns (after
``duration``, or when the cleanup phase starts). A fake node stops acting while its agent process goes
on; a hollow kubelet is killed, its lease expires, and it is started again (from its checkpoint) when
the node returns; a kind node's container is paused (its kubelet, containerd and pods frozen) and
thawed when it returns.
"""

from __future__ import annotations

import functools
from datetime import timedelta

from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.scenario.format import Params, PositiveDuration


class NodeLossParams(Params):
    duration: PositiveDuration | None = None
    """How long the node stays lost (default: until the cleanup phase starts)."""


@FAULTS.register("node-loss", summary="the targeted node stops heartbeating and syncing pods",
                 params=NodeLossParams, needs=("kill-node",), node_capability="loss")
def node_loss(ctx: StepContext, params: NodeLossParams | None) -> None:
    params = params or NodeLossParams()
    nodes = ctx.target_nodes()
    for node in nodes:
        ctx.set_node_lost(node, True)
        ctx.fired()
        ctx.note(f"node {node} lost")
        if params.duration is None:
            ctx.on_undo(functools.partial(ctx.set_node_lost, node, False), until_cleanup=True)
    if params.duration is None:
        return
    full = ctx.sleep(params.duration.total_seconds())
    for node in nodes:
        ctx.set_node_lost(node, False)
        ctx.note(f"node {node} back after {params.duration / timedelta(seconds=1):.0f}s"
                 + ("" if full else " (cut short: cleanup started)"))
