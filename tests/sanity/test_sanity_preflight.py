"""``draguard sanity``'s pre-flight: the node whose driver it calls is known before any check starts.
Without ``--node`` it is the one node the driver's ResourceSlices name; when the cluster cannot be
read, or the slices name no node, the command is exit 2 at once with one line naming the cause, and
no check runs. (It ran every check, the claim-creating ones each ending in the same error.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from draguard.cli.main import main
from draguard.harness.core.paths import DEFAULT_DRIVER
from draguard.harness.driver.service import PluginServer


def _sanity(fake_server: PluginServer, kubeconfig: Path, out: Path) -> int:
    return main(["sanity", "--registration-socket", str(fake_server.registration_socket), "--kubeconfig",
                 str(kubeconfig), "--driver", DEFAULT_DRIVER, "--out", str(out)])


def _no_check_ran(printed: str, out: Path) -> None:
    assert not any(printed.startswith(w) or f"\n{w}" in printed for w in ("PASS", "FAIL", "SKIP", "ERROR")), printed
    assert not (out / "verdict.json").exists()


def test_without_node_an_unreadable_cluster_is_exit_2_naming_the_kubeconfig(
    fake_server: PluginServer, kubeconfig: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _sanity(fake_server, kubeconfig, root / "out")
    captured = capsys.readouterr()
    assert code == 2, captured.out
    assert f"{kubeconfig}: cannot read the driver's ResourceSlices to find its node" in captured.err, captured.err
    assert "Traceback" not in captured.err
    _no_check_ran(captured.out, root / "out")


@pytest.mark.cluster
def test_without_node_a_driver_that_publishes_no_node_local_slice_is_exit_2(
    draguard_cluster: Any, fake_server: PluginServer, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fake driver's servers in process publish nothing: no node to claim devices on."""
    code = _sanity(fake_server, Path(draguard_cluster.kubeconfig), root / "out")
    captured = capsys.readouterr()
    assert code == 2, captured.out
    assert (f"--node: the driver {DEFAULT_DRIVER} publishes no node-local ResourceSlice; give --node"
            in captured.err), captured.err
    _no_check_ran(captured.out, root / "out")
