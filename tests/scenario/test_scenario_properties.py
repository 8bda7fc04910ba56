"""Property tests: whatever the input, the loader answers with ScenarioError or UsageError (or a
scenario), never another exception."""

from __future__ import annotations

import io
import tracemalloc
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from draguard.harness.core.errors import ScenarioError, UsageError
from draguard.harness.core.registry import Registry
from draguard.harness.scenario import format as model
from draguard.harness.scenario import parse_scenario
from draguard.harness.scenario.types import Scenario

from scenario_helpers import EXAMPLE, planned_faults

FAULTS: Registry[Any] = planned_faults()

EXAMPLE_DATA = YAML(typ="safe", pure=True).load(EXAMPLE.read_text())
VOCABULARY = [
    "apiVersion", "kind", "metadata", "spec", "name", "seed", "cluster", "driver", "nodes", "topology", "gpus",
    "preset", "devices", "deviceClasses", "workloads", "replicas", "claims", "requests", "deviceClassName", "count",
    "allocationMode", "constraints", "matchAttribute", "timeline", "at", "when", "fault", "target", "params",
    "settle", "timeout", "expect", "hold", "violate", "draguard.dev/v1alpha1", "Scenario", "evict", "5s",
]  # fmt: skip

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.text(max_size=12),
    st.sampled_from(VOCABULARY),
)  # fmt: skip
keys = st.one_of(st.sampled_from(VOCABULARY), st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=5)),
    max_leaves=25,
)


def dump(data: Any) -> str:
    stream = io.StringIO()
    YAML(typ="safe", pure=True).dump(data, stream)
    return stream.getvalue()


def outcome(text: str) -> Scenario | Exception:
    try:
        return parse_scenario(text, "p.yaml", faults=FAULTS)
    except (ScenarioError, UsageError) as exc:
        assert str(exc)
        if isinstance(exc, ScenarioError):
            assert exc.problems and all(p.line >= 1 and p.column >= 1 and p.message for p in exc.problems)
        return exc


@SETTINGS
@given(st.text(max_size=300))
def test_random_text_never_raises_another_exception(text: str) -> None:
    outcome(text)


@SETTINGS
@given(st.dictionaries(keys, values, max_size=6))
def test_random_mappings_never_raise_another_exception(data: dict[str, Any]) -> None:
    outcome(dump(data))


@SETTINGS
@given(st.dictionaries(keys, values, max_size=6), st.dictionaries(keys, values, max_size=8))
def test_random_bodies_under_a_scenario_header_never_raise_another_exception(
    metadata: dict[str, Any], spec: dict[str, Any]
) -> None:
    outcome(dump({"apiVersion": "draguard.dev/v1alpha1", "kind": "Scenario", "metadata": metadata, "spec": spec}))


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, path + (i,))
    return out


PATHS = _paths(EXAMPLE_DATA)[1:]


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(PATHS), st.one_of(st.just("<delete>"), values)), min_size=1, max_size=4))
def test_mutated_scenarios_load_or_fail_cleanly(mutations: list[tuple[tuple[Any, ...], Any]]) -> None:
    data = YAML(typ="safe", pure=True).load(EXAMPLE.read_text())
    for path, value in mutations:
        parent = data
        try:
            for part in path[:-1]:
                parent = parent[part]
            if value == "<delete>":
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed this path
    outcome(dump(data))


def test_the_unmutated_example_loads() -> None:
    assert isinstance(outcome(dump(EXAMPLE_DATA)), Scenario)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["&a [*a]", "a: &a {b: *a}", "!!binary x", "a: !tag 1", "? [a]\n: 1", "\x00", "a: 2020-01-01",
                        "- &a [*a, *a]\n", "a: *unknown", "%YAML 1.1\n---\na: 1", "--- a\n--- b\n", "{"]))
def test_odd_yaml_features_fail_cleanly(text: str) -> None:
    assert isinstance(outcome(text), Exception)


