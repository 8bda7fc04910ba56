"""``draguard lint`` on Go, TypeScript and Python sources and manifest templates.

Examples live in ``examples-src/<rule-id>/``: each bad one gives findings exactly on its marked lines
(``// expect`` or ``# expect`` for the folder's rule, ``expect <rule-id>`` for another rule it also
breaks), each good one gives none. A ``lint: --target-release X.Y`` comment sets the release.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.conformance.lint import LintInputError, lint, parse_release

HERE = Path(__file__).parent
EXAMPLES = HERE / "examples-src"
MANIFESTS = HERE / "examples"
LANGUAGES = {"Go": (".go",), "TypeScript": (".ts", ".tsx"), "Python": (".py",)}
SOURCE_RULES = [
    "accelerator-extended-resource",
    "accelerator-mixed-requests",
    "dra-api-removed",
    "dra-api-deprecated",
    "multi-device-topology",  # through embedded manifests
]
_MARK = re.compile(r"(?://|#)\s*expect(?:\s+([a-z0-9-]+))?\s*$")
_RELEASE = re.compile(r"(?://|#) lint: --target-release (\S+)")


def _examples(prefix: str) -> list[Path]:
    return sorted(p for p in EXAMPLES.glob(f"*/{prefix}*") if p.is_file())


def _release(text: str) -> tuple[int, int]:
    match = _RELEASE.search(text)
    return parse_release(match[1]) if match else (1, 37)


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _marks(path: Path) -> set[tuple[str, int]]:
    marks = set()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        match = _MARK.search(line)
        if match:
            marks.add((match[1] or path.parent.name, number))
    return marks


# --- the examples ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", _examples("bad"), ids=_id)
def test_bad_source_example_gives_findings_exactly_on_its_marked_lines(path: Path) -> None:
    marks = _marks(path)
    assert [rule for rule, _ in marks].count(path.parent.name) == 1, f"{path}: mark one line with 'expect'"
    report = lint([path], _release(path.read_text()))
    assert report.not_checked == []
    assert {(f.rule, f.line) for f in report.findings} == marks, [str(f) for f in report.findings]
    assert len(report.findings) == len(marks)


@pytest.mark.parametrize("path", _examples("good"), ids=_id)
def test_good_source_example_gives_no_finding(path: Path) -> None:
    report = lint([path], _release(path.read_text()))
    assert [str(f) for f in report.findings] == []
    assert report.not_checked == []
    assert report.files == [str(path)]


@pytest.mark.parametrize("rule", SOURCE_RULES)
@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_every_source_rule_has_good_and_bad_examples_in_every_language(rule: str, language: str) -> None:
    folder = EXAMPLES / rule
    suffixes = LANGUAGES[language]
    assert any(p.suffix in suffixes for p in folder.glob("bad*")), f"no bad {language} example for {rule}"
    assert any(p.suffix in suffixes for p in folder.glob("good*")), f"no good {language} example for {rule}"


# --- every manifest rule, embedded in each language ----------------------------------------------

_WRAP = {
    # prefix (ends with the literal's opening delimiter and a newline), suffix
    ".go": ("package embedded\n\n// an operator's manifest\nconst manifest = `\n", "`\n"),
    ".ts": ('const name = "x";\n\nexport const manifest = `\n', "`;\n"),
    ".py": ('"""A manifest in a triple-quoted string."""\n\nMANIFEST = r"""\n', '"""\n'),
}


def _manifest_examples() -> list[Path]:
    return sorted(p for p in MANIFESTS.glob("*/*.yaml"))


@pytest.mark.parametrize("suffix", sorted(_WRAP))
@pytest.mark.parametrize("path", _manifest_examples(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_manifest_embedded_in_a_string_gives_the_same_findings_at_the_same_place(
    path: Path, suffix: str, tmp_path: Path
) -> None:
    text = path.read_text()
    assert "`" not in text and "${" not in text and '"""' not in text, "the example must embed verbatim"
    prefix, end = _WRAP[suffix]
    source = tmp_path / f"embedded{suffix}"
    source.write_text(prefix + text + end)
    shift = prefix.count("\n")
    release = parse_release(m[1]) if (m := re.search(r"^# lint: --target-release (\S+)", text, re.M)) else (1, 37)
    expected = [(f.rule, f.line + shift, f.column, f.message) for f in lint([path], release).findings]
    got = [(f.rule, f.line, f.column, f.message) for f in lint([source], release).findings]
    assert got == expected
    assert all(f.file == str(source) for f in lint([source], release).findings)


# --- positions through escapes and substitutions -------------------------------------------------


def test_positions_in_an_escaped_go_string_point_into_the_source_line(tmp_path: Path) -> None:
    source = tmp_path / "claim.go"
    line = (
        'var claim = "apiVersion: resource.k8s.io/v1\\nkind: ResourceClaim\\nmetadata: {name: c}\\n'
        'spec:\\n  devices:\\n    requests:\\n    - name: g\\n      exactly: {deviceClassName: gpu.draguard.dev, count: 2}\\n"'
    )
    source.write_text("package x\n\n" + line + "\n")
    (finding,) = [f for f in lint([source]).findings if f.rule == "multi-device-topology"]
    assert finding.line == 3
    assert line[finding.column - 1 :].startswith("count: 2")


