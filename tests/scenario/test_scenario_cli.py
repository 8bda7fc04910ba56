"""``draguard validate`` and ``draguard schema`` through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from draguard.cli.main import main

VALID = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {name: plain}
spec:
  nodes: [{name: node-a, topology: {gpus: 2}}]
  deviceClasses: [{name: gpu.draguard.dev}]
  workloads:
    - name: w
      replicas: 1
      claims: [{name: gpu, requests: [{name: gpu, deviceClassName: gpu.draguard.dev}]}]
"""


def test_validate_prints_ok_for_valid_files_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.yaml").write_text(VALID)
    assert main(["validate", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"ok {tmp_path / 'a.yaml'}\n"


def test_validate_prints_every_problem_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad, empty = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "c.yaml"
    good.write_text(VALID)
    bad.write_text(VALID.replace("replicas: 1", "replicas: -1\n      colour: red"))
    empty.write_text("")
    assert main(["validate", str(good), str(bad), str(empty)]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"ok {good}",
        f"{bad}:9:17: spec.workloads[0].replicas: expected a number ≥ 1, got int -1",
        f"{bad}:10:7: spec.workloads[0].colour: unknown key 'colour'; expected one of: name, replicas, gang, "
        "minCount, priority, priorityClassName, interleaveWith, image, runFor, extendedResources, claims",
        f"{empty}: the file is empty; expected a Scenario document (apiVersion: draguard.dev/v1alpha1, "
        "kind: Scenario, metadata, spec)",
    ]


def test_validate_of_a_missing_path_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"draguard: error: {tmp_path / 'nope'}: no such file or folder\n"


def test_schema_prints_json_and_writes_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["$id"].endswith("scenario-v1alpha1.json")
    assert main(["schema", "--output", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text()) == printed
