"""Every count and size a scenario can set has a bound that validation states and enforces: a value
past it (99999999999999999999, 2**63, -1, ...) in any bounded field of a library scenario is a
ScenarioError on that field, at its file:line:col, naming the bound, found without building anything
in proportion to the value. The published JSON Schema states the same bounds."""

from __future__ import annotations

import copy
import functools
import io
import time
import tracemalloc
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from ruamel.yaml import YAML

import draguard.chaos  # noqa: F401  (registers the fault kinds the library uses)
from draguard.harness.core.errors import ScenarioError
from draguard.harness.scenario import format as model
from draguard.harness.scenario import json_schema, parse_scenario
from draguard.harness.scenario.issues import render_path

LIBRARY = Path(__file__).parents[2] / "scenarios"
FILES = sorted(LIBRARY.glob("*.yaml"))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX_PEAK = 20 * 2**20
"""Validating one scenario stays under this, whatever number it holds."""
MAX_SECONDS = 10.0
"""...and this long, on a loaded 2-core machine (a typical file takes well under a second)."""

Pattern = tuple[Any, ...]
_safe = YAML(typ="safe", pure=True)


def _load(path: Path) -> Any:
    return copy.deepcopy(_parsed(path))


@functools.cache
def _parsed(path: Path) -> Any:
    return _safe.load(path.read_text())


