"""CDI spec files: one per claim, resolvable IDs, idempotent removal."""

from __future__ import annotations

import json
from pathlib import Path

from draguard.harness.driver import cdi


def test_a_spec_names_every_device_with_its_env_and_the_ids_resolve(tmp_path: Path) -> None:
    devs = [cdi.CdiDevice("gpu-0", "GPU-a", "req"), cdi.CdiDevice("gpu-1", "GPU-b", "req")]
    path = cdi.write_spec(tmp_path, "gpu.draguard.dev", "uid-1", devs)
    assert path == tmp_path / "gpu.draguard.dev-uid-1.json"
    spec = json.loads(path.read_text())
    assert spec["cdiVersion"] == cdi.CDI_VERSION and spec["kind"] == "gpu.draguard.dev/gpu"
    assert [d["name"] for d in spec["devices"]] == ["uid-1-gpu-0", "uid-1-gpu-1"]
    assert "DRAGUARD_DEVICE_GPU_1_UUID=GPU-b" in spec["devices"][1]["containerEdits"]["env"]
    ids = [cdi.device_id("gpu.draguard.dev", "uid-1", d.device) for d in devs]
    assert cdi.check_spec(tmp_path, ids) == []


def test_ids_of_a_removed_or_incomplete_spec_do_not_resolve(tmp_path: Path) -> None:
    cdi.write_spec(tmp_path, "d.example", "u", [cdi.CdiDevice("gpu-0", "G", "r")], incomplete=True)
    wanted = cdi.device_id("d.example", "u", "gpu-0")
    assert cdi.check_spec(tmp_path, [wanted]) == [f"CDI device {wanted} is in no spec under {tmp_path}"]
    assert cdi.remove_spec(tmp_path, "d.example", "u") is True
    assert cdi.remove_spec(tmp_path, "d.example", "u") is False
    assert list(tmp_path.iterdir()) == []
