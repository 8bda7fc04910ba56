"""``draguard lint`` end to end: formats, exit codes, bad input, Helm charts, the project's own files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.conformance.lint import RULES, Severity, lint, rule
from draguard.harness.core.errors import DefinitionError

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = Path(__file__).with_name("examples")
BAD = EXAMPLES / "multi-device-topology" / "bad.yaml"
GOOD = EXAMPLES / "multi-device-topology" / "good.yaml"
WARNING_ONLY = EXAMPLES / "unknown-device-class" / "bad.yaml"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["lint", *args])
    out, err = capsys.readouterr()
    return code, out, err


# --- exit codes and text ---------------------------------------------------------------------


def test_an_error_finding_exits_1_and_prints_file_line_col_rule_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(BAD))
    assert code == 1
    first = out.splitlines()[0]
    assert first.startswith(f"{BAD}:21:13 multi-device-topology error: ")


def test_warnings_alone_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(WARNING_ONLY))
    assert code == 0
    assert " unknown-device-class warning: " in out


def test_a_clean_folder_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(EXAMPLES / "gang-policy" / "good.yaml"), str(GOOD))
    assert code == 0
    assert out.splitlines()[-1].startswith("draguard lint: 0 error(s), 0 warning(s) in 2 file(s)")


def test_a_missing_path_exits_2_with_one_line_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    code, out, err = run(capsys, str(missing))
    assert code == 2
    assert out == ""
    assert err.strip().splitlines() == [f"draguard: error: {missing}: cannot read: no such file or folder"]


def test_malformed_yaml_exits_2_with_its_location(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x\nspec: []\n")
    code, _, err = run(capsys, str(bad), str(GOOD))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"draguard: error: {bad}:")
    assert "cannot parse YAML" in lines[0]


def test_an_unreadable_file_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = tmp_path / "locked.yaml"
    locked.write_text("apiVersion: v1\n")
    real_read = Path.read_text

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        if self == locked:  # chmod 0 does not stop root, who runs CI containers
            raise PermissionError(13, "Permission denied", str(self))
        return real_read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", read_text)
    code, _, err = run(capsys, str(locked), str(GOOD))
    assert code == 2
    assert err.strip() == f"draguard: error: {locked}: cannot read: Permission denied"


def test_binary_input_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    blob = tmp_path / "blob.json"
    blob.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run(capsys, str(blob))
    assert code == 2
    assert err.startswith(f"draguard: error: {blob}: cannot read: not UTF-8 text")


def test_a_bad_target_release_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--target-release", "latest", str(GOOD))
    assert code == 2
    assert "--target-release" in err


def test_the_target_release_decides_deprecated_or_removed(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "dra-api-removed" / "bad.yaml"  # resource.k8s.io/v1beta1
    assert [f.rule for f in lint([path], (1, 34)).findings] == []
    assert [f.rule for f in lint([path], (1, 37)).findings] == ["dra-api-deprecated"]
    assert [f.rule for f in lint([path], (1, 38)).findings] == ["dra-api-removed"]


# --- formats ---------------------------------------------------------------------------------


def test_json_lists_findings_with_their_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--format", "json", str(BAD))
    assert code == 1
    doc = json.loads(out)
    assert doc["summary"] == {"errors": 1, "warnings": 0, "files": 1}
    (finding,) = doc["findings"]
    assert finding["rule"] == "multi-device-topology"
    assert (finding["line"], finding["column"], finding["severity"]) == (21, 13, "error")
    assert finding["fix"] == RULES["multi-device-topology"].fix


def test_sarif_is_structurally_valid_2_1_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--format", "sarif", str(BAD), str(WARNING_ONLY))
    assert code == 1
    doc = json.loads(out)
    assert doc["version"] == "2.1.0"
    assert doc["$schema"].endswith("sarif-2.1.0.json")
    (run_,) = doc["runs"]
    rules = run_["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    assert len(ids) == len(set(ids))
    for r in rules:
        assert r["shortDescription"]["text"] and r["help"]["text"]
        assert r["defaultConfiguration"]["level"] in ("error", "warning")
    assert len(run_["results"]) == 2
    for result in run_["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] in ("error", "warning")
        assert result["message"]["text"]
        (loc,) = result["locations"]
        physical = loc["physicalLocation"]
        assert physical["artifactLocation"]["uri"].endswith(".yaml")
        assert physical["region"]["startLine"] >= 1 and physical["region"]["startColumn"] >= 1


def test_github_format_prints_workflow_annotations(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--format", "github", str(BAD), str(WARNING_ONLY))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith(f"::error file={BAD},line=21,col=13,title=multi-device-topology::")
    assert lines[1].startswith("::warning file=") and "title=unknown-device-class::" in lines[1]


def test_output_writes_the_report_to_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "lint.sarif"
    code, out, _ = run(capsys, "--format", "sarif", "--output", str(target), str(GOOD))
    assert (code, out) == (0, "")
    assert json.loads(target.read_text())["runs"][0]["results"] == []


# --- input shapes ----------------------------------------------------------------------------


def test_json_manifests_are_located_by_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "pod.json"
    path.write_text(
        '{\n  "apiVersion": "v1",\n  "kind": "Pod",\n  "metadata": {"name": "p"},\n  "spec": {"containers": [\n'
        '    {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 2}}}\n  ]}\n}\n'
    )
    (finding,) = lint([path]).findings
    assert (finding.rule, finding.line, finding.column) == ("accelerator-extended-resource", 6, 58)


def test_multi_document_files_and_lists_are_all_read(tmp_path: Path) -> None:
    path = tmp_path / "all.yaml"
    path.write_text(
        "---\n# empty\n---\napiVersion: v1\nkind: List\nitems:\n"
        "  - apiVersion: resource.k8s.io/v1alpha3\n    kind: DeviceClass\n    metadata: {name: a}\n"
        "---\napiVersion: resource.k8s.io/v1alpha3\nkind: ResourceSlice\nmetadata: {name: b}\n"
    )
    assert [(f.rule, f.line) for f in lint([path]).findings] == [("dra-api-removed", 7), ("dra-api-removed", 11)]


def test_documents_that_are_not_known_kubernetes_objects_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "misc.yaml"
    path.write_text(
        "apiVersion: draguard.dev/v1alpha1\nkind: Scenario\nmetadata: {name: s}\n"
        "spec:\n  workloads:\n    - name: w\n      replicas: 3\n"
        "---\n- just\n- a list\n---\nplain scalar\n---\nreplicaCount: 3\nimage: {tag: x}\n"
    )
    report = lint([path])
    assert report.findings == []
    assert report.files == [str(path)]


def test_folders_are_walked_for_yaml_and_json_only(tmp_path: Path) -> None:
    (tmp_path / "deployments" / ".git").mkdir(parents=True)
    (tmp_path / "deployments" / "a.yml").write_text(BAD.read_text())
    (tmp_path / "deployments" / "b.json").write_text("{}")
    (tmp_path / "deployments" / "notes.txt").write_text("not: [yaml")
    (tmp_path / "deployments" / ".git" / "c.yaml").write_text("not: [yaml")
    report = lint([tmp_path])
    assert sorted(Path(f).name for f in report.files) == ["a.yml", "b.json"]
    assert [f.rule for f in report.findings] == ["multi-device-topology"]


def _chart(root: Path) -> Path:
    chart = root / "helm" / "trainer"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: trainer\nversion: 0.1.0\n")
    (chart / "templates" / "claim.yaml").write_text("{{- if .Values.enabled }}\nkind: {{ .Values.kind }}\n")
    return chart


def test_a_helm_chart_without_helm_is_reported_not_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chart = _chart(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    code, out, _ = run(capsys, str(tmp_path / "helm"), str(chart / "templates" / "claim.yaml"))
    assert code == 0
    assert out.splitlines() == [
        f"{chart}: not checked: Helm chart, and helm is not installed to render its templates",
        "draguard lint: 0 error(s), 0 warning(s) in 0 file(s) for Kubernetes 1.37, 1 not checked",
    ]
    code, out, _ = run(capsys, "--format", "json", str(chart))
    assert json.loads(out)["notChecked"] == [
        {"path": str(chart), "reason": "Helm chart, and helm is not installed to render its templates"}
    ]


def test_a_helm_chart_is_rendered_with_helm_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chart = _chart(tmp_path)
    class_doc, claim_doc = (EXAMPLES / "multi-device-topology" / "bad.yaml").read_text().split("---\n")
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(
        f"---\n# Source: trainer/templates/class.yaml\n{class_doc}---\n# Source: trainer/templates/claim.yaml\n{claim_doc}"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    helm = bin_dir / "helm"  # stands in for helm: prints what `helm template` would
    helm.write_text(f'#!/bin/sh\n[ "$1" = template ] && [ "$3" = "{chart}" ] && cat "{rendered}"\n')
    helm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    report = lint([tmp_path / "helm"])
    assert report.not_checked == []
    (finding,) = report.findings
    assert (finding.file, finding.rule) == (str(chart / "templates" / "claim.yaml"), "multi-device-topology")
    marked = [i for i, line in enumerate(claim_doc.splitlines(), 1) if line.endswith("# expect")]
    assert [finding.line] == marked  # lines count within the rendered document


# --- the project's own files -----------------------------------------------------------------


def test_the_projects_own_scenarios_and_manifests_lint_clean() -> None:
    paths = [REPO / name for name in ("scenarios", "deployments", "manifests", "infra", "helm") if (REPO / name).exists()]
    report = lint(paths)
    assert [str(f) for f in report.findings] == []


# --- the registry ----------------------------------------------------------------------------


def test_a_duplicate_rule_id_is_rejected_when_decorated() -> None:
    with pytest.raises(DefinitionError, match="'gang-policy'.*already registered by .*check_gang_policy"):

        @rule(id="gang-policy", severity=Severity.WARNING, statement="Again.", fix="None.")
        def again(inv: object) -> list[object]:
            return []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"id": "Bad_Id"}, "kebab-case"),
        ({"statement": ""}, "statement must be one non-empty line"),
        ({"fix": "two\nlines"}, "fix must be one non-empty line"),
        ({"severity": "error"}, "severity must be a Severity"),
    ],
)
def test_a_malformed_rule_is_rejected_when_decorated(kwargs: dict[str, object], message: str) -> None:
    spec: dict[str, object] = {"id": "brand-new", "severity": Severity.ERROR, "statement": "S.", "fix": "F."}
    spec.update(kwargs)
    with pytest.raises(DefinitionError, match=message):
        rule(**spec)(lambda inv: [])  # type: ignore[arg-type]
    assert "brand-new" not in RULES


def test_a_check_must_take_the_inventory() -> None:
    with pytest.raises(DefinitionError, match="exactly one argument"):
        rule(id="brand-new", severity=Severity.ERROR, statement="S.", fix="F.")(lambda: [])  # type: ignore[arg-type]
    assert "brand-new" not in RULES
