"""``draguard run --dry-run``: what a run of a scenario would create and do, without touching anything.

:func:`plan_of` reads the scenario and the deployment's own ordering (:mod:`draguard.harness.runner.deploy`:
the claim objects of each workload, the pods' creation order, the workloads a step holds back) into a
:class:`~draguard.harness.campaign.models.ScenarioPlan`, which ``draguard.reports.console`` prints.
"""

from __future__ import annotations

from collections.abc import Mapping

from draguard.harness.runner import deploy
from draguard.harness.scenario.types import Node, Scenario, Step

from .models import PlannedStep, ScenarioPlan

__all__ = ["plan_of"]


def _topology(n: Node) -> str:
    t = n.topology
    if t is None:
        return "-"
    return t.preset or f"{t.gpus} GPUs" if t.preset or t.gpus else f"{len(t.devices)} devices"


DRIVER_PODS_FAULTS = frozenset({"driver-restart", "driver-down"})
"""Steps that delete or evict an installed driver's pods on the nodes they target."""


def _touches(sc: Scenario, step: Step, driver_pods: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The blast radius of ``step``: the nodes it may act on, the run's pods, the driver's pods there."""
    names = [n.name for n in sc.nodes]
    t = step.target
    pods: list[str] = []
    one_of = False
    if t is not None and t.workload is not None:
        w = next((w for w in sc.workloads if w.name == t.workload), None)
        every = w is not None and t.member in (None, "all", "random")
        one_of = t.member == "random"
        pods = [f"{t.workload}-{m}" for m in (range(w.replicas) if every and w is not None else [t.member])]
    if t is not None and t.node not in (None, "random", "all"):
        nodes, how = [str(t.node)], "node"
    elif t is not None and t.node == "all":
        nodes, how = names, "every node"
    elif pods:
        nodes, how = names, ("the node of one of " if one_of else "the node(s) of ") + ", ".join(pods) + ", among"
    else:
        nodes, how = names, "the fault's default among"
    out = [f"{how} {', '.join(nodes)}" if how != "node" else f"node {nodes[0]}"]
    if pods:
        out.append(("one of the run's pods " if one_of else "the run's pods ") + ", ".join(pods) + " (in the run's namespace)")
    if step.fault in DRIVER_PODS_FAULTS and driver_pods:
        ds = [p for n in nodes for p in driver_pods.get(n, ())]
        out.append("the driver's pod(s) " + (", ".join(ds) if ds else "(none found on those nodes)"))
    return tuple(out)


def _step(sc: Scenario, step: Step, driver_pods: Mapping[str, tuple[str, ...]]) -> PlannedStep:
    return PlannedStep(
        step.name, step.fault, step.index,
        at=step.at.total_seconds() if step.at is not None else None,
        after=(step.after.delay.total_seconds(), step.after.step) if step.after is not None else None,
        when=str(step.when) if step.at is None and step.after is None else None,
        target=str(step.target) if step.target else None,
        touches=_touches(sc, step, driver_pods),
    )


def plan_of(sc: Scenario, seed: int | None = None, driver_pods: Mapping[str, tuple[str, ...]] | None = None,
            backend: str | None = None) -> ScenarioPlan:
    """The plan of ``sc``; ``seed`` overrides the scenario's (``--seed``), ``backend`` its backend
    (``--cluster``); ``driver_pods``: node -> ``namespace/name`` of an installed driver's pods there, for
    the blast radius of driver steps."""
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
        backend=backend or sc.cluster.backend, feature_gates=dict(sc.cluster.feature_gates),
        driver=f"{sc.driver.kind} {sc.driver.name}", mutant=sc.driver.mutant,
        nodes=tuple((n.name, _topology(n)) for n in sc.nodes),
        device_classes=tuple(dc.name for dc in sc.device_classes),
        creates=tuple(creates),
        pods=tuple(f"{w.name}-{i}" for w, i in deploy.creation_order(sc) if w.name not in deferred),
        held_back=tuple(held_back),
        steps=tuple(_step(sc, s, driver_pods or {}) for s in sc.timeline),
        hold=tuple(sc.expect.hold), violate=tuple(sc.expect.violate),
        ignore=tuple((i.invariant, i.reason) for i in sc.expect.ignore),
        unnamed=tuple(sc.expect.unnamed),
    )
