"""Property tests: whatever the input, the loader answers with ScenarioError or UsageError (or a
scenario), never another exception."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from draguard.harness.errors import ScenarioError, UsageError
from draguard.harness.registry import Registry
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