def _matches(node: Any, pattern: Pattern, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Concrete paths in ``node`` that match ``pattern`` (``"*"``: any list index or mapping key)."""
    if not pattern:
        yield path
        return
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        items: Any = enumerate(node) if isinstance(node, list) else node.items() if isinstance(node, dict) else ()
        for key, value in items:
            yield from _matches(value, rest, path + (key,))
    elif isinstance(node, dict) and head in node:
        yield from _matches(node[head], rest, path + (head,))


def _find(parent: Pattern, leaf: tuple[Any, ...]) -> tuple[Path, tuple[Any, ...]]:
    """The first library scenario, and path in it, where ``parent + leaf`` exists; else where ``parent`` does
    (``leaf`` is then grafted on)."""
    for whole in (True, False):
        for file in FILES:
            data = _load(file)
            for path in _matches(data, parent + (leaf if whole else ())):
                if whole:
                    return file, path
                if isinstance(_get(data, path), dict):
                    return file, path + leaf
    raise AssertionError(f"no library scenario has {render_path(tuple(p for p in parent if p != '*'))}")


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    """Set ``path`` to ``value``, creating missing mappings and list items on the way."""
    for part, following in zip(path, path[1:]):
        empty: Any = [] if isinstance(following, int) else {}
        if isinstance(data, list) and part == len(data):
            data.append(empty)
        elif isinstance(data, dict) and not isinstance(data.get(part), (dict, list)):
            data[part] = empty
        data = data[part]
    if isinstance(data, list) and path[-1] == len(data):
        data.append(value)
    else:
        data[path[-1]] = value


def _dump(data: Any) -> str:
    out = YAML(typ="safe", pure=True)
    out.default_flow_style = False
    stream = io.StringIO()
    out.dump(data, stream)
    return stream.getvalue()


def _position(text: str, path: tuple[Any, ...]) -> tuple[int, int]:
    """Where an editor shows the value at ``path`` of ``text`` (1-based line and column)."""
    node = YAML(typ="rt", pure=True).load(text)
    for part in path[:-1]:
        node = node[part]
    line, column = node.lc.item(path[-1]) if isinstance(path[-1], int) else node.lc.value(path[-1])
    return line + 1, column + 1


def _validate(text: str) -> tuple[ScenarioError, int, float]:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        try:
            parse_scenario(text, "bounds.yaml")
        except ScenarioError as exc:
            error = exc
        else:
            raise AssertionError("the scenario was accepted")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return error, peak, time.perf_counter() - started


def _assert_reported(error: ScenarioError, text: str, path: tuple[Any, ...], bound: int, *words: str) -> None:
    """A problem on ``path``'s field, at its value's place, names ``bound`` (or one of ``words`` for it)."""
    field = render_path(path)
    line, column = _position(text, path)
    here = [p for p in error.problems if p.field == field]
    assert here, f"nothing reported on {field}: {[str(p) for p in error.problems]}"
    names = (str(bound), *words)
    assert any((p.line, p.column) == (line, column) and any(n in p.message for n in names) for p in here), (
        f"expected {field} at {line}:{column} naming {bound}: {[str(p) for p in here]}"
    )


# ---------------------------------------------------------------------------------------------
# Numbers: (where the field's parent sits, the field below it, lowest, highest, whether the schema states it)

W = ("spec", "workloads", "*")
REQUEST = W + ("claims", "*", "requests", "*")
TOPOLOGY = ("spec", "nodes", "*", "topology")
NUMBERS: list[tuple[Pattern, tuple[Any, ...], int, int, bool]] = [
    (("spec",), ("seed",), 0, model.MAX_SEED, True),
    (("spec", "cluster"), ("clientQps",), 1, model.MAX_CLIENT_QPS, True),
    (("spec", "cluster"), ("clientBurst",), 1, model.MAX_CLIENT_QPS, True),
    (("spec", "cluster"), ("maxRequestsInflight",), 2, model.MAX_CLIENT_QPS, True),
    (("spec", "nodes", "*"), ("count",), 1, model.MAX_NODES_PER_GROUP, True),
    (TOPOLOGY, ("gpus",), 1, model.MAX_DEVICES_PER_NODE, True),
    (TOPOLOGY, ("nvlinkDomains",), 1, model.MAX_DEVICES_PER_NODE, True),
    (TOPOLOGY, ("numaNodes",), 1, model.MAX_DEVICES_PER_NODE, True),
    (TOPOLOGY, ("devices", 0, "attributes", "index"), 0, model.MAX_DEVICE_INDEX, False),
    (TOPOLOGY, ("devices", 0, "attributes", "numaNode"), 0, model.MAX_NUMA_NODE, False),
    (TOPOLOGY, ("devices", 0, "attributes", "cores"), -model.MAX_ATTRIBUTE_INT - 1, model.MAX_ATTRIBUTE_INT, True),
    (W, ("replicas",), 1, model.MAX_REPLICAS, True),
    (W, ("minCount",), 1, model.MAX_REPLICAS, True),
    (W, ("priority",), -(2**31), 10**9, True),
    (W + ("extendedResources",), ("*",), 0, model.MAX_EXTENDED_RESOURCE, True),
    (REQUEST, ("count",), 1, model.MAX_DEVICES_PER_REQUEST, True),
    (REQUEST, ("firstAvailable", 0, "count"), 1, model.MAX_DEVICES_PER_REQUEST, True),
    (REQUEST, ("tolerations", 0, "tolerationSeconds"), 0, model.MAX_SECONDS, True),
    (("spec", "timeline", "*", "when"), ("count",), 1, model.MAX_REPLICAS, True),
    (("spec", "timeline", "*", "target"), ("member",), 0, model.MAX_REPLICAS - 1, True),
    (("spec", "expect", "evidence", "*"), ("member",), 0, model.MAX_REPLICAS - 1, True),
    (("spec", "expect", "progress", "*"), ("count",), 1, model.MAX_REPLICAS, True),
]


def _number_field(i: int) -> tuple[Path, tuple[Any, ...]]:
    parent, leaf, *_ = NUMBERS[i]
    if leaf == ("*",):  # an existing key of a mapping, e.g. extendedResources' nvidia.com/gpu
        return _find(parent + leaf, ())
    return _find(parent, leaf)


FOUND = {i: _number_field(i) for i in range(len(NUMBERS))}
SCHEMA = json_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _out_of_bounds(low: int, high: int) -> st.SearchStrategy[int]:
    fixed = [99999999999999999999, 2**63, 2**64, -1, -(2**63) - 1, 0, high + 1, low - 1]
    return st.one_of(
        st.sampled_from(fixed), st.integers(high + 1, high + 2**80), st.integers(low - 2**80, low - 1)
    ).filter(lambda n: not low <= n <= high)


@st.composite
def _number_case(draw: st.DrawFn) -> tuple[int, int]:
    i = draw(st.integers(0, len(NUMBERS) - 1))
    _, _, low, high, _ = NUMBERS[i]
    return i, draw(_out_of_bounds(low, high))


@pytest.mark.parametrize("value", [99999999999999999999, 2**63, -1])
@pytest.mark.parametrize("i", range(len(NUMBERS)), ids=[render_path(FOUND[i][1]) for i in range(len(NUMBERS))])
def test_the_numbers_from_the_issue_are_reported_in_every_bounded_field(i: int, value: int) -> None:
    _, _, low, high, _ = NUMBERS[i]
    if not low <= value <= high:
        _check_number(i, value)


@settings(SETTINGS, max_examples=80)
@given(_number_case())
def test_a_number_out_of_its_bounds_is_reported_on_its_field_without_building_anything(case: tuple[int, int]) -> None:
    _check_number(*case)


def _check_number(i: int, value: int) -> None:
    _, _, low, high, in_schema = NUMBERS[i]
    file, path = FOUND[i]
    data = _load(file)
    _set(data, path, value)
    text = _dump(data)
    error, peak, seconds = _validate(text)
    if value > high:
        _assert_reported(error, text, path, high)
    else:
        _assert_reported(error, text, path, low, *(["non-negative"] if low == 0 else []))
    assert peak < MAX_PEAK, f"validating {value} at {render_path(path)} allocated {peak} bytes"
    assert seconds < MAX_SECONDS, f"validating {value} at {render_path(path)} took {seconds:.1f}s"
    if in_schema:  # editors see the same bound
        assert not VALIDATOR.is_valid(_safe.load(text)), f"the schema accepts {value} at {render_path(path)}"


def _int_fields(cls: type[BaseModel], seen: set[type[BaseModel]]) -> Iterator[str]:
    """The keys of every integer field of ``cls`` and the models below it (a mapping of integers: its key)."""
    if cls in seen:
        return
    seen.add(cls)
    for name, info in cls.model_fields.items():
        pending, types = [info.annotation], []
        while pending:
            typ = pending.pop()
            types.append(typ)
            pending += typing.get_args(typ)
        if int in types:
            yield info.alias or name
        for typ in types:
            if isinstance(typ, type) and issubclass(typ, BaseModel):
                yield from _int_fields(typ, seen)


def test_every_integer_field_of_the_format_is_fuzzed_here() -> None:
    fuzzed = {part for parent, leaf, *_ in NUMBERS for part in (parent[-1:] if leaf == ("*",) else leaf)}
    assert set(_int_fields(model.ScenarioDocument, set())) - fuzzed == set()


def test_the_numbers_the_issue_names_are_all_covered() -> None:
    fields = {NUMBERS[i][1][-1] if NUMBERS[i][1] != ("*",) else NUMBERS[i][0][-1] for i in FOUND}
    assert {"count", "gpus", "numaNodes", "replicas", "minCount", "extendedResources", "member"} <= fields
    assert any(path[-2:] == ("when", "count") for _, path in FOUND.values())


# ---------------------------------------------------------------------------------------------
# Quantities: sizes (memory, capacities) are bounded in their base unit, however many digits they have

QUANTITIES = [_find(TOPOLOGY, leaf) for leaf in [("memory",), ("devices", 0, "capacity", "memory"),
                                                  ("devices", 0, "capacity", "cores")]]  # fmt: skip


@settings(SETTINGS, max_examples=30)
@given(
    st.sampled_from(QUANTITIES),
    st.one_of(st.integers(model.MAX_QUANTITY + 1, 10**40).map(str), st.integers(8, 10**30).map(lambda n: f"{n}Ei"),
              st.integers(1, 5000).map(lambda n: "9" * n + "Pi").filter(lambda q: len(q) > 20)),
)  # fmt: skip
def test_a_quantity_past_its_bound_is_reported_on_its_field(where: tuple[Path, tuple[Any, ...]], value: str) -> None:
    file, path = where
    data = _load(file)
    _set(data, path, value)
    text = _dump(data)
    error, peak, _ = _validate(text)
    _assert_reported(error, text, path, model.MAX_QUANTITY)
    assert peak < MAX_PEAK


def test_the_largest_quantity_is_accepted_and_one_more_is_not() -> None:
    assert model.quantity_amount(str(model.MAX_QUANTITY)) == model.MAX_QUANTITY
    assert model.quantity_amount("8Ei") == model.MAX_QUANTITY + 1
    assert model.quantity_amount("500m") * 2 == 1


# ---------------------------------------------------------------------------------------------
# Lengths: lists and mappings whose size drives what a run builds (pods, claims, threads, flags)


def _named(prefix: str, extra: dict[str, Any] | None = None) -> Callable[[int], Any]:
    return lambda i: {"name": f"{prefix}{i}", **(extra or {})}


LENGTHS: list[tuple[Pattern, tuple[Any, ...], int, Callable[[int], Any]]] = [
    (("spec",), ("workloads",), model.MAX_WORKLOADS, _named("w", {"replicas": 1})),
    (W, ("claims",), model.MAX_CLAIMS_PER_POD, _named("c", {"requests": [{"name": "r", "deviceClassName": "x"}]})),
    (W + ("claims", "*"), ("requests",), model.MAX_REQUESTS_PER_CLAIM, _named("r", {"deviceClassName": "x"})),
    (W + ("claims", "*"), ("constraints",), model.MAX_REQUESTS_PER_CLAIM, lambda i: {"matchAttribute": "a.b/c"}),
    (("spec",), ("timeline",), model.MAX_STEPS, lambda i: {"name": f"s{i}", "at": "1s", "fault": "scheduler-restart"}),
    (("spec",), ("deviceClasses",), model.MAX_DEVICE_CLASSES, _named("class")),
    (("spec", "expect", "progress", "*"), ("workloads",), model.MAX_WORKLOADS, lambda i: f"w{i}"),
]
MAPPINGS: list[tuple[Pattern, tuple[Any, ...], int]] = [
    (("metadata",), ("labels",), model.MAX_LABELS),
    (("spec", "nodes", "*"), ("labels",), model.MAX_LABELS),
    (W, ("extendedResources",), model.MAX_EXTENDED_RESOURCES),
    (("spec", "cluster"), ("featureGates",), model.MAX_FLAGS),
    (TOPOLOGY, ("devices", 0, "attributes"), model.MAX_ATTRIBUTES_PER_DEVICE),
    (TOPOLOGY, ("devices", 0, "capacity"), model.MAX_ATTRIBUTES_PER_DEVICE),
]


@pytest.mark.parametrize(("parent", "leaf", "bound", "item"), LENGTHS, ids=[render_path(x[1]) for x in LENGTHS])
def test_a_list_longer_than_its_bound_is_reported_on_the_list(
    parent: Pattern, leaf: tuple[Any, ...], bound: int, item: Callable[[int], Any]
) -> None:
    file, path = _find(parent, leaf)
    data = _load(file)
    _set(data, path, [item(i) for i in range(bound + 1)])
    text = _dump(data)
    error, _, _ = _validate(text)
    _assert_reported(error, text, path, bound)
    assert _schema_at(path, "array")["maxItems"] == bound


@pytest.mark.parametrize(("parent", "leaf", "bound"), MAPPINGS, ids=[render_path(x[1]) for x in MAPPINGS])
def test_a_mapping_larger_than_its_bound_is_reported_on_the_mapping(
    parent: Pattern, leaf: tuple[Any, ...], bound: int
) -> None:
    file, path = _find(parent, leaf)
    data = _load(file)
    value = {"featureGates": True, "capacity": "1", "extendedResources": 1}.get(leaf[-1], "v")
    _set(data, path, {f"key{i}": value for i in range(bound + 1)})
    text = _dump(data)
    error, _, _ = _validate(text)
    _assert_reported(error, text, path, bound)
    assert _schema_at(path, "object")["maxProperties"] == bound


def _schema_at(path: tuple[Any, ...], kind: str) -> dict[str, Any]:
    """The published schema of the ``kind`` ("array", "object") value at ``path``."""
    node: dict[str, Any] = SCHEMA
    for part in path:
        if isinstance(part, int):
            node = _container(node, "array")["items"]
        else:
            container = _container(node, "object")
            node = container.get("properties", {}).get(part) or container["additionalProperties"]
    return _container(node, kind)


def _container(node: dict[str, Any], kind: str) -> dict[str, Any]:
    """``node`` ($refs followed), or the ``kind`` branch of its union."""
    while "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].split("/")[-1]]
    for option in node.get("anyOf", [node]):
        while "$ref" in option:
            option = SCHEMA["$defs"][option["$ref"].split("/")[-1]]
        if option.get("type") == kind:
            return option
    raise AssertionError(f"no {kind} in {node}")


# ---------------------------------------------------------------------------------------------
# Totals across fields


def test_resource_claims_of_all_workloads_together_are_bounded() -> None:
    file, path = _find(W, ("claims",))
    data = _load(file)
    workload = _get(data, path[:-1])
    claims = [{"name": f"c{i}", "requests": [{"name": "r", "deviceClassName": "x"}]} for i in range(5)]
    data["spec"]["workloads"] = [{**workload, "name": f"w{i}", "replicas": model.MAX_REPLICAS, "claims": claims}
                                 for i in range(2)]  # fmt: skip
    for key in ("minCount", "interleaveWith"):
        for w in data["spec"]["workloads"]:
            w.pop(key, None)
    text = _dump(data)
    error, peak, _ = _validate(text)
    total = 2 * model.MAX_REPLICAS * 5
    assert any(p.field == "spec.workloads" and str(model.MAX_CLAIMS) in p.message and str(total) in p.message
               for p in error.problems), [str(p) for p in error.problems]  # fmt: skip
    assert peak < MAX_PEAK



# ---------------------------------------------------------------------------------------------
# Through the CLI: one line per problem, exit 2, no traceback


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("99999999999999999999", f"expected a number ≤ {model.MAX_DEVICES_PER_REQUEST}, got int 99999999999999999999"),
        ("9" * 5000, "a number of 5000 digits: every count and size of a scenario is far smaller"),
    ],
)
def test_validate_reports_a_huge_count_at_its_place_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, message: str
) -> None:
    from draguard.cli.main import main

    lines = (LIBRARY / "gang-deadlock-per-pod.yaml").read_text().splitlines()
    line = next(i for i, x in enumerate(lines, 1) if "deviceClassName: gpu.draguard.dev, count: 2}" in x)
    lines[line - 1] = lines[line - 1].replace("count: 2}", f"count: {value}}}")
    column = lines[line - 1].index(value) + 1
    file = tmp_path / "huge.yaml"
    file.write_text("\n".join(lines) + "\n")
    assert main(["validate", str(file)]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert any(out.startswith(f"{file}:{line}:{column}: ") and out.endswith(message)
               for out in captured.out.splitlines()), captured.out  # fmt: skip


def test_every_integer_parameter_of_every_fault_has_an_upper_bound() -> None:
    """A fault's ``params`` are scenario input too: an integer without a bound (``driver-crash``'s
    ``after`` had none) is a number validation has not checked."""
    import annotated_types

    import draguard.chaos  # noqa: F401  (registers the faults)
    from draguard.harness.core.registry import FAULTS

    unbounded = []
    for entry in FAULTS:
        if entry.params is None:
            continue
        for field_name, info in entry.params.model_fields.items():
            if info.annotation is not int and info.annotation != (int | None):
                continue
            if not any(isinstance(m, (annotated_types.Le, annotated_types.Lt)) for m in info.metadata):
                unbounded.append(f"{entry.name}.{field_name}")
    assert unbounded == []
