"""The draguard pytest plugin (entry point ``pytest11: draguard``).

Options: ``--draguard-cluster=local|kubeconfig`` (default local: a real control plane started for the
session), ``--kubeconfig``, ``--context``, ``--draguard-bin-dir``; and those of the sanity suite
(``--registration-socket``, ``--plugin-socket``, ``--driver``, ``--node``, ``--cdi-dir``,
``--restart-command``, ``--fake-driver-root``), read by :mod:`draguard.conformance.sanity.test_sanity`.
Fixtures: ``draguard_cluster`` (session scope, a ready cluster) and ``draguard_namespace`` (a fresh
namespace per test, labelled with the session's run label and removed afterwards).
Marker: ``cluster`` for tests that need a cluster. Talks to: ``draguard.harness.cluster``.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from draguard.harness.cluster.local import LocalCluster
from draguard.harness.errors import HarnessError
from draguard.harness.kube import RUN_LABEL, Kube

__all__ = ["ClusterHandle", "RUN_LABEL"]



@dataclass
class ClusterHandle:
    """What tests get: a kubeconfig, a client factory and, on the local backend, the control plane."""

    kubeconfig: Path
    context: str | None
    run_id: str
    local: LocalCluster | None = None

    def kube(self) -> Kube:
        return Kube.from_kubeconfig(self.kubeconfig, self.context)

    def restart(self, component: str) -> None:
        if self.local is None:
            pytest.skip(f"restarting {component} needs the local backend")
        self.local.restart(component)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("draguard", "draguard DRA test framework")
    group.addoption(
        "--draguard-cluster",
        choices=("local", "kubeconfig"),
        default=os.environ.get("DRAGUARD_CLUSTER", "local"),
        help="local: start a real control plane for the session; kubeconfig: use an existing cluster",
    )
    group.addoption("--kubeconfig", default=None, help="kubeconfig of the cluster (with --draguard-cluster=kubeconfig)")
    group.addoption("--context", default=None, help="kubeconfig context to use")
    group.addoption("--draguard-bin-dir", default=None, help="directory with control-plane binaries (local backend)")
    sanity = parser.getgroup("draguard-sanity", "draguard sanity suite (pytest --pyargs draguard.conformance.sanity)")
    sanity.addoption("--registration-socket", default=None, help="the driver's registration socket")
    sanity.addoption("--plugin-socket", default=None, help="the driver's DRA socket [default: from registration]")
    sanity.addoption("--driver", default=None, help="the driver's name")
    sanity.addoption("--node", default=None, help="the node the driver serves [default: from its slices]")
    sanity.addoption("--cdi-dir", default=None, help="where the driver writes CDI specs")
    sanity.addoption("--restart-command", default=None, help="shell command that restarts the driver")
    sanity.addoption("--fake-driver-root", default=None, help="node root of draguard's fake driver (fault hooks)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster: the test needs a Kubernetes cluster (draguard_cluster fixture)")


@pytest.fixture(scope="session")
def draguard_cluster(request: pytest.FixtureRequest) -> Iterator[ClusterHandle]:
    """A ready cluster for the whole session: a local control plane, or the one a kubeconfig names."""
    opt = request.config.getoption
    run_id = uuid.uuid4().hex[:8]
    if opt("--draguard-cluster") == "kubeconfig":
        path = opt("--kubeconfig") or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        handle = ClusterHandle(Path(path), opt("--context"), run_id)
        handle.kube().server_version()
        yield handle
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    cluster = LocalCluster(f"pytest-{worker}-{os.getpid()}", bin_dir=opt("--draguard-bin-dir"))
    try:
        cluster.up()
    except HarnessError as exc:
        pytest.fail(f"local control plane did not start: {exc}", pytrace=False)
    try:
        yield ClusterHandle(cluster.kubeconfig, None, run_id, cluster)
    finally:
        cluster.down(remove=True)


@pytest.fixture
def draguard_namespace(draguard_cluster: ClusterHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, labelled with the run label; deleted afterwards."""
    kube = draguard_cluster.kube()
    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:5]}"
    kube.create_namespace(name, {RUN_LABEL: draguard_cluster.run_id})
    try:
        yield name
    finally:
        kube.delete("Namespace", name)
