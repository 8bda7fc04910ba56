"""The README's driver-commands block (sanity and conformance) and load-commands block, run as written
against the fake driver on fake nodes of the local control plane, with the variables the README names
set to that fleet: the checks pass, and the load keeps its rate with no violation."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from draguard.harness.core.paths import NodeDirs
from readme_blocks import Shell, blocks

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def shell(make_fleet: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shell]:
    with make_fleet(nodes=2, devices=4) as f:
        env = dict(os.environ, KUBECONFIG=str(f.kubeconfig), DRIVER=f.driver, DEVICE_CLASS=f.device_class,
                   REGISTRATION_SOCKET=str(NodeDirs(f.root, f.nodes[0]).registration_socket(f.driver)),
                   NODE=f.nodes[0])  # fmt: skip
        yield Shell(tmp_path_factory.mktemp("readme-driver"), env)


def test_the_sanity_and_conformance_commands_pass_on_the_fake_driver(shell: Shell) -> None:
    lines = blocks()["driver"].lines
    assert [line.split()[1] for line in lines] == ["sanity", "conformance"]
    for line in lines:
        done = shell.run(line, timeout=400)
        assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    sanity = json.loads((shell.cwd / "sanity-report" / "verdict.json").read_text())
    statuses = {c["id"]: c["status"] for c in sanity["checks"]}
    assert statuses and all(i.startswith("sanity.prepare.") for i in statuses)
    assert "passed" in statuses.values() and "failed" not in statuses.values()
    conformance = json.loads((shell.cwd / "conformance-report" / "verdict.json").read_text())
    statuses = {c["id"]: c["status"] for c in conformance["checks"]}
    assert statuses["conformance.core.template-claim"] == "passed"
    assert all(i.startswith("conformance.core.") for i in statuses) and "failed" not in statuses.values()


def test_the_load_command_keeps_its_rate_with_no_violation(shell: Shell) -> None:
    (line,) = blocks()["load"].lines
    done = shell.run(line, timeout=300)
    assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    summary = json.loads((shell.cwd / "load-report" / "summary.json").read_text())
    assert not summary["fell_behind"], summary
    assert (shell.cwd / "load-report" / "locust_stats.csv").is_file()