def test_positions_after_a_typescript_substitution_on_the_same_line(tmp_path: Path) -> None:
    source = tmp_path / "claim.ts"
    source.write_text(
        "const n = 4;\nexport const m = `apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
        "spec:\n  devices:\n    requests:\n    - name: g\n"
        "      exactly: {deviceClassName: ${'gpu.' + 'draguard.dev'}, count: 2}\n`;\n"
    )
    line = source.read_text().splitlines()[8]
    findings = {f.rule: f for f in lint([source]).findings}
    topology = findings["multi-device-topology"]
    assert (topology.line, topology.column) == (9, line.index("count: 2") + 1)
    unknown = findings["unknown-device-class"]  # the class name is the substitution itself
    assert (unknown.line, unknown.column) == (9, line.index("${") + 1)
    assert "DeviceClass ___gpu._____draguard.dev__," in unknown.message  # the placeholder, same length


def test_positions_in_a_python_string_with_escapes_before_the_finding(tmp_path: Path) -> None:
    source = tmp_path / "claim.py"
    source.write_text(
        'M = """apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: "\\u00e9t\\u00e9"}\n'
        "spec:\n  devices:\n    requests:\n    - {name: g, exactly: {deviceClassName: gpu.draguard.dev, count: 2}}\n"
        '"""\n'
    )
    findings = lint([source]).findings
    (finding,) = [f for f in findings if f.rule == "multi-device-topology"]
    assert (finding.line, finding.column) == (7, source.read_text().splitlines()[6].index("count: 2") + 1)
    (named,) = [f for f in findings if f.rule == "unknown-device-class"]
    assert "ResourceClaim été request g" in named.message  # the escapes were decoded


ONE_LINE_JSON = {
    # a one-line JSON manifest, escapes before the value the finding points at; the expected column
    # is that of the value's opening quote as written (an escaped quote: its backslash)
    "go": ('var c = "{\\"kind\\":\\t\\"DeviceClass\\", \\"apiVersion\\": \\"resource.k8s.io/v1alpha3\\"}"\n', '\\"resource.k8s'),
    "ts": ("export const c = '{\"kind\":\\t\"DeviceClass\", \"apiVersion\": \"resource.k8s.io/v1alpha3\"}';\n", '"resource.k8s'),
    "py": ('C = "{\\"kind\\":\\t\\"DeviceClass\\", \\"apiVersion\\": \\"resource.k8s.io/v1alpha3\\"}"\n', '\\"resource.k8s'),
}


@pytest.mark.parametrize("suffix", sorted(ONE_LINE_JSON))
def test_a_finding_inside_a_one_line_string_points_at_its_column_in_the_source(suffix: str, tmp_path: Path) -> None:
    text, anchor = ONE_LINE_JSON[suffix]
    source = tmp_path / f"class.{suffix}"
    source.write_text(("package x\n\n" if suffix == "go" else "\n\n") + text)
    (finding,) = lint([source]).findings
    assert finding.rule == "dra-api-removed"
    assert (finding.line, finding.column) == (3, text.index(anchor) + 1)


def test_a_python_docstring_is_documentation_and_a_string_value_is_not(tmp_path: Path) -> None:
    manifest = "apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceClass\nmetadata: {name: x}\n"
    source = tmp_path / "op.py"
    source.write_text(f'"""Example:\n\n{manifest}"""\n\n\ndef f():\n    """{manifest}"""\n    return """{manifest}"""\n')
    assert [(f.rule, f.line) for f in lint([source]).findings] == [("dra-api-removed", 14)]


def test_positions_count_characters_not_bytes(tmp_path: Path) -> None:
    source = tmp_path / "pod.ts"
    source.write_text('const é = "ü"; const p = {limits: {"nvidia.com/gpu": 2}};\n')
    (finding,) = lint([source]).findings
    assert (finding.line, finding.column) == (1, 36)


def test_an_embedded_manifest_that_does_not_parse_is_not_checked_with_its_place(tmp_path: Path) -> None:
    source = tmp_path / "bad.go"
    source.write_text('package x\n\nconst m = `apiVersion: v1\nkind: Pod\nmetadata: {name: [x\n`\n\nvar q = "resource.k8s.io/v1alpha3"\n')
    report = lint([source])
    assert [(f.rule, f.line) for f in report.findings] == [("dra-api-removed", 8)]
    (skipped,) = report.not_checked
    assert skipped.path == f"{source}:3:11"
    assert skipped.reason.startswith(f"the YAML/JSON in this Go string does not parse at {source}:6:1:")


# --- parse errors --------------------------------------------------------------------------------

