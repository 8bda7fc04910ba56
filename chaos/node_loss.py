"""``node-loss``: a node stops heartbeating (power loss, partition); optionally comes back.

The node lifecycle controller marks it NotReady and, after the pods' tolerations, evicts them. The
node's agent stops syncing too, so prepared devices stay prepared until it returns. A fake node stops
acting while its agent process goes on; a hollow kubelet is killed, its lease expires, and it is
started again (from its checkpoint) when the node returns.
"""

from __future__ import annotations

import time

from draguard.harness.errors import UsageError
from draguard.harness.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.model import Params, PositiveDuration

from datetime import timedelta


class NodeLossParams(Params):
    duration: PositiveDuration | None = None
    """How long the node stays lost (default: until the end of the scenario)."""


@FAULTS.register("node-loss", summary="the targeted node stops heartbeating and syncing pods", params=NodeLossParams,
                 node_capability="loss")
def node_loss(ctx: StepContext, params: NodeLossParams | None) -> None:
    params = params or NodeLossParams()
    nodes_proc = ctx.handles.nodes
    for node in ctx.target_nodes():
        kubelet = ctx.handles.kubelets.get(node)
        if kubelet is not None:
            ctx.before(UndoAction("none", {"why": f"the kubelet of {node} is started again by the step or stopped at teardown"}))
            kubelet.kill()
            ctx.note(f"node {node} lost (kubelet killed)")
            if params.duration is not None:
                time.sleep(params.duration.total_seconds())
                kubelet.start()
                ctx.note(f"node {node} back after {params.duration / timedelta(seconds=1):.0f}s (kubelet restarted)")
            continue
        if nodes_proc is None:
            raise UsageError(f"step {ctx.step.name}: node-loss needs draguard's fake nodes or hollow kubelets")
        marker = nodes_proc.root / node / "lost"
        ctx.before(UndoAction("write-file", {"path": str(marker), "content": None}))
        nodes_proc.set_lost(node, True)
        ctx.note(f"node {node} lost")
        if params.duration is not None:
            time.sleep(params.duration.total_seconds())
            nodes_proc.set_lost(node, False)
            ctx.note(f"node {node} back after {params.duration / timedelta(seconds=1):.0f}s")
        else:
            def restore(node: str = node) -> None:
                nodes_proc.set_lost(node, False)

            ctx.on_undo(restore)
