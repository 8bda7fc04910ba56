"""ResourceSlices: the driver's published pool is complete and consistent, device names are unique,
attribute and capacity values are well-typed, and each slice names the node it is for.

Rules from the ResourceSlice API (``k8s.io/api/resource/v1/types.go``: ``ResourcePool.generation``
and ``resourceSliceCount``, device name uniqueness within a pool, one value field per attribute)
and from the scheduler, which ignores a pool whose slices of the newest generation are incomplete
(``k8s.io/dynamic-resource-allocation/structured``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from draguard.harness.cel import parse_quantity
from draguard.harness.core.errors import HarnessError
from draguard.harness.kube import Obj

from .suite import SanityContext, Skip, expect, sanity_check

API = "resource.k8s.io/v1 ResourceSlice (k8s.io/api resource/v1/types.go)"
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i?|[munkMGTPE])?$")
_VALUE_FIELDS = ("int", "bool", "string", "version", "ints", "bools", "strings", "versions")


def _slices(ctx: SanityContext, allow_empty: bool = False) -> list[Obj]:
    if ctx.kube is None or ctx.node is None or ctx.setup_error:
        raise HarnessError(f"the driver's ResourceSlices could not be read: {ctx.setup_error or 'no node'}")
    if not ctx.slices and not allow_empty:
        raise Skip(f"{ctx.config.driver} publishes no ResourceSlice for node {ctx.node} (sanity.slices.published)")
    return ctx.slices


def _pools(slices: list[Obj]) -> dict[str, list[Obj]]:
    pools: dict[str, list[Obj]] = defaultdict(list)
    for s in slices:
        pools[s.get("spec", {}).get("pool", {}).get("name", "")].append(s)
    return pools


def _current(slices: list[Obj]) -> list[Obj]:
    gen = max(int(s["spec"]["pool"].get("generation", 0)) for s in slices)
    return [s for s in slices if int(s["spec"]["pool"].get("generation", 0)) == gen]


@sanity_check(
    "sanity.slices.published",
    rule="the driver publishes at least one ResourceSlice with devices for the node",
    source=f"{API}; KEP-4381 (drivers publish node-local devices)",
)
def published(ctx: SanityContext) -> None:
    slices = _slices(ctx, allow_empty=True)
    expect(bool(ctx.node_devices()), f"no ResourceSlice of {ctx.config.driver} with devices for node {ctx.node} "
           f"({len(slices)} slice(s) without devices)")


@sanity_check(
    "sanity.slices.pool-complete",
    rule="each pool's slices of its newest generation number exactly its resourceSliceCount and agree on it",
    source=f"{API}; k8s.io/dynamic-resource-allocation/structured (incomplete pools are not allocated from)",
)
def pool_complete(ctx: SanityContext) -> None:
    for pool, slices in _pools(_slices(ctx)).items():
        cur = _current(slices)
        counts = {int(s["spec"]["pool"].get("resourceSliceCount", 0)) for s in cur}
        names = [s["metadata"]["name"] for s in cur]
        expect(len(counts) == 1, f"pool {pool}: slices {names} disagree on resourceSliceCount {sorted(counts)}", names)
        (count,) = counts
        expect(count == len(cur), f"pool {pool}: resourceSliceCount is {count} but {len(cur)} slice(s) of the newest "
               f"generation exist: {names}", names)


@sanity_check(
    "sanity.slices.unique-devices",
    rule="device names are unique within a pool",
    source=API,
)
def unique_devices(ctx: SanityContext) -> None:
    for pool, slices in _pools(_slices(ctx)).items():
        seen: dict[str, str] = {}
        for s in _current(slices):
            for d in s["spec"].get("devices") or []:
                name = d.get("name", "")
                expect(name not in seen, f"pool {pool}: device {name} is in slices {seen.get(name)} and "
                       f"{s['metadata']['name']}", [s["metadata"]["name"]], [name])
                seen[name] = s["metadata"]["name"]


def _attribute_problem(key: str, value: Any) -> str | None:
    if not isinstance(value, dict):
        return f"attribute {key} is {value!r}, not an object"
    kinds = [f for f in _VALUE_FIELDS if f in value]
    if len(kinds) != 1:
        return f"attribute {key} has {kinds or 'no'} value fields; exactly one of {', '.join(_VALUE_FIELDS)}"
    kind = kinds[0]
    v = value[kind]
    ok = {
        "int": lambda x: isinstance(x, int) and not isinstance(x, bool),
        "bool": lambda x: isinstance(x, bool),
        "string": lambda x: isinstance(x, str) and len(x) <= 64,
        "version": lambda x: isinstance(x, str) and bool(_SEMVER.match(x)),
    }
    is_list = kind in ("ints", "bools", "strings", "versions")
    base, items = (kind[:-1], v) if is_list else (kind, [v])
    if not isinstance(items, list) or not all(ok[base](x) for x in items):
        return f"attribute {key}: {kind} value {v!r} is not a valid {kind}"
    return None


@sanity_check(
    "sanity.slices.attribute-types",
    rule="every device attribute has exactly one well-typed value and every capacity is a quantity",
    source=API,
)
def attribute_types(ctx: SanityContext) -> None:
    problems: list[str] = []
    for s in _slices(ctx):
        for d in s["spec"].get("devices") or []:
            for key, value in (d.get("attributes") or {}).items():
                p = _attribute_problem(key, value)
                if p:
                    problems.append(f"{d.get('name')}: {p}")
            for key, cap in (d.get("capacity") or {}).items():
                q = str((cap or {}).get("value", ""))
                if not _QUANTITY.match(q):
                    problems.append(f"{d.get('name')}: capacity {key} value {q!r} is not a quantity")
    expect(not problems, f"{len(problems)} ill-typed value(s): {problems[:5]}")


def _selector_matches(selector: Obj, node: Obj) -> bool:
    labels = node.get("metadata", {}).get("labels") or {}
    name = node.get("metadata", {}).get("name")
    for term in selector.get("nodeSelectorTerms") or []:
        ok = True
        for f in term.get("matchFields") or []:
            vals = f.get("values") or []
            hit = f.get("key") == "metadata.name" and name in vals
            ok &= hit if f.get("operator") == "In" else not hit
        for e in term.get("matchExpressions") or []:
            have, vals, op = labels.get(e.get("key")), e.get("values") or [], e.get("operator")
            ok &= {"In": have in vals, "NotIn": have not in vals, "Exists": have is not None,
                   "DoesNotExist": have is None}.get(op, False)
        if ok:
            return True
    return False


@sanity_check(
    "sanity.slices.node",
    rule="each of the node's slices names the node (nodeName) or selects it (nodeSelector, allNodes)",
    source=f"{API} (exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection)",
)
def node(ctx: SanityContext) -> None:
    slices = _slices(ctx)
    assert ctx.kube is not None and ctx.node is not None
    node_obj = ctx.kube.get("Node", ctx.node)
    expect(node_obj is not None, f"node {ctx.node} does not exist in the API server")
    assert node_obj is not None
    for s in slices:
        spec, name = s["spec"], s["metadata"]["name"]
        if spec.get("nodeName"):
            expect(spec["nodeName"] == ctx.node, f"slice {name} names node {spec['nodeName']}, not {ctx.node}", [name])
        elif spec.get("nodeSelector"):
            expect(_selector_matches(spec["nodeSelector"], node_obj),
                   f"slice {name}'s nodeSelector does not select node {ctx.node}", [name])
        elif spec.get("perDeviceNodeSelection"):
            for d in spec.get("devices") or []:
                expect(d.get("allNodes") or d.get("nodeName") == ctx.node
                       or (d.get("nodeSelector") and _selector_matches(d["nodeSelector"], node_obj)),
                       f"slice {name} device {d.get('name')} is not for node {ctx.node}", [name], [d.get("name", "")])
        else:
            expect(bool(spec.get("allNodes")), f"slice {name} names no node at all", [name])


@sanity_check(
    "sanity.slices.counters",
    rule="each device that consumes counters names a counter set its pool publishes, and consumes only counters "
         "of that set, none more than the set holds",
    source=f"KEP-4815 (partitionable devices: sharedCounters, consumesCounters); {API}",
    capability="partitionable-devices",
)
def counters(ctx: SanityContext) -> None:
    slices = _slices(ctx)
    sets: dict[tuple[str, str], dict[str, str]] = {}
    for s in slices:
        pool = s["spec"].get("pool", {}).get("name", "")
        for cs in s["spec"].get("sharedCounters") or []:
            sets[(pool, str(cs.get("name")))] = {k: str((v or {}).get("value", "")) for k, v in
                                                 (cs.get("counters") or {}).items()}
    problems: list[str] = []
    consumers = 0
    for s in slices:
        pool = s["spec"].get("pool", {}).get("name", "")
        for d in s["spec"].get("devices") or []:
            for use in d.get("consumesCounters") or []:
                consumers += 1
                name = str(use.get("counterSet"))
                have = sets.get((pool, name))
                if have is None:
                    problems.append(f"{d.get('name')}: counter set {name} is not published in pool {pool}")
                    continue
                for counter, v in (use.get("counters") or {}).items():
                    want = str((v or {}).get("value", ""))
                    if counter not in have:
                        problems.append(f"{d.get('name')}: counter {counter} is not in set {name}")
                    else:
                        try:
                            if parse_quantity(want) > parse_quantity(have[counter]):
                                problems.append(f"{d.get('name')}: consumes {want} of {name}/{counter}, "
                                                f"which holds {have[counter]}")
                        except ValueError as exc:
                            problems.append(f"{d.get('name')}: {name}/{counter}: {exc}")
    if not consumers:
        caps = ctx.config.capabilities
        expect(caps is None, f"the driver declares partitionable devices (--capabilities {caps.source if caps else ''}) "
               f"but none of its {len(ctx.node_devices())} devices on node {ctx.node} consumes counters")
        raise Skip("no device of the node consumes counters (the driver publishes no partitionable device)")
    expect(not problems, f"{len(problems)} counter problem(s): {problems[:5]}", devices=[p.split(":")[0] for p in problems[:5]])
