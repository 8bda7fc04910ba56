"""Options shared by commands are declared once (``draguard.cli.options``) and their help shows defaults as
a user would type them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from draguard.cli.main import cli, main

ROOT = Path(__file__).resolve().parents[1]
SHARED = ("--kubeconfig", "--context", "--allow-context", "--bin-dir", "--report-dir")


def test_shared_options_are_declared_in_cli_options_only() -> None:
    declared = {opt: sorted(p.name for p in (ROOT / "cli").glob("*.py") if f'"{opt}"' in p.read_text())
                for opt in SHARED}
    assert declared == {opt: ["options.py"] for opt in SHARED}


def test_every_command_with_a_kubeconfig_takes_the_same_option() -> None:
    def commands(group: object, prefix: str = "") -> list[tuple[str, object]]:
        out = []
        for name, cmd in getattr(group, "commands", {}).items():
            out += commands(cmd, f"{prefix}{name} ") if hasattr(cmd, "commands") else [(prefix + name, cmd)]
        return out

    kinds = {}
    for name, cmd in commands(cli):
        for p in cmd.params:  # type: ignore[attr-defined]
            if "--kubeconfig" in p.opts:
                kinds[name] = (type(p.type).__name__, p.type.dir_okay, p.metavar)
    assert {"run", "load", "sanity", "conformance", "certify", "lint", "nodes", "cleanup"} <= set(kinds)
    assert len(set(kinds.values())) == 1, kinds


def test_the_report_default_in_help_is_what_a_user_types() -> None:
    text = CliRunner().invoke(cli, ["run", "--help"], terminal_width=200).output
    shown = re.search(r"--report FORMAT.*?\[default: ([^\]]+)\]", text, re.S)
    assert shown is not None and shown.group(1) == "terminal,json,html", text
    assert "[default: terminal,html]" in CliRunner().invoke(cli, ["report", "--help"], terminal_width=200).output


def test_the_shown_default_works_when_typed_and_space_separated_formats_get_a_hint(
        capsys: pytest.CaptureFixture[str]) -> None:
    scenario = str(ROOT / "scenarios" / "preempt-gang-member.yaml")
    assert main(["run", "--dry-run", "--report", "terminal,json,html", scenario]) == 0
    capsys.readouterr()
    assert main(["run", "--dry-run", "--report", "terminal", "json", "html", scenario]) == 2
    err = capsys.readouterr().err
    assert "json: no such scenario file or folder (several report formats go comma-separated: --report " \
           "terminal,json)" in err and "Traceback" not in err
