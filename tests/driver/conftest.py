"""Fixtures for the fake driver's tests: short node roots (unix socket paths are limited to 107
bytes), an in-memory stand-in for reading ResourceClaims in unit tests, and claim builders."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.harness.driver.fault_control import FaultControl
from draguard.harness.driver.mutants import get_mutant
from draguard.harness.driver.plugin import FakeDriver
from draguard.harness.driver.topology import generic, preset, resolve
from draguard.harness.grpcapi.plugin import ClaimRef
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

NODE = "node-a"


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dg-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def allocated_claim(
    name: str,
    devices: list[str],
    namespace: str = "ns",
    uid: str | None = None,
    driver: str = DEFAULT_DRIVER,
    pool: str = NODE,
    admin: bool = False,
) -> dict[str, Any]:
    """A ResourceClaim as the API returns it once the scheduler allocated ``devices``."""
    results = [{"request": "req", "driver": driver, "pool": pool, "device": d} for d in devices]
    if admin:
        for r in results:
            r["adminAccess"] = True
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or str(uuid.uuid4())},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": results}}},
    }


class ClaimStore:
    """In-memory ResourceClaims for unit tests of the driver logic (the e2e tests use the API server)."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, claim: dict[str, Any]) -> ClaimRef:
        md = claim["metadata"]
        self.claims[(md["namespace"], md["name"])] = claim
        return ClaimRef(namespace=md["namespace"], name=md["name"], uid=md["uid"])

    def remove(self, namespace: str, name: str) -> None:
        self.claims.pop((namespace, name), None)

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.claims.get((namespace, name))


@pytest.fixture
def store() -> ClaimStore:
    return ClaimStore()


def make_driver(
    root: Path, store: ClaimStore, mutant: str | None = None, devices: int = 4, topology: str | None = None,
    instance: str | None = None,
) -> FakeDriver:
    dirs = NodeDirs(root, NODE).create()
    inventory = resolve(preset(topology) if topology else generic(devices), NODE)
    return FakeDriver(
        driver=DEFAULT_DRIVER,
        node=NODE,
        dirs=dirs,
        inventory=inventory,
        claims=store,
        mutant=get_mutant(mutant),
        faults=FaultControl(dirs.plugin_dir(DEFAULT_DRIVER)),
        reset_seconds=0.001,
        instance=instance,
    )


@pytest.fixture
def synced_writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Path]]:
    """Every ``os.fsync`` (the path behind the descriptor) and ``os.replace`` (its destination), in order."""
    import os

    events: list[tuple[str, Path]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("sync", Path(os.readlink(f"/proc/self/fd/{fd}"))))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        real_replace(src, dst)
        events.append(("rename", Path(dst)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events
