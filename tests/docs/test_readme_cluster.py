"""The README's install and cluster commands (the install-commands and cluster-commands blocks), run as
written, in order: `draguard cluster build` with the binaries cached, then a local control plane of
the test's own (its state folder the test's), fake nodes, the fake driver, the upstream DRA test
driver, the interposer and the device-truth probe on it; the commands ending in `&` run until they
are stopped (before `cluster down`, as a user stops them)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from draguard.harness.kube import Kube
from readme_blocks import Shell, blocks
from support import wait

pytestmark = pytest.mark.cluster


def test_cluster_build_finds_the_cached_binaries() -> None:
    lines = blocks()["install"].lines
    assert "draguard cluster build" in lines
    done = Shell(Path.cwd(), dict(os.environ)).run("draguard cluster build", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def _slices(kube: Kube, node: str, driver: str) -> list[dict]:  # type: ignore[type-arg]
    return [s for s in kube.items("ResourceSlice") if s["spec"].get("nodeName") == node and s["spec"]["driver"] == driver]


def test_the_cluster_commands_start_a_cluster_and_the_fake_fleet_on_it() -> None:
    root = Path(tempfile.mkdtemp(prefix="dgr", dir="/tmp"))  # short: unix socket paths are limited
    shell = Shell(root, dict(os.environ, XDG_STATE_HOME=str(root / "state")))
    lines = blocks()["cluster"].lines
    assert lines[0].startswith("draguard cluster up --name dev") and lines[-1] == "draguard cluster down --name dev"
    kube: list[Kube] = []
    ready: dict[str, Callable[[], object]] = {
        "draguard nodes ": lambda: all(kube[0].get("Node", n) for n in ("gpu-0", "gpu-1")),
        "draguard driver fake ": lambda: sum(len(s["spec"].get("devices", [])) for s in _slices(kube[0], "gpu-0", "gpu.draguard.dev")) == 8,
        "draguard external-driver ": lambda: _slices(kube[0], "gpu-1", "test-driver.cdi.k8s.io")
                                             and kube[0].get("DeviceClass", "test-gpus"),
        "draguard proxy ": lambda: list((root / "proxied" / "gpu-0" / "plugins_registry").glob("*.sock")),
    }  # fmt: skip
    try:
        for line in lines:
            if line.endswith("&"):
                proc = shell.start(line)
                (check,) = [c for prefix, c in ready.items() if line.startswith(prefix)]
                index = len(shell.background) - 1
                wait(lambda: (proc.poll() is None or pytest.fail(f"{line} exited {proc.returncode}:\n{shell.log(index)}"))
                     and check(), line, 60)  # fmt: skip
                continue
            if line.startswith("draguard cluster down"):
                shell.close()  # the commands that keep running are stopped first
            done = shell.run(line, timeout=300)
            assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
            if line.startswith("export KUBECONFIG="):
                kube.append(Kube.from_kubeconfig(shell.env["KUBECONFIG"]))
                assert kube[0].get("Namespace", "default")
            elif line.startswith("draguard nvml-probe"):
                gpus = [g for g in done.stdout.splitlines()[1:] if "memory" in g and "MiB" in g]
                assert len(gpus) == 8, done.stdout  # gpu-0's eight devices, one line each
            elif line.startswith("draguard cluster down"):
                assert not list((root / "state").rglob("cluster.json")), "cluster down left the cluster's state"
    finally:
        shell.close()
        shell.run("draguard cluster down --name dev", timeout=120)
        shutil.rmtree(root, ignore_errors=True)
