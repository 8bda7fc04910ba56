"""A damaged checkpoint at start-up (kubernetes-sigs/dra-driver-nvidia-gpu#1100): the correct driver starts,
keeps a copy of the damaged file, rebuilds its books from the claims the API allocated from its node, and
records a CheckpointCorrupted Warning event on each; the discard-corrupt-checkpoint mutant starts with
every device free and says nothing; an API that cannot answer stops the start with the damaged file kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from draguard.harness import cdi
from draguard.harness.core.paths import DEFAULT_DRIVER
from draguard.harness.driver.plugin import CHECKPOINT_CORRUPTED, ClaimRecovery
from draguard.harness.driver.state import ClaimState, DeviceState, read_checkpoint

from .conftest import NODE, ClaimStore, allocated_claim, make_driver


class ApiClaims(ClaimStore):
    """The in-memory claims, listed as the API lists them, and the events recorded on them."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str, str, str]] = []
        self.down = False

    def list_claims(self) -> list[dict[str, Any]]:
        if self.down:
            raise ConnectionRefusedError("connection refused")
        return list(self.claims.values())

    def warn(self, claim: dict[str, Any], reason: str, message: str, source: str) -> None:
        self.events.append((claim["metadata"]["name"], reason, message, source))


def _damage(path: Path, mode: str) -> bytes:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if mode == "truncated" else data[:20] + b"\xff" * 16 + data[36:])
    return path.read_bytes()


@pytest.mark.parametrize("mode", ["truncated", "garbled"])
def test_the_driver_starts_and_rebuilds_its_books_from_the_api(root: Path, mode: str) -> None:
    api = ApiClaims()
    assert isinstance(api, ClaimRecovery)
    drv = make_driver(root, api)
    mine = api.add(allocated_claim("mine", ["gpu-0", "gpu-1"]))
    elsewhere = api.add(allocated_claim("elsewhere", ["gpu-0"], pool="node-b"))
    api.add({"metadata": {"name": "pending", "namespace": "ns", "uid": "u-pending"}, "status": {}})
    first = drv.prepare([mine])[mine.uid]
    spec = cdi.spec_path(drv.cdi_dir, DEFAULT_DRIVER, mine.uid)
    spec.unlink()  # gone with it: the rebuild writes it again
    damaged = _damage(drv.checkpoint_path, mode)

    again = make_driver(root, api)
    cp = read_checkpoint(root, NODE)
    assert set(cp.claims) == {mine.uid} and cp.claims[mine.uid].state is ClaimState.PREPARE_COMPLETED
    assert cp.claims[mine.uid].devices == first.devices  # same devices, requests and CDI IDs
    assert cp.device_states() == {"gpu-0": DeviceState.PREPARED, "gpu-1": DeviceState.PREPARED}
    assert cdi.check_ids(spec.parent, [i for d in first.devices for i in d.cdi_device_ids]) == []
    [(name, reason, message, source)] = api.events
    assert (name, reason, source) == ("mine", CHECKPOINT_CORRUPTED, DEFAULT_DRIVER)
    [copy] = drv.checkpoint_path.parent.glob("checkpoint.json.damaged-*")
    assert "checkpoint was damaged; this claim's prepared devices (gpu-0, gpu-1)" in message and copy.name in message
    assert copy.read_bytes() == damaged
    assert elsewhere.uid not in cp.claims
    # the claim is still known: its unprepare resets the devices and forgets it
    assert again.unprepare([mine]) == {mine.uid: ""}
    assert read_checkpoint(root, NODE).device_states() == {"gpu-0": DeviceState.FREE, "gpu-1": DeviceState.FREE}


def test_the_discard_mutant_starts_empty_and_says_nothing(root: Path) -> None:
    api = ApiClaims()
    drv = make_driver(root, api, mutant="discard-corrupt-checkpoint")
    ref = api.add(allocated_claim("mine", ["gpu-2"]))
    drv.prepare([ref])
    _damage(drv.checkpoint_path, "truncated")
    again = make_driver(root, api, mutant="discard-corrupt-checkpoint")
    assert read_checkpoint(root, NODE).claims == {} and api.events == []
    assert again.unprepare([ref]) == {ref.uid: ""}  # "unknown claim": the device is never reset
    assert cdi.spec_path(drv.cdi_dir, DEFAULT_DRIVER, ref.uid).exists()


def test_an_api_that_cannot_answer_stops_the_start_and_keeps_the_damaged_file(root: Path) -> None:
    api = ApiClaims()
    drv = make_driver(root, api)
    ref = api.add(allocated_claim("mine", ["gpu-3"]))
    drv.prepare([ref])
    damaged = _damage(drv.checkpoint_path, "truncated")
    api.down = True
    with pytest.raises(ConnectionRefusedError):
        make_driver(root, api)
    assert drv.checkpoint_path.read_bytes() == damaged
    assert not list(drv.checkpoint_path.parent.glob("checkpoint.json.damaged-*"))
    api.down = False
    make_driver(root, api)
    assert set(read_checkpoint(root, NODE).claims) == {ref.uid}