BROKEN = {  # text, and where tree-sitter puts the first error
    "broken.go": ("package x\n\nfunc f() {\n\tx := )\n}\n", 4, 2),
    "broken.ts": ('const a = {limits: {"nvidia.com/gpu": 2}};\nexport const b = ;\n', 2, 16),
    "broken.py": ('def f(:\n    return {"limits": {"nvidia.com/gpu": 2}}\n', 1, 7),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_file_that_does_not_parse_is_not_checked_and_the_others_are(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, line, column = BROKEN[name]
    broken = tmp_path / name
    broken.write_text(text)
    good = MANIFESTS / "multi-device-topology" / "bad.yaml"
    report = lint([broken, good])
    assert [n.reason for n in report.not_checked] == [f"parse error at {broken}:{line}:{column}"]
    assert [f.rule for f in report.findings] == ["multi-device-topology"]  # the other file was checked
    assert report.files == [str(good)]
    code = main(["lint", str(broken), str(good)])
    out = capsys.readouterr().out
    assert code == 1
    assert f"{broken}: not checked: parse error at {broken}:{line}:{column}" in out.splitlines()


def test_when_nothing_parses_the_exit_code_is_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for name, (text, _, _) in sorted(BROKEN.items()):
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    with pytest.raises(LintInputError):
        lint(paths)
    code = main(["lint", *paths])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    lines = err.strip().splitlines()
    assert lines[0] == f"draguard: error: {paths[0]}: not checked: parse error at {paths[0]}:4:2"
    assert len(lines) == 3 and all("not checked: parse error at" in line for line in lines)


def test_one_unparsable_file_in_a_folder_does_not_stop_the_walk(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = (\n")
    (tmp_path / "b.py").write_text('limits = {"limits": {"nvidia.com/gpu": 2}}\n')
    report = lint([tmp_path])
    assert [Path(n.path).name for n in report.not_checked] == ["a.py"]
    assert [(Path(f.file).name, f.rule) for f in report.findings] == [("b.py", "accelerator-extended-resource")]


# --- the folder walk and the formats -------------------------------------------------------------


def test_folders_are_walked_for_sources_and_templates(tmp_path: Path) -> None:
    for name in ("a.go", "b.ts", "c.tsx", "d.py", "e.yaml.tmpl", "f.yaml.j2"):
        (tmp_path / name).write_text("" if not name.endswith((".tmpl", ".j2")) else "apiVersion: v1\nkind: Pod\n")
    (tmp_path / "g.rs").write_text("fn main() {}\n")
    for dependencies in ("node_modules/lib", "vendor/k8s.io/api", "__pycache__"):
        (tmp_path / dependencies).mkdir(parents=True)
        (tmp_path / dependencies / "dep.ts").write_text('const l = {limits: {"nvidia.com/gpu": 8}};\n')
    (tmp_path / "h.tmpl").write_text("{{ not a manifest }}\n")
    report = lint([tmp_path])
    assert sorted(Path(f).name for f in report.files) == ["a.go", "b.ts", "c.tsx", "d.py", "e.yaml.tmpl", "f.yaml.j2"]


def test_tsx_components_are_parsed_with_the_tsx_grammar(tmp_path: Path) -> None:
    source = tmp_path / "panel.tsx"
    source.write_text(
        'export const spec = {resources: {limits: {"nvidia.com/gpu": 4}}};\n'
        "export const Panel = () => <div title={spec.kind}>GPUs</div>;\n"
    )
    report = lint([source])
    assert report.not_checked == []
    assert [(f.rule, f.line, f.column) for f in report.findings] == [("accelerator-extended-resource", 1, 43)]


def test_json_and_sarif_reports_include_the_source_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    go = EXAMPLES / "accelerator-extended-resource" / "bad.go"
    ts = EXAMPLES / "multi-device-topology" / "bad.ts"
    py = EXAMPLES / "dra-api-removed" / "bad.py"
    broken = tmp_path / "broken.go"
    broken.write_text(BROKEN["broken.go"][0])
    assert main(["lint", "--format", "json", str(go), str(ts), str(py), str(broken)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert sorted((Path(f["file"]).name, f["rule"]) for f in doc["findings"]) == [
        ("bad.go", "accelerator-extended-resource"),
        ("bad.py", "dra-api-removed"),
        ("bad.ts", "multi-device-topology"),
    ]
    assert doc["summary"]["files"] == 3
    assert doc["notChecked"] == [{"path": str(broken), "reason": f"parse error at {broken}:4:2"}]
    assert main(["lint", "--format", "sarif", str(go), str(ts), str(py), str(broken)]) == 1
    sarif = json.loads(capsys.readouterr().out)
    (run,) = sarif["runs"]
    uris = sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"])
    assert [Path(u).suffix for u in uris] == [".go", ".py", ".ts"]
    regions = {Path(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]).suffix: r["locations"][0]["physicalLocation"]["region"] for r in run["results"]}
    assert regions[".go"] == {"startLine": 18, "startColumn": 7}
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["message"]["text"] == f"not checked: parse error at {broken}:4:2"
