"""The probe protocol: a fake node's truth, and NVML through pynvml against a stub libnvidia-ml.so
that this test builds with the machine's C compiler (the project's CI machines have ``cc``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from draguard.harness.devices.nvml import FakeNvml
from draguard.harness.devices.probe import FakeProbe
from draguard.harness.devices.truth import DeviceTruth, InstalledDevice

STUB = Path(__file__).with_name("stub_nvml.c")


@pytest.fixture(scope="module")
def stub_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) on this machine to build the stub libnvidia-ml.so")
    out = tmp_path_factory.mktemp("nvml") / "libnvidia-ml.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(out), str(STUB)], check=True)
    return out


def probe_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # A fresh process per probe: pynvml keeps the first library it loaded for the process's life.
    return subprocess.run([sys.executable, "-m", "draguard.cli.main", "nvml-probe", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})  # fmt: skip


def test_nvml_probe_reports_gpus_processes_memory_and_mig_devices_from_the_library(stub_library: Path) -> None:
    run = probe_cli("--library", str(stub_library), "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert (result["status"], result["driverVersion"]) == ("ok", "580.65.06-stub")
    h100, a100 = result["devices"]
    assert (h100["uuid"], h100["index"], h100["memoryTotal"]) == ("GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", 0, 80 << 30)
    assert h100["processes"] == [{"pid": 4242, "memory": 1 << 30}] and h100["memoryUsed"] == 1 << 30
    assert a100["migEnabled"] and a100["processes"] == []
    assert [m["uuid"] for m in a100["migDevices"]] == ["MIG-11111111-2222-3333-4444-555555555555",
                                                       "MIG-66666666-7777-8888-9999-000000000000"]  # fmt: skip
    assert a100["migDevices"][0]["processes"] == [{"pid": 7001, "memory": 2 << 30}]


def test_nvml_probe_says_clearly_when_there_is_no_gpu_or_no_library(stub_library: Path, tmp_path: Path) -> None:
    none = probe_cli("--library", str(stub_library), env={"DRAGUARD_STUB_NVML_GPUS": "0"})
    assert none.returncode == 2 and none.stdout.startswith("no-devices: NVML sees no GPU"), none.stdout + none.stderr
    missing = probe_cli("--library", str(tmp_path / "libnvidia-ml.so.1"))
    assert missing.returncode == 2 and missing.stdout.startswith("no-library: cannot load the NVML library"), missing.stdout
    assert "Traceback" not in missing.stderr + none.stderr


def test_nvml_probe_without_an_nvidia_driver_reports_no_library() -> None:
    if any(Path(p, "libnvidia-ml.so.1").exists() for p in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")):
        pytest.skip("this machine has an NVIDIA driver: the default library loads")
    run = probe_cli()
    assert run.returncode == 2 and run.stdout.startswith("no-library: no NVML library (libnvidia-ml.so.1)"), run.stdout
    assert "Traceback" not in run.stderr


def test_the_fake_probe_reads_a_nodes_truth(tmp_path: Path) -> None:
    t = DeviceTruth(tmp_path, "n1")
    assert FakeProbe(t).probe().status == "no-devices"
    t.install([InstalledDevice("gpu-0", "GPU-0", memory_bytes=80 << 30),
               InstalledDevice("gpu-0-mig-a", "MIG-a", "mig", "gpu-0", 10 << 30)])  # fmt: skip
    FakeNvml(t).create_partition("gpu-0", "gpu-0-mig-a")
    t.start_container("pod-a/main", "ns/a", ["c"], ["gpu-0-mig-a"])
    result = FakeProbe(t).probe()
    [gpu] = result.devices
    assert result.ok and gpu.mig_enabled and [m.uuid for m in gpu.mig_devices] == ["MIG-a"]
    assert len(gpu.mig_devices[0].processes) == 1 and gpu.memory_used == gpu.mig_devices[0].memory_used > 0
    cli = probe_cli("--root", str(tmp_path), "--node", "n1")
    assert cli.returncode == 0 and "MIG-a" in cli.stdout
