"""A repeated prepare after a node reboot: the CDI spec directory is empty, the checkpoint is not.

The correct driver writes the spec of a claim it holds again, byte for byte as the first prepare
wrote it, so the same CDI IDs resolve (kubernetes/kubernetes#141433); the cdi-not-recreated mutant
answers from its checkpoint with the same IDs and no spec."""

from __future__ import annotations

from pathlib import Path

from draguard.harness import cdi
from draguard.harness.core.paths import DEFAULT_DRIVER

from .conftest import ClaimStore, allocated_claim, make_driver


def _prepare_reboot_prepare(root: Path, store: ClaimStore, mutant: str | None) -> tuple[list[str], Path, bytes]:
    drv = make_driver(root, store, mutant=mutant)
    ref = store.add(allocated_claim("c1", ["gpu-0", "gpu-1"]))
    first = drv.prepare([ref])[ref.uid]
    path = cdi.spec_path(drv.cdi_dir, DEFAULT_DRIVER, ref.uid)
    written = path.read_bytes()
    path.unlink()  # the reboot: /var/run/cdi is tmpfs; the checkpoint under the plugins directory stays
    again = make_driver(root, store, mutant=mutant).prepare([ref])[ref.uid]
    assert again.error == "" and again.devices == first.devices
    return [i for d in again.devices for i in d.cdi_device_ids], path, written


def test_the_correct_driver_writes_the_spec_of_a_claim_it_holds_again(root: Path, store: ClaimStore) -> None:
    ids, path, written = _prepare_reboot_prepare(root, store, None)
    assert path.read_bytes() == written
    assert cdi.check_ids(path.parent, ids) == []


def test_a_spec_that_is_there_is_left_alone(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    ref = store.add(allocated_claim("c1", ["gpu-2"]))
    drv.prepare([ref])
    path = cdi.spec_path(drv.cdi_dir, DEFAULT_DRIVER, ref.uid)
    before = path.stat().st_mtime_ns
    assert drv.prepare([ref])[ref.uid].error == ""
    assert path.stat().st_mtime_ns == before


def test_the_cdi_not_recreated_mutant_answers_the_same_ids_with_no_spec(root: Path, store: ClaimStore) -> None:
    ids, path, _ = _prepare_reboot_prepare(root, store, "cdi-not-recreated")
    assert not path.exists()
    problems = cdi.check_ids(path.parent, ids)
    assert len(problems) == len(ids) == 2 and all(f"{i} is in no spec" in p for i, p in zip(ids, problems)), problems
