"""CDI (Container Device Interface) spec files of the fake driver: one file per prepared claim.

``<root>/<node>/cdi/<driver>-<claimUID>.json`` holds ``cdiVersion``, ``kind`` ``<driver>/gpu`` and
one CDI device per prepared device, named ``<claimUID>-<device>``, whose ``containerEdits`` set
environment variables a workload could read (device name, uuid, claim). NodePrepareResources
returns the fully qualified IDs ``<driver>/gpu=<claimUID>-<device>``; a container runtime with CDI
enabled resolves them against the files in the node's CDI directory.

:func:`check_spec` is what a conformance check (and the tests) use to see that every returned ID
resolves to a device with edits in the spec.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .state import atomic_write

__all__ = ["CDI_VERSION", "CdiDevice", "spec_path", "device_id", "write_spec", "remove_spec", "check_spec"]

CDI_VERSION = "0.6.0"
CDI_CLASS = "gpu"


@dataclass(frozen=True)
class CdiDevice:
    """What the spec says about one prepared device."""

    device: str
    uuid: str
    request: str


def spec_path(cdi_dir: Path, driver: str, claim_uid: str) -> Path:
    return cdi_dir / f"{driver}-{claim_uid}.json"


def _cdi_name(claim_uid: str, device: str) -> str:
    return f"{claim_uid}-{device}"


def device_id(driver: str, claim_uid: str, device: str) -> str:
    """The fully qualified CDI device id the kubelet passes to the runtime."""
    return f"{driver}/{CDI_CLASS}={_cdi_name(claim_uid, device)}"


def _env_name(s: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", s.upper())


def build_spec(driver: str, claim_uid: str, devices: Sequence[CdiDevice], incomplete: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "cdiVersion": CDI_VERSION,
        "kind": f"{driver}/{CDI_CLASS}",
        "containerEdits": {"env": [f"DRA_RESOURCE_DRIVER_NAME={driver}", f"DRAGUARD_CLAIM_UID={claim_uid}"]},
        "devices": [],
    }
    if incomplete:
        # The incomplete-cdi mutant: the spec exists but names none of the devices, as a driver
        # that writes its spec before the device nodes exist (NVIDIA dra-driver #1380).
        return spec
    for i, d in enumerate(devices):
        key = _env_name(d.device)
        spec["devices"].append(
            {
                "name": _cdi_name(claim_uid, d.device),
                "containerEdits": {
                    "env": [
                        f"DRAGUARD_DEVICE_{i}={d.device}",
                        f"DRAGUARD_DEVICE_{key}_UUID={d.uuid}",
                        f"DRAGUARD_DEVICE_{key}_REQUEST={d.request}",
                    ]
                },
            }
        )
    return spec


def write_spec(
    cdi_dir: Path, driver: str, claim_uid: str, devices: Sequence[CdiDevice], incomplete: bool = False
) -> Path:
    """Write (atomically) the spec of one claim and return its path."""
    cdi_dir.mkdir(parents=True, exist_ok=True)
    path = spec_path(cdi_dir, driver, claim_uid)
    spec = build_spec(driver, claim_uid, devices, incomplete)
    atomic_write(path, json.dumps(spec, indent=1).encode(), point="cdi")
    return path


def remove_spec(cdi_dir: Path, driver: str, claim_uid: str) -> bool:
    """Remove the claim's spec; False if there was none (idempotent)."""
    try:
        spec_path(cdi_dir, driver, claim_uid).unlink()
        return True
    except FileNotFoundError:
        return False


def check_spec(cdi_dir: Path, ids: Sequence[str]) -> list[str]:
    """Problems resolving fully qualified CDI ``ids`` against the specs in ``cdi_dir``; empty if all resolve.

    An id resolves when a spec of its kind names the device and that device has container edits.
    """
    problems: list[str] = []
    known: dict[str, dict[str, Any]] = {}
    for path in sorted(cdi_dir.glob("*.json")):
        try:
            spec = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: not a readable CDI spec: {exc}")
            continue
        for field in ("cdiVersion", "kind", "devices"):
            if field not in spec:
                problems.append(f"{path}: missing {field}")
        for dev in spec.get("devices", []):
            known[f"{spec.get('kind')}={dev.get('name')}"] = dev
    for cid in ids:
        dev = known.get(cid)
        if dev is None:
            problems.append(f"CDI device {cid} is in no spec under {cdi_dir}")
        elif not (dev.get("containerEdits") or {}).get("env") and not (dev.get("containerEdits") or {}).get(
            "deviceNodes"
        ):
            problems.append(f"CDI device {cid} has no container edits")
    return problems
