"""``draguard run --dry-run``: what a run of a scenario would create and do, without touching anything.

:func:`plan_of` reads the scenario and the deployment's own ordering (:mod:`draguard.harness.runner.deploy`:
the claim objects of each workload, the pods' creation order, the workloads a step holds back) into a
:class:`~draguard.harness.campaign.models.ScenarioPlan`, which ``draguard.reports.console`` prints.
"""

from __future__ import annotations

from draguard.harness.runner import deploy
from draguard.harness.scenario.types import Node, Scenario, Step

from .models import PlannedStep, ScenarioPlan

__all__ = ["plan_of"]


def _topology(n: Node) -> str:
    t = n.topology
    if t is None:
        return "-"
    return t.preset or f"{t.gpus} GPUs" if t.preset or t.gpus else f"{len(t.devices)} devices"


def _step(step: Step) -> PlannedStep:
    return PlannedStep(
        step.name, step.fault, step.index,
        at=step.at.total_seconds() if step.at is not None else None,
        after=(step.after.delay.total_seconds(), step.after.step) if step.after is not None else None,
        when=str(step.when) if step.at is None and step.after is None else None,
        target=str(step.target) if step.target else None,
    )


def plan_of(sc: Scenario, seed: int | None = None) -> ScenarioPlan:
    """The plan of ``sc``; ``seed`` overrides the scenario's (``--seed``)."""
    creates: list[tuple[str, str, str]] = []
    for w in sc.workloads:
        creates += [(obj["kind"], obj["metadata"]["name"], "") for obj in deploy.claim_objects(w, "<namespace>", "<run>")]
        if w.gang == "podgroup":
            creates.append(("PodGroup", w.name, f"minCount {w.min_count}"))
    deferred = deploy.deferred_workloads(sc)
    held_back = []
    for name in sorted(deferred):
        by = next(s for s in sc.timeline if getattr(s.params, "workload", None) == name)
        held_back.append((name, by.name, by.fault))
    return ScenarioPlan(
        name=sc.name, source=str(sc.source), seed=seed if seed is not None else sc.seed,
        backend=sc.cluster.backend, feature_gates=dict(sc.cluster.feature_gates),
        driver=f"{sc.driver.kind} {sc.driver.name}", mutant=sc.driver.mutant,
        nodes=tuple((n.name, _topology(n)) for n in sc.nodes),
        device_classes=tuple(dc.name for dc in sc.device_classes),
        creates=tuple(creates),
        pods=tuple(f"{w.name}-{i}" for w, i in deploy.creation_order(sc) if w.name not in deferred),
        held_back=tuple(held_back),
        steps=tuple(_step(s) for s in sc.timeline),
        hold=tuple(sc.expect.hold), violate=tuple(sc.expect.violate),
        ignore=tuple((i.invariant, i.reason) for i in sc.expect.ignore),
        unnamed=tuple(sc.expect.unnamed),
    )
