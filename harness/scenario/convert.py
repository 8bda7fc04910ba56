"""External -> internal: a validated :class:`~.model.ScenarioDocument` into a frozen :class:`~.types.Scenario`.

Only called on documents that passed both the schema and the cross-field checks, so it may rely on
"exactly one of" rules and resolved references. It fills defaults, expands node groups and
validates each step's params into its fault's registered params model.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from draguard.harness.core.registry import Registry
from draguard.harness.scenario import format as m
from draguard.harness.scenario import types as t
from draguard.harness.scenario.checks import expand_node_names, interposes, lacking

__all__ = ["to_scenario"]

K = TypeVar("K")
V = TypeVar("V")


def _ro(mapping: Mapping[K, V]) -> Mapping[K, V]:
    return MappingProxyType(dict(mapping))


def _toleration(x: m.TolerationSpec) -> t.Toleration:
    return t.Toleration(x.key, x.operator, x.value, x.effect, x.toleration_seconds)


def _count(mode: t.AllocationMode, count: int | None) -> int | None:
    return None if mode == "All" else (count or 1)


def _request(x: m.RequestSpec) -> t.Request:
    subs = tuple(
        t.SubRequest(
            name=s.name,
            device_class_name=s.device_class_name,
            selectors=tuple(s.selectors),
            allocation_mode=s.allocation_mode,
            count=_count(s.allocation_mode, s.count),
            tolerations=tuple(_toleration(y) for y in s.tolerations),
        )
        for s in x.first_available or ()
    )
    return t.Request(
        name=x.name,
        device_class_name=x.device_class_name,
        selectors=tuple(x.selectors),
        allocation_mode=x.allocation_mode,
        count=None if subs else _count(x.allocation_mode, x.count),
        admin_access=x.admin_access,
        tolerations=tuple(_toleration(y) for y in x.tolerations),
        first_available=subs,
    )


def _claim(x: m.ClaimSpec) -> t.Claim:
    return t.Claim(
        name=x.name,
        source=x.source,
        requests=tuple(_request(r) for r in x.requests),
        constraints=tuple(
            t.Constraint(tuple(c.requests), c.match_attribute, c.distinct_attribute) for c in x.constraints
        ),
        sharing=t.Sharing(x.sharing.strategy) if x.sharing else None,
        config=tuple(t.OpaqueConfig(tuple(c.requests), c.driver, _ro(c.parameters)) for c in x.config),
    )


def _workload(x: m.WorkloadSpec) -> t.Workload:
    return t.Workload(
        name=x.name,
        replicas=x.replicas,
        gang=x.gang,
        min_count=x.min_count or x.replicas,
        priority=x.priority,
        priority_class_name=x.priority_class_name,
        interleave_with=x.interleave_with,
        image=x.image,
        run_for=x.run_for,
        extended_resources=_ro(x.extended_resources),
        claims=tuple(_claim(c) for c in x.claims),
    )


def _topology(x: m.TopologySpec) -> t.Topology:
    return t.Topology(
        preset=x.preset,
        gpus=x.gpus,
        product_name=x.product_name,
        memory=x.memory,
        nvlink_domains=x.nvlink_domains,
        numa_nodes=x.numa_nodes,
        allow_multiple_allocations=x.allow_multiple_allocations,
        devices=tuple(
            t.Device(
                name=d.name,
                attributes=_ro(d.attributes),
                capacity=_ro(d.capacity),
                allow_multiple_allocations=d.allow_multiple_allocations,
                taints=tuple(t.DeviceTaint(y.key, y.value, y.effect) for y in d.taints),
            )
            for d in x.devices or ()
        ),
    )


def _nodes(groups: list[m.NodeGroupSpec]) -> tuple[t.Node, ...]:
    nodes: list[t.Node] = []
    for g in groups:
        group_name = g.name_prefix or g.name or ""
        topology = _topology(g.topology) if g.topology else None
        plain = g.model_dump(by_alias=True, exclude_none=True)
        for name in expand_node_names(plain):
            nodes.append(t.Node(name=name, group=group_name, labels=_ro(g.labels), topology=topology, agent=g.agent))
    return tuple(nodes)


def _step(i: int, x: m.StepSpec, faults: Registry[Any], replicas: Mapping[str, int], timing: m.TimingSpec) -> t.Step:
    params_model = faults.get(x.fault).params
    params = params_model.model_validate(x.params) if params_model is not None else None
    target = x.target
    return t.Step(
        index=i,
        name=x.name or f"{i}-{x.fault}",
        at=x.at,
        when=(
            t.Condition(x.when.workload, x.when.phase, x.when.count or replicas[x.when.workload]) if x.when else None
        ),
        fault=x.fault,
        target=(
            t.Target(
                workload=target.workload,
                member=target.member if target.member is not None or target.workload is None else "random",
                node=target.node,
                claim=target.claim,
                device=target.device,
            )
            if target
            else None
        ),
        params=params,
        after=t.After(x.after.step, x.after.delay) if x.after else None,
        tolerance=x.tolerance or timing.step_tolerance,
        timeout=x.timeout or timing.condition_timeout,
        optional=x.optional,
    )


def to_scenario(
    doc: m.ScenarioDocument, *, source: Path | None, faults: Registry[Any], invariants: Registry[Any]
) -> t.Scenario:
    """The runner's frozen view of a document that passed validation and the cross-field checks."""
    s = doc.spec
    workloads = tuple(_workload(w) for w in s.workloads)
    replicas = {w.name: w.replicas for w in workloads}
    steps = tuple(_step(i, x, faults, replicas, s.timing) for i, x in enumerate(s.timeline))
    violate = tuple(s.expect.violate)
    ignore = tuple(t.Ignore(i.invariant, i.reason.strip()) for i in s.expect.ignore)
    # Every invariant this run can judge counts (per-claim-errors needs the interposer; naming one
    # explicitly where it cannot be judged is refused by the checks). Left out of ``hold``, it is judged
    # all the same but need not be: ``unnamed`` keeps those for the note validate and run print.
    interpose = interposes(s.driver.kind, s.cluster.backend, s.driver.interpose)
    lacks = lacking(s.driver.kind, s.cluster.backend, interpose, s.driver.daemon_set is not None,
                    s.driver.restart_command is not None)
    named = {*violate, *(i.invariant for i in ignore)}
    judgeable = tuple(name for name in invariants.names() if name not in named
                      and not lacks.keys() & set(invariants.get(name).meta.get("needs", ())))
    hold = tuple(s.expect.hold) if s.expect.hold is not None else judgeable
    unnamed = () if s.expect.hold is None else tuple(n for n in judgeable if n not in hold)
    return t.Scenario(
        name=doc.metadata.name,
        description=doc.metadata.description.strip(),
        source=source,
        seed=s.seed,
        cluster=t.Cluster(
            backend=s.cluster.backend,
            kubeconfig=Path(s.cluster.kubeconfig) if s.cluster.kubeconfig else None,
            context=s.cluster.context,
            feature_gates=_ro(s.cluster.feature_gates),
            runtime_config=_ro(s.cluster.runtime_config),
            client_qps=s.cluster.client_qps,
            client_burst=s.cluster.client_burst,
            max_requests_inflight=s.cluster.max_requests_inflight,
            kind_cluster=s.cluster.kind_cluster or "default",
        ),
        driver=t.Driver(s.driver.kind, s.driver.name, s.driver.mutant, s.driver.device_class, interpose,
                        s.driver.hosting,
                        (s.driver.daemon_set.namespace, s.driver.daemon_set.name) if s.driver.daemon_set else None,
                        s.driver.restart_command),
        nodes=_nodes(s.nodes),
        device_classes=tuple(
            t.DeviceClass(c.name, tuple(c.selectors), c.extended_resource_name) for c in s.device_classes
        ),
        workloads=workloads,
        timeline=steps,
        settle=t.Settle(s.settle.timeout, s.settle.cleanup),
        expect=t.Expectations(
            hold=hold,
            violate=violate,
            ignore=ignore,
            unnamed=unnamed,
            evidence=tuple(t.EvidenceRule(e.invariant, e.workload, e.member, e.claim, e.node, e.device)
                           for e in s.expect.evidence),
            progress=tuple(t.Progress(tuple(p.workloads), p.phase, p.count, p.need,
                                      p.within.total_seconds() if p.within is not None else None, p.after)
                           for p in s.expect.progress),
            events=tuple(t.EventExpectation(e.reason, e.message, e.workload, e.seen) for e in s.expect.events),
        ),
        timing=t.Timing(s.timing.step_tolerance, s.timing.condition_timeout, s.timing.gang_grace),
    )