# Every count of the example, with the bound the schema states for it (draguard.harness.scenario.format).
COUNT_PATHS: dict[tuple[Any, ...], int] = {
    ("spec", "nodes", 0, "count"): model.MAX_NODES_PER_GROUP,
    ("spec", "nodes", 0, "topology", "gpus"): model.MAX_DEVICES_PER_NODE,
    ("spec", "nodes", 0, "topology", "nvlinkDomains"): model.MAX_DEVICES_PER_NODE,
    ("spec", "nodes", 0, "topology", "numaNodes"): model.MAX_DEVICES_PER_NODE,
    ("spec", "workloads", 0, "replicas"): model.MAX_REPLICAS,
    ("spec", "workloads", 1, "replicas"): model.MAX_REPLICAS,
    ("spec", "workloads", 0, "minCount"): model.MAX_REPLICAS,
    ("spec", "workloads", 0, "extendedResources", "nvidia.com/gpu"): model.MAX_EXTENDED_RESOURCE,
    ("spec", "workloads", 0, "claims", 0, "requests", 0, "count"): model.MAX_DEVICES_PER_REQUEST,
    ("spec", "timeline", 1, "when", "count"): model.MAX_REPLICAS,
    ("spec", "timeline", 0, "target", "member"): model.MAX_REPLICAS - 1,
    ("spec", "seed"): model.MAX_SEED,
}
"""Every bounded field of every library scenario is fuzzed in test_scenario_bounds.py."""


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data.setdefault(part, {}) if isinstance(data, dict) else data[part]
    data[path[-1]] = value


@SETTINGS
@given(st.sampled_from(sorted(COUNT_PATHS, key=str)), st.integers(1, 2**80))
def test_a_count_over_its_bound_is_reported_on_its_field_without_building_anything(
    path: tuple[Any, ...], extra: int
) -> None:
    data = YAML(typ="safe", pure=True).load(EXAMPLE.read_text())
    value = COUNT_PATHS[path] + extra
    _set(data, path, value)
    tracemalloc.start()
    try:
        result = outcome(dump(data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(result, ScenarioError), f"{value} at {path} was accepted"
    field = ".".join(str(p) for p in path).replace(".0", "[0]").replace(".1", "[1]")
    assert any(p.field.replace(".", "") == field.replace(".", "") and str(COUNT_PATHS[path]) in p.message
               for p in result.problems), [str(p) for p in result.problems]  # fmt: skip
    assert peak < 20 * 2**20, f"validating a count of {value} allocated {peak} bytes"


def test_the_fuzzed_node_count_from_the_issue_gives_file_line_col() -> None:
    text = EXAMPLE.read_text().replace("count: 2\n      topology", "count: 99999999999999999999\n      topology")
    result = outcome(text)
    assert isinstance(result, ScenarioError)
    nodes = [p for p in result.problems if p.field == "spec.nodes[0].count"]
    assert nodes and nodes[0].line == 18 and nodes[0].column == 14, [str(p) for p in result.problems]


@SETTINGS
@given(st.integers(2, 20), st.integers(model.MAX_NODES_PER_GROUP // 2, model.MAX_NODES_PER_GROUP))
def test_node_groups_together_are_bounded(groups: int, count: int) -> None:
    data = YAML(typ="safe", pure=True).load(EXAMPLE.read_text())
    first = data["spec"]["nodes"][0]
    data["spec"]["nodes"] = [{**first, "namePrefix": f"g{i}", "count": count} for i in range(groups)]
    result = outcome(dump(data))
    if groups * count > model.MAX_NODES:
        assert isinstance(result, ScenarioError)
        assert any(p.field == "spec.nodes" and str(model.MAX_NODES) in p.message for p in result.problems)
    else:
        assert not isinstance(result, ScenarioError) or all(p.field != "spec.nodes" for p in result.problems)


@SETTINGS
@given(st.integers(3, 12))
def test_pods_together_are_bounded(workloads: int) -> None:
    data = YAML(typ="safe", pure=True).load(EXAMPLE.read_text())
    second = data["spec"]["workloads"][1]
    data["spec"]["workloads"] = [{**second, "name": f"w{i}", "replicas": model.MAX_REPLICAS} for i in range(workloads)]
    for w in data["spec"]["workloads"]:
        w.pop("interleaveWith", None)
    data["spec"]["timeline"] = []
    result = outcome(dump(data))
    assert isinstance(result, ScenarioError)
    assert any(p.field == "spec.workloads" and str(model.MAX_PODS) in p.message for p in result.problems)


@SETTINGS
@given(st.integers(model.MAX_SECONDS + 1, 10**30), st.sampled_from(["h", "m", "s"]))
def test_huge_durations_are_bad_input(n: int, unit: str) -> None:
    data = YAML(typ="safe", pure=True).load(EXAMPLE.read_text())
    data["spec"]["settle"]["timeout"] = f"{n}{unit}"
    result = outcome(dump(data))
    assert isinstance(result, ScenarioError)
    assert any(p.field == "spec.settle.timeout" for p in result.problems)
