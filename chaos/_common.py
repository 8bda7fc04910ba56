"""Small helpers shared by the fault modules: the fake-driver handle of a node, pod names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from draguard.harness.errors import UsageError
from draguard.harness.kube import Obj
from draguard.harness.runner.context import StepContext

if TYPE_CHECKING:
    from draguard.harness.driver.process import FakeDriverProcess


def fake_driver(ctx: StepContext, node: str) -> FakeDriverProcess:
    """The fake driver process of ``node``; faults that need one reject an external driver clearly."""
    proc = ctx.handles.drivers.get(node)
    if proc is None:
        raise UsageError(
            f"step {ctx.step.name}: fault {ctx.step.fault} needs draguard's fake driver on node {node}; "
            "with an external driver use the gRPC interposer (draguard proxy) instead"
        )
    return proc


def name(pod: Obj) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def require(pods: list[Obj], ctx: StepContext) -> list[Obj]:
    if not pods:
        raise UsageError(f"step {ctx.step.name}: no pod matches the target {ctx.target}")
    return pods
