"""The nightly workflow (.github/workflows/nightly-kind.yml) says what it runs: every draguard command in
it parses against the CLI as written (options, choices, arguments), every file it names is in the
repository, and it runs the steps the nightly needs in order (kind cluster, driver image, DaemonSet,
library, certify, reports kept, diff against the previous night, tear down)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from ruamel.yaml import YAML

from draguard.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly-kind.yml"


def _commands() -> list[str]:
    doc = YAML(typ="safe").load(WORKFLOW.read_text())
    lines = []
    for step in doc["jobs"]["kind"]["steps"]:
        for line in str(step.get("run") or "").splitlines():
            lines += [part.strip() for part in re.split(r"\|\||&&|;|\bthen\b|\belse\b", line) if part.strip()]
    return lines


def _argv(command: str) -> list[str]:
    text = re.sub(r'"\$\([^)]*\)"', "kubeconfig.yaml", command)  # "$(draguard cluster kubeconfig ...)"
    text = re.sub(r'"?\$\{?(\w+)\}?"?', lambda m: f"<{m.group(1)}>", text)
    return shlex.split(text)


def test_every_draguard_command_of_the_nightly_parses_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # what the job has made by then: the kubeconfig, this and the previous night's reports
    (tmp_path / "kubeconfig.yaml").write_text("apiVersion: v1\nkind: Config\n")
    for d in ("previous/reports", "reports", "scenarios"):
        (tmp_path / d).mkdir(parents=True)
    commands = [c for c in _commands() if c.startswith("draguard ") or c.startswith("if [ -f previous")]
    draguard = [c for c in (re.sub(r"^if \[.*?\]\s*", "", c) for c in commands) if c.startswith("draguard ")]
    assert len(draguard) >= 7, draguard
    for command in draguard:
        argv = _argv(command)[1:]
        cmd: click.Command = cli
        while isinstance(cmd, click.Group) and argv and argv[0] in cmd.commands:
            cmd, argv = cmd.commands[argv[0]], argv[1:]
        assert not isinstance(cmd, click.Group), (command, "no such subcommand")
        with cmd.make_context(cmd.name or "", list(argv)) as ctx:  # parses options, choices and arguments; runs nothing
            assert ctx.params, command
    for sub in (re.search(r"\$\((draguard [^)]*)\)", c) for c in _commands()):
        if sub:
            argv = _argv(sub.group(1))[1:]
            assert argv[:2] == ["cluster", "kubeconfig"], argv


def test_the_nightly_runs_the_steps_it_needs_in_order_and_names_files_that_exist() -> None:
    text = WORKFLOW.read_text()
    order = ["cluster up --backend kind", "cluster kind-driver-image", "kubectl apply -f deploy/dra-test-driver.yaml",
             "draguard run scenarios/ --cluster kind", "draguard certify", "upload-artifact", "draguard diff previous/reports reports",
             "cluster down --backend kind"]
    positions = [text.index(step) for step in order]
    assert positions == sorted(positions), list(zip(order, positions))
    assert (ROOT / "deploy" / "dra-test-driver.yaml").is_file() and (ROOT / "scenarios").is_dir()
    for path in re.findall(r"hashFiles\(([^)]*)\)", text)[0].replace("'", "").split(","):
        assert (ROOT / path.strip()).is_file(), path
