"""``node-restart``: the node agent (kubelet role) is killed and started again.

It must come back from its checkpoint: no claim prepared twice, no claim forgotten.
"""

from __future__ import annotations

from draguard.harness.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.scenario.model import Params


class NodeRestartParams(Params):
    kill: bool = True
    """SIGKILL (a crash) rather than a clean stop."""


@FAULTS.register("node-restart", summary="kill and restart the fake node agent", params=NodeRestartParams,
                 needs=("fake-nodes",))
def node_restart(ctx: StepContext, params: NodeRestartParams | None) -> None:
    params = params or NodeRestartParams()
    ctx.restart_node_agents(kill=params.kill)
    ctx.fired()
    ctx.note(f"node agent {'killed' if params.kill else 'stopped'} and restarted")
