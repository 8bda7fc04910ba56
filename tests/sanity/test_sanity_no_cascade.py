"""No cascades, as a new user meets the suite: ``draguard sanity --fake-driver-root DIR`` against the
correct fake driver with no ``--restart-command``. The restart checks cannot bring the driver back,
so they are skipped before they start, saying why; no other check fails, and the driver still
answers at the end. (It used to crash the driver in ``sanity.restart.interrupted-prepare``, end
that check in ERROR, and fail six later checks that could not connect.) And where a restart hook
exists but fails, the check that left the driver down fails alone and the suite stops with one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.cli.main import main
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs
from draguard.harness.driver.process import FakeDriverProcess
from draguard.harness.grpcapi.plugin import PluginClient

from .conftest import fake_driver_node

pytestmark = pytest.mark.cluster


@pytest.fixture
def driver(draguard_cluster: Any) -> Iterator[tuple[FakeDriverProcess, Path, str]]:
    with fake_driver_node(draguard_cluster, "dg-nc", devices=48, health_interval=0.2) as started:
        yield started


def _sanity(draguard_cluster: Any, root: Path, node: str, out: Path, *extra: str) -> int:
    dirs = NodeDirs(root, node)
    return main(["sanity", "--registration-socket", str(dirs.registration_socket(DEFAULT_DRIVER)),
                 "--kubeconfig", str(draguard_cluster.kubeconfig), "--driver", DEFAULT_DRIVER, "--node", node,
                 "--cdi-dir", str(dirs.cdi), "--fake-driver-root", str(root), "--out", str(out), *extra])


def test_without_a_restart_command_the_restart_checks_are_skipped_and_nothing_else_fails(
    draguard_cluster: Any, driver: tuple[FakeDriverProcess, Path, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, root, node = driver
    code = _sanity(draguard_cluster, root, node, tmp_path)
    out = capsys.readouterr()
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    checks = {c["id"]: c for c in verdict["checks"]}
    assert code == 0, out.out[-4000:]
    for cid in ("sanity.restart.interrupted-prepare", "sanity.restart.state-survives"):
        assert checks[cid]["status"] == "skipped", checks[cid]
        assert "not started by the suite's caller" in checks[cid]["reason"] and checks[cid]["durationSeconds"] == 0
    bad = {c: (v["status"], v["reason"]) for c, v in checks.items() if v["status"] in ("failed", "error")}
    assert bad == {}
    assert "stopped" not in verdict["environment"]
    dirs = NodeDirs(root, node)
    with PluginClient(dirs.dra_socket(DEFAULT_DRIVER), dirs.registration_socket(DEFAULT_DRIVER)) as client:
        assert client.prepare([], timeout=5) == {}  # the driver is still up


def test_a_restart_that_fails_fails_the_check_that_crashed_the_driver_and_stops_the_suite_in_one_line(
    draguard_cluster: Any, driver: tuple[FakeDriverProcess, Path, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, root, node = driver
    code = _sanity(draguard_cluster, root, node, tmp_path, "--restart-command", "echo cannot restart >&2; exit 3",
                   "--check", "sanity.restart.*", "--check", "sanity.slices.*", "--check", "sanity.unprepare.*")
    err = capsys.readouterr().err
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    ran = [(c["id"], c["status"]) for c in verdict["checks"]]
    # Area order: unprepare, then restart (interrupted-prepare first), then slices, which are not run.
    assert ran[-1] == ("sanity.restart.interrupted-prepare", "error"), ran
    assert all(s == "passed" for cid, s in ran[:-1] if cid.startswith("sanity.unprepare.")), ran
    assert "left down" in verdict["checks"][-1]["reason"]
    not_run = verdict["environment"]["notRun"]
    assert not_run[0] == "sanity.restart.state-survives" and len(not_run) > 1
    assert all(c.startswith("sanity.slices.") for c in not_run[1:]) and "sanity.slices.node" in not_run
    stop_lines = [line for line in err.splitlines() if "stopped:" in line]
    assert len(stop_lines) == 1 and "sanity.restart.interrupted-prepare" in stop_lines[0]
    assert "--restart-command exited with 3" in stop_lines[0] and f"{len(not_run)} check(s) not run" in stop_lines[0]
    assert code == 2  # the check errored on the environment: the restart command is what failed
