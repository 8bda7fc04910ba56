"""The loader reports every problem of a scenario file with its exact position, field path and
what was expected; a valid file becomes frozen runner values."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from draguard.harness.core.errors import ScenarioError, UsageError
from draguard.harness.core.registry import Registry
from draguard.harness.scenario import load_scenario, load_scenarios, parse_scenario
from draguard.harness.scenario.format import format_duration, parse_duration

BASE = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata:
  name: demo
spec:
  nodes:
    - name: node-a
      topology: {gpus: 4}
  deviceClasses:
    - name: gpu.draguard.dev
  workloads:
    - name: gang-a
      replicas: 2
      claims:
        - name: gpus
          requests:
            - name: gpu
              deviceClassName: gpu.draguard.dev
              count: 2
  timeline:
    - at: 5s
      fault: evict
      target: {workload: gang-a}
  expect:
    hold: [claim-atomic]
"""


def problems(text: str, faults: Registry[Any]) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml", faults=faults)
    return [str(p) for p in info.value.problems]


def edit(old: str, new: str, text: str = BASE) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def test_the_base_scenario_is_valid(faults: Registry[Any]) -> None:
    scenario = parse_scenario(BASE, "s.yaml", faults=faults)
    assert scenario.name == "demo"
    assert scenario.workloads[0].claims[0].requests[0].count == 2


def test_unknown_key_is_reported_on_the_key_with_a_suggestion(faults: Registry[Any]) -> None:
    text = edit("      replicas: 2\n", "      replicas: 2\n      replica: 3\n")
    [problem] = problems(text, faults)
    assert problem.startswith("s.yaml:14:7: spec.workloads[0].replica: unknown key 'replica'; did you mean 'replicas'?")
    assert "expected one of: name, replicas, gang" in problem


def test_wrong_type_is_reported_on_the_value_with_what_was_expected(faults: Registry[Any]) -> None:
    text = edit("replicas: 2", 'replicas: "2"')
    assert problems(text, faults) == [
        "s.yaml:13:17: spec.workloads[0].replicas: expected a valid integer, got string '2'"
    ]


def test_missing_required_field_is_reported_on_its_mapping(faults: Registry[Any]) -> None:
    text = edit("      replicas: 2\n", "")
    assert problems(text, faults) == [
        "s.yaml:12:7: spec.workloads[0].replicas: missing required key 'replicas' (number of pods in the gang)"
    ]


def test_bad_duration_names_the_expected_spelling(faults: Registry[Any]) -> None:
    text = edit("at: 5s", "at: 5 seconds")
    assert problems(text, faults) == [
        "s.yaml:21:11: spec.timeline[0].at: expected a duration like '500ms', '30s', '2m' or '1h30m', "
        "got '5 seconds'"
    ]


def test_zero_settle_timeout_is_rejected(faults: Registry[Any]) -> None:
    text = BASE + "  settle: {timeout: 0s}\n"
    assert problems(text, faults) == ["s.yaml:26:21: spec.settle.timeout: expected a positive duration, got '0s'"]


def test_unknown_fault_kind_lists_the_known_ones(faults: Registry[Any]) -> None:
    text = edit("fault: evict", "fault: evicted")
    [problem] = problems(text, faults)
    assert problem.startswith("s.yaml:22:14: spec.timeline[0].fault: unknown fault kind 'evicted'; did you mean 'evict'?")
    assert "known: apiserver-restart, controller-manager-restart, device-taint, drain-node" in problem


def test_fault_params_are_validated_against_the_registered_model(faults: Registry[Any]) -> None:
    text = edit("      fault: evict\n", "      fault: evict\n      params: {gracePeriod: 5, grace: 1s}\n")
    assert problems(text, faults) == [
        "s.yaml:23:29: spec.timeline[0].params.gracePeriod: expected a duration like '500ms', '30s', '2m' or "
        "'1h30m', got 5",
        "s.yaml:23:32: spec.timeline[0].params.grace: unknown key 'grace'; did you mean 'gracePeriod'? "
        "expected one of: gracePeriod",
    ]


def test_a_fault_without_params_model_rejects_params(faults: Registry[Any]) -> None:
    text = edit("      fault: evict\n", "      fault: driver-restart\n      params: {x: 1}\n")
    assert problems(text, faults) == ["s.yaml:23:15: spec.timeline[0].params: fault 'driver-restart' takes no params"]


