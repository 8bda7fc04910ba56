"""Fleet presets are data (harness/driver/presets/*.yaml): each resolves to exactly the inventory in
its golden file. DRAGUARD_REGENERATE=1 rewrites the golden files from the presets."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from draguard.harness.driver.topology import PRESET_DIR, PRESETS, Inventory, load_topology, preset, resolve
from draguard.harness.core.errors import UsageError
from draguard.harness.core.registry import Registry

GOLDEN = Path(__file__).parent / "golden"


def _plain(value: Any) -> Any:
    if isinstance(value, (frozenset, set)):
        return sorted(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def inventory_dict(inv: Inventory) -> dict[str, Any]:
    return {
        "node": inv.node,
        "devices": [{"name": d.name, "kind": d.kind, "uuid": d.uuid, "attributes": _plain(d.attributes),
                     "capacity": _plain(d.capacity), "consumes": [[n, _plain(c)] for n, c in d.consumes],
                     "parent": d.parent, "units": sorted(d.units)} for d in inv.devices],
        "counterSets": [{"name": c.name, "counters": _plain(c.counters)} for c in inv.counter_sets],
    }


def test_presets_live_in_the_one_registry_class_one_file_each() -> None:
    assert isinstance(PRESETS, Registry)
    assert PRESETS.names() == sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))
    assert len(PRESETS) >= 8
    for entry in PRESETS:
        assert entry.summary and "\n" not in entry.summary


@pytest.mark.parametrize("name", PRESETS.names())
def test_a_preset_resolves_to_its_golden_inventory(name: str) -> None:
    got = inventory_dict(resolve(preset(name), "node-1"))
    path = GOLDEN / f"{name}.json"
    if os.environ.get("DRAGUARD_REGENERATE") == "1":
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(path.read_text())


def test_a_preset_file_is_an_ordinary_topology_file() -> None:
    topo = load_topology(PRESET_DIR / "h100-sxm-4.yaml")
    assert topo.preset is None and topo.devices is not None and len(topo.devices) == 4


def test_an_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(UsageError, match="unknown topology preset 'h200'; known: a100-mig, a100-sxm-8"):
        preset("h200")
