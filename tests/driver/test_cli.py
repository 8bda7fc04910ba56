"""``draguard driver fake`` on bad input: one clear line naming the input, exit code 2, nothing left."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.harness.core.paths import NodeDirs


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    # Never loaded: every case below fails on an earlier input.
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\n")
    return path


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["driver", "fake", *args])
    return rc, capsys.readouterr().err


def test_an_unknown_mutant_is_named(root: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = _run(capsys, "--kubeconfig", str(kubeconfig), "--node", "n", "--root", str(root), "--mutant", "oops")
    assert rc == 2 and "--mutant 'oops': no such mutant" in err and "Traceback" not in err
    assert list(root.iterdir()) == []


def test_a_malformed_topology_file_is_named(
    root: Path, tmp_path: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topo = tmp_path / "topo.yaml"
    topo.write_text("kind: NodeTopology\npreset: h100-sxm-9\n")
    rc, err = _run(capsys, "--kubeconfig", str(kubeconfig), "--node", "n", "--root", str(root), "--topology", str(topo))
    assert rc == 2 and f"{topo}:2:1: preset: unknown preset 'h100-sxm-9'" in err


def test_a_taken_socket_is_named_and_left_alone(root: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sock_path = NodeDirs(root, "n").dra_socket("gpu.draguard.dev")
    sock_path.parent.mkdir(parents=True)
    holder = socket.socket(socket.AF_UNIX)
    holder.bind(str(sock_path))
    holder.listen()
    try:
        rc, err = _run(capsys, "--kubeconfig", str(kubeconfig), "--node", "n", "--root", str(root))
        assert rc == 2 and f"{sock_path}: socket is taken" in err
        assert sock_path.is_socket()
    finally:
        holder.close()


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--driver", "Not_A_Name"], "--driver 'Not_A_Name': must be a lower-case DNS subdomain"),
        (["--devices", "0"], "Invalid value for '--devices'"),
        (["--devices", "2", "--topology", "/dev/null"], "give one of them, not both"),
    ],
)
def test_bad_flags_are_named(
    root: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str], flags: list[str], fragment: str
) -> None:
    rc, err = _run(capsys, "--kubeconfig", str(kubeconfig), "--node", "n", "--root", str(root), *flags)
    assert rc == 2 and fragment in err