def test_unknown_invariant_is_rejected(faults: Registry[Any]) -> None:
    text = edit("hold: [claim-atomic]", "hold: [claim-atomic, gang-atomix]")
    [problem] = problems(text, faults)
    assert problem.startswith(
        "s.yaml:25:26: spec.expect.hold[1]: unknown invariant 'gang-atomix'; did you mean 'gang-atomic'? "
        "expected one of: cdi-specs-resolve, claim-atomic, container-devices, gang-atomic,"
    )


def test_duplicated_workload_name_points_at_the_second_one(faults: Registry[Any]) -> None:
    text = edit("  timeline:\n", "    - name: gang-a\n      replicas: 1\n  timeline:\n")
    assert problems(text, faults) == [
        "s.yaml:20:13: spec.workloads[1].name: duplicate workload name 'gang-a'; already used by "
        "spec.workloads[0].name"
    ]


def test_yaml_syntax_error_carries_the_parser_position(faults: Registry[Any]) -> None:
    text = edit("hold: [claim-atomic]", "hold: [claim-atomic")
    [problem] = problems(text, faults)
    assert problem.startswith("s.yaml:26:1: invalid YAML:")


def test_duplicate_yaml_key_is_a_problem_with_position(faults: Registry[Any]) -> None:
    text = edit("      replicas: 2\n", "      replicas: 2\n      replicas: 3\n")
    [problem] = problems(text, faults)
    assert problem.startswith("s.yaml:14:7: invalid YAML:") and "duplicate key" in problem


def test_all_problems_of_a_file_come_in_one_pass_in_file_order(faults: Registry[Any]) -> None:
    text = BASE
    text = edit("  name: demo", "  name: Demo_1", text)
    text = edit("topology: {gpus: 4}", "topology: {gpus: four}", text)
    text = edit("count: 2", "count: 2\n              allocationMode: All", text)
    text = edit("at: 5s", "at: soon", text)
    text = edit("target: {workload: gang-a}", "target: {workload: gang-b, member: 7}", text)
    text = edit("hold: [claim-atomic]", "hold: [nope]\n    violate: [claim-atomic]\n    extra: 1", text)
    found = problems(text, faults)
    assert [p.split(": ")[1] for p in found] == [
        "metadata.name",
        "spec.nodes[0].topology.gpus",
        "spec.workloads[0].claims[0].requests[0].count",
        "spec.timeline[0].at",
        "spec.timeline[0].target.workload",
        "spec.expect.hold[0]",
        "spec.expect.extra",
    ]
    assert found[0].startswith("s.yaml:4:9: metadata.name: expected a DNS label")
    assert found[2].startswith("s.yaml:19:15: spec.workloads[0].claims[0].requests[0].count: 'count' needs")


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("deviceClassName: gpu.draguard.dev", "deviceClassName: tpu.example.com",
         "spec.workloads[0].claims[0].requests[0].deviceClassName", "unknown device class 'tpu.example.com'"),
        ("              count: 2\n", "              count: 2\n          constraints:\n            - requests: [cpu]\n"
         "              matchAttribute: gpu.draguard.dev/numa\n",
         "spec.workloads[0].claims[0].constraints[0].requests[0]", "unknown request 'cpu'"),
        ("      replicas: 2\n", "      replicas: 2\n      interleaveWith: gang-z\n",
         "spec.workloads[0].interleaveWith", "unknown workload 'gang-z'"),
        ("target: {workload: gang-a}", "target: {node: node-b}", "spec.timeline[0].target.node", "unknown node 'node-b'"),
        ("      replicas: 2\n", "      replicas: 2\n      gang: podgroup\n", "spec.workloads[0].gang",
         "gang: podgroup needs the Workload/PodGroup API"),
        ("topology: {gpus: 4}", "topology: {gpus: 4, preset: h100}", "spec.nodes[0].topology.preset",
         "set only one of 'gpus', 'preset'"),
        ("    - at: 5s\n", "    - at: 5s\n      when: {workload: gang-a, phase: Running}\n", "spec.timeline[0].when",
         "set only one of 'at', 'when'"),
        ("spec:\n", "spec:\n  cluster: {backend: kubeconfig, clientQps: 100}\n", "spec.cluster.clientQps",
         "'clientQps' configures the local control plane"),
    ],
)  # fmt: skip
def test_cross_field_rules_name_the_offending_field(
    faults: Registry[Any], old: str, new: str, field: str, message: str
) -> None:
    [problem] = problems(edit(old, new), faults)
    assert f": {field}: {message}" in problem


