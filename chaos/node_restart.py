"""``node-restart``: the node agent (kubelet role) is killed and started again.

It must come back from its checkpoint: no claim prepared twice, no claim forgotten. Fake nodes share
one agent process, which restarts as a whole; a hollow kubelet is restarted for each targeted node.
"""

from __future__ import annotations

from draguard.harness.errors import UsageError
from draguard.harness.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.model import Params


class NodeRestartParams(Params):
    kill: bool = True
    """SIGKILL (a crash) rather than a clean stop."""


@FAULTS.register("node-restart", summary="kill and restart the node agent (fake agent or hollow kubelet)",
                 params=NodeRestartParams, node_capability="restart")
def node_restart(ctx: StepContext, params: NodeRestartParams | None) -> None:
    params = params or NodeRestartParams()
    proc = ctx.handles.nodes
    targets = ctx.target_nodes() if ctx.step.target else ctx.node_names()
    kubelets = [ctx.handles.kubelets[n] for n in targets if n in ctx.handles.kubelets]
    if proc is None and not kubelets:
        raise UsageError(f"step {ctx.step.name}: node-restart needs draguard's fake nodes or hollow kubelets")
    ctx.before(UndoAction("none", {"why": "the agent is started again by the step itself"}))
    for kubelet in kubelets:
        kubelet.restart(kill=params.kill)
        if kubelet.pid:
            ctx.handles.journal.process(kubelet.pid, f"hollow kubelet {kubelet.node} (restarted)")
        ctx.note(f"kubelet of node {kubelet.node} {'killed' if params.kill else 'stopped'} and restarted")
    if proc is None or (kubelets and not any(n not in ctx.handles.kubelets for n in targets)):
        return
    proc.restart(kill=params.kill)
    if proc.pid:
        ctx.handles.journal.process(proc.pid, "draguard nodes (restarted)")
    ctx.note(f"node agent {'killed' if params.kill else 'stopped'} and restarted")
