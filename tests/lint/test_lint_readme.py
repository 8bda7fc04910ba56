"""The linter's documentation stays true: every ``draguard lint`` command that docs/lint.md and the
README's lint example show prints exactly the output shown, and every code excerpt is in the example
file it names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.conformance.lint import Severity, lint

REPO = Path(__file__).resolve().parents[2]
GUARDRAIL = "tests/lint/fixtures/guardrail-good.yaml"


def _readme_example() -> str:
    """The README's lint example: the block after its ``lint-commands`` marker."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"<!-- lint-commands:.*?-->\n(```console\n.*?```)", text, re.DOTALL)
    assert block, "README.md lost its lint-commands block"
    return block[1]


def _blocks(kind: str, text: str | None = None) -> list[tuple[str, str]]:
    """``(text before the block, block body)`` for each fenced block of ``kind`` in docs/lint.md (or ``text``)."""
    page = (REPO / "docs" / "lint.md").read_text() if text is None else text
    out = []
    for match in re.finditer(rf"```{kind}\n(.*?)```", page, re.DOTALL):
        out.append((page[: match.start()], match[1]))
    return out


def _commands(text: str | None = None) -> list[tuple[str, str]]:
    found = []
    for _, body in _blocks("console", text):
        first, _, output = body.partition("\n")
        assert first.startswith("$ draguard lint "), first
        found.append((first[2:], output))
    return found


def _all_commands() -> list[tuple[str, str]]:
    return _commands() + _commands(_readme_example())


def test_the_readme_shows_one_lint_example() -> None:
    assert len(_commands(_readme_example())) == 1


def test_the_page_shows_one_example_per_source_language_and_the_guardrail() -> None:
    commands = [c for c, _ in _commands()]
    suffixes = {Path(c.split()[-1]).suffix for c in commands}
    assert {".go", ".ts", ".py", ".yaml"} <= suffixes
    assert f"draguard lint {GUARDRAIL}" in commands


@pytest.mark.parametrize(("command", "expected"), _all_commands(), ids=lambda v: v.split()[-1] if " " in v else "")
def test_every_lint_command_shown_prints_what_it_shows(
    command: str, expected: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    main(command.split()[1:])
    assert capsys.readouterr().out == expected


@pytest.mark.parametrize("kind", ["go", "ts", "python"])
def test_every_code_excerpt_is_in_the_file_it_names(kind: str) -> None:
    ((before, body),) = _blocks(kind)
    path = re.findall(r"`(tests/lint/examples-src/[^`]+)`", before)[-1]
    lines = set((REPO / path).read_text().splitlines())
    for line in body.splitlines():
        if line.strip() != "...":
            assert line in lines or line.rstrip() + "  # expect" in lines or _marked(line, lines), line


def _marked(line: str, lines: set[str]) -> bool:
    """The excerpt drops the test marks (``// expect``, ``# expect ...``) that the file carries."""
    return any(re.sub(r"\s*(//|#) expect.*$", "", other) == line for other in lines)


def test_the_guardrails_own_example_has_no_error_but_the_attribute_nvidia_does_not_publish(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    report = lint([GUARDRAIL])
    errors = [f for f in report.findings if f.severity is Severity.ERROR]
    assert [(f.rule, f.line) for f in errors] == [("cel-attribute", 40)]
    assert 'device.attributes["gpu.nvidia.com"].nvlinkBandwidthGbps' in errors[0].message
    warnings = sorted(f.rule for f in report.findings if f.severity is Severity.WARNING)
    assert warnings == ["dra-api-deprecated", "gang-policy", "topology-by-selector", "unknown-device-class"]
