"""``drain-node``: cordon a node and evict every scenario pod on it, as `kubectl drain` does."""

from __future__ import annotations

from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction


@FAULTS.register("drain-node", summary="cordon the targeted node and evict the scenario's pods on it")
def drain_node(ctx: StepContext, params: None) -> None:
    for node in ctx.target_nodes():
        ctx.before(UndoAction("patch-object", {"kind": "Node", "name": node, "patch": {"spec": {"unschedulable": None}}}))
        ctx.kube.patch("Node", node, {"spec": {"unschedulable": True}})

        def uncordon(node: str = node) -> None:
            ctx.kube.patch("Node", node, {"spec": {"unschedulable": None}})

        ctx.on_undo(uncordon)
        evicted = 0
        for pod in ctx.pods():
            if pod["spec"].get("nodeName") != node:
                continue
            md = pod["metadata"]
            ctx.kube.request("POST", ctx.kube.path("Pod", md["name"], md["namespace"], "eviction"),
                             body={"apiVersion": "policy/v1", "kind": "Eviction",
                                   "metadata": {"name": md["name"], "namespace": md["namespace"]}})
            evicted += 1
        ctx.fired(max(evicted, 1))
        ctx.note(f"cordoned {node} and evicted {evicted} pod(s)")
