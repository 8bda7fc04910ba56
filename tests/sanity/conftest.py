"""Fixtures of the sanity suite's tests: a short temporary root, an unreachable API server, the fake
driver's gRPC servers in process (registration and health need no API server), and the fake driver as a
process serving a Node of the local control plane (:func:`fake_driver_node`, :func:`cluster_node`)."""

from __future__ import annotations

import contextlib
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
from draguard.harness.driver.process import FakeDriverProcess
from draguard.harness.driver.slices import LABEL_NODE
from draguard.harness.driver.service import PluginServer
from draguard.harness.driver.topology import generic, resolve
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

NODE = "n1"


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dgs", dir="/tmp"))  # short: unix socket paths are limited
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kubeconfig(root: Path) -> Path:
    """A kubeconfig whose API server refuses connections at once."""
    path = root / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return path


@pytest.fixture
def fake_server(root: Path) -> Iterator[PluginServer]:
    """The fake driver's gRPC servers in process (no API server: registration and health only)."""
    dirs = NodeDirs(root, NODE)
    driver = FakeDriver(driver=DEFAULT_DRIVER, node=NODE, dirs=dirs, inventory=resolve(generic(2), NODE),
                        claims=_NoClaims(), mutant=get_mutant(None), faults=FaultControl(dirs.plugin_dir(DEFAULT_DRIVER)))
    srv = PluginServer(driver, dirs.dra_socket(DEFAULT_DRIVER), dirs.registration_socket(DEFAULT_DRIVER), 0.05)
    srv.start()
    yield srv
    srv.stop(grace=0)


class _NoClaims:
    def get_claim(self, namespace: str, name: str) -> None:
        return None


@contextlib.contextmanager
def cluster_node(cluster: Any, prefix: str) -> Iterator[str]:
    """A Node object named ``<prefix>-<random>`` on the local control plane; it and its slices go after."""
    kube = cluster.kube()
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    try:
        yield name
    finally:
        kube.delete("Node", name)
        kube.delete_collection("ResourceSlice", f"{LABEL_NODE}={name}")


@contextlib.contextmanager
def fake_driver_node(cluster: Any, prefix: str, node: str | None = None,
                     **driver: Any) -> Iterator[tuple[FakeDriverProcess, Path, str]]:
    """The fake driver serving ``node`` (else a new Node of :func:`cluster_node`) from a short root under /tmp
    (unix socket paths are limited): (process, root, node). ``driver`` goes to :class:`FakeDriverProcess`
    (``devices=4, reset_ms=1`` unless given). The process stops and the root goes after."""
    with contextlib.ExitStack() as stack:
        name = node if node is not None else stack.enter_context(cluster_node(cluster, prefix))
        root = Path(tempfile.mkdtemp(prefix="dg", dir="/tmp"))
        stack.callback(shutil.rmtree, root, ignore_errors=True)
        proc = FakeDriverProcess(cluster.kubeconfig, name, root=root, **{"devices": 4, "reset_ms": 1, **driver})
        stack.callback(proc.stop)
        proc.start()
        yield proc, root, name