def test_an_empty_file_is_a_usage_error_naming_it(tmp_path: Path, faults: Registry[Any]) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing\n")
    with pytest.raises(UsageError, match=r"empty\.yaml: the file is empty; expected a Scenario document"):
        load_scenario(path, faults=faults)


def test_a_list_document_is_a_usage_error(faults: Registry[Any]) -> None:
    with pytest.raises(UsageError, match=r"s\.yaml: the document is a seq, not a mapping"):
        parse_scenario("- a\n- b\n", "s.yaml", faults=faults)


def test_a_missing_file_and_an_empty_folder_are_usage_errors(tmp_path: Path, faults: Registry[Any]) -> None:
    with pytest.raises(UsageError, match="nope.yaml: no such file or folder"):
        load_scenarios([tmp_path / "nope.yaml"], faults=faults)
    with pytest.raises(UsageError, match="no scenario files"):
        load_scenarios([tmp_path], faults=faults)


def test_folders_are_walked_and_problems_of_all_files_are_collected(tmp_path: Path, faults: Registry[Any]) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").write_text(BASE)
    (tmp_path / "sub" / "b.yml").write_text(edit("replicas: 2", "replicas: 0"))
    (tmp_path / "c.yaml").write_text(edit("at: 5s", "at: x"))
    (tmp_path / "notes.txt").write_text("not a scenario")
    with pytest.raises(ScenarioError) as info:
        load_scenarios([tmp_path], faults=faults)
    assert [(Path(p.file).name, p.field) for p in info.value.problems] == [
        ("c.yaml", "spec.timeline[0].at"),
        ("b.yml", "spec.workloads[0].replicas"),
    ]
    (tmp_path / "sub" / "b.yml").write_text(BASE.replace("name: demo", "name: demo-b"))
    (tmp_path / "c.yaml").unlink()
    assert [s.name for s in load_scenarios([tmp_path], faults=faults)] == ["demo", "demo-b"]


def test_the_example_becomes_frozen_runner_values(faults: Registry[Any], example_text: str) -> None:
    scenario = parse_scenario(example_text, "example.yaml", faults=faults)
    assert [n.name for n in scenario.nodes] == ["gpu-node-0", "gpu-node-1"]
    assert scenario.nodes[0].topology is not None and scenario.nodes[0].topology.gpus == 4
    assert scenario.workload("gang-b").interleave_with == "gang-a"
    assert scenario.workload("gang-a").pod_names() == ("gang-a-0", "gang-a-1", "gang-a-2")
    assert scenario.workload("gang-a").min_count == 3
    claim = scenario.workload("gang-a").claims[0]
    assert claim.constraints[0].match_attribute == "gpu.draguard.dev/nvlinkDomain"
    evict, restart = scenario.timeline
    assert evict.at == timedelta(seconds=5) and evict.name == "0-evict"
    assert evict.target is not None and evict.target.member == "random"
    assert evict.params is not None and evict.params.grace_period == timedelta(seconds=10)  # type: ignore[attr-defined]
    assert restart.when is not None and restart.when.count == 3 and restart.params is None
    assert scenario.settle.timeout == timedelta(minutes=1) and scenario.settle.cleanup == timedelta(seconds=60)
    assert scenario.expect.violate == ("gang-atomic",)
    with pytest.raises(AttributeError):
        scenario.seed = 1  # type: ignore[misc]


def test_omitted_expectations_hold_every_invariant(faults: Registry[Any]) -> None:
    scenario = parse_scenario(edit("  expect:\n    hold: [claim-atomic]\n", "  expect: {violate: [gang-atomic]}\n"),
                              faults=faults)  # fmt: skip
    assert "gang-atomic" not in scenario.expect.hold
    assert {"claim-atomic", "no-leak", "topology", "sharing-explicit"} <= set(scenario.expect.hold)


@pytest.mark.parametrize(
    ("text", "seconds"), [("500ms", 0.5), ("30s", 30), ("2m", 120), ("1h30m", 5400), ("1.5s", 1.5), ("0s", 0)]
)
def test_durations_parse_and_format_back(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)
    assert parse_duration(format_duration(parse_duration(text))) == timedelta(seconds=seconds)


def test_a_scenario_loads_in_milliseconds(faults: Registry[Any], example_text: str) -> None:
    import time

    parse_scenario(example_text, faults=faults)
    start = time.perf_counter()
    for _ in range(10):
        parse_scenario(example_text, faults=faults)
    assert (time.perf_counter() - start) / 10 < 0.1
