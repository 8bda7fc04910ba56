"""``node-restart``: the node agent (kubelet role) is killed and started again.

It must come back from its checkpoint: no claim prepared twice, no claim forgotten.
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


@FAULTS.register("node-restart", summary="kill and restart the fake node agent", params=NodeRestartParams)
def node_restart(ctx: StepContext, params: NodeRestartParams | None) -> None:
    params = params or NodeRestartParams()
    proc = ctx.handles.nodes
    if proc is None:
        raise UsageError(f"step {ctx.step.name}: node-restart needs draguard's fake nodes")
    ctx.before(UndoAction("none", {"why": "the agent is started again by the step itself"}))
    proc.restart(kill=params.kill)
    if proc.pid:
        ctx.handles.journal.process(proc.pid, "draguard nodes (restarted)")
    ctx.note(f"node agent {'killed' if params.kill else 'stopped'} and restarted")
