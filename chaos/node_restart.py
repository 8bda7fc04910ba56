"""``node-restart``: the node agent (kubelet role) is killed and started again.

It must come back from its checkpoint: no claim prepared twice, no claim forgotten. Fake nodes share
one agent process, which restarts as a whole; a hollow kubelet is restarted for each targeted node; a
kind node's kubelet is killed inside its container and systemd starts it again.
"""

from __future__ import annotations

from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.scenario.format import Params


class NodeRestartParams(Params):
    kill: bool = True
    """SIGKILL (a crash) rather than a clean stop."""


@FAULTS.register("node-restart", summary="kill and restart the node agent (fake agent, hollow kubelet or a kind node's kubelet)",
                 params=NodeRestartParams, needs=("kill-node",), node_capability="restart")
def node_restart(ctx: StepContext, params: NodeRestartParams | None) -> None:
    params = params or NodeRestartParams()
    ctx.restart_node_agents(kill=params.kill, nodes=ctx.target_nodes() if ctx.step.target else None)
    ctx.fired()
    ctx.note(f"node agent {'killed' if params.kill else 'stopped'} and restarted")
