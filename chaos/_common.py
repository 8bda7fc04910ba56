"""Small helpers shared by the fault modules: pod names, a non-empty target."""

from __future__ import annotations

from draguard.harness.core.errors import UsageError
from draguard.harness.kube import Obj
from draguard.harness.runner.context import StepContext


def name(pod: Obj) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def require(pods: list[Obj], ctx: StepContext) -> list[Obj]:
    if not pods:
        raise UsageError(f"step {ctx.step.name}: no pod matches the target {ctx.target}")
    return pods
