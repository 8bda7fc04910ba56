"""The draguard pytest plugin (entry point ``pytest11: draguard``).

Options: ``--draguard-cluster=local|kubeconfig`` (default local: a real control plane started for the
session), ``--kubeconfig``, ``--context``, ``--draguard-bin-dir``; and those of the sanity suite
(``--registration-socket``, ``--plugin-socket``, ``--driver``, ``--node``, ``--cdi-dir``,
``--restart-command``, ``--fake-driver-root``, ``--capabilities``, ``--idempotent-count``), read by
:mod:`draguard.conformance.sanity.test_sanity`.
Fixtures: ``draguard_cluster`` (session scope, a ready cluster) and ``draguard_namespace`` (a fresh
namespace per test, labelled with the session's run label and removed afterwards).
Marker: ``cluster`` for tests that need a cluster. Talks to: ``draguard.harness.cluster``.

With allure-pytest installed and ``--alluredir`` given, a test that uses ``draguard_namespace``
gets the DRA state of its namespace attached as JSON when it ends (a step ``draguard: state of
namespace N`` with its pods, claims, events, and the ResourceSlices of the cluster), and
:func:`attach_result` attaches a run's verdict and timeline to the current test.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from draguard.harness.cluster.local import LocalCluster
from draguard.harness.core.errors import DraguardError, HarnessError
from draguard.harness.kube import RUN_LABEL, Kube
from draguard.harness.result import RunResult

__all__ = ["ClusterHandle", "RUN_LABEL", "allure_active", "attach_result"]


def allure_active(config: pytest.Config) -> bool:
    """True when allure-pytest is installed and records this session (``--alluredir``)."""
    return bool(config.pluginmanager.has_plugin("allure_listener"))


def _attach_json(name: str, body: Any) -> None:
    import allure  # optional: allure-pytest, only when it records the session

    allure.attach(json.dumps(body, indent=1, default=str), name=name, attachment_type=allure.attachment_type.JSON)


def attach_result(result: RunResult) -> None:
    """Attach a run's verdict, its invariants' evidence and its timelines to the current Allure test."""
    try:
        import allure  # optional: allure-pytest, only when it records the session
    except ImportError:
        return
    for s in result.scenarios:
        with allure.step(f"draguard scenario {s.name}: {'met' if s.ok else 'NOT met'}"):
            for name, inv in s.invariants.items():
                if inv.violations:
                    _attach_json(f"{name} evidence", [v.as_dict() for v in inv.violations])
            if s.timeline is not None:
                _attach_json(f"{s.name} timeline", list(s.timeline.events()))
    _attach_json("verdict", result.as_dict())


def _attach_namespace_state(kube: Kube, namespace: str) -> None:
    import allure  # optional: allure-pytest, only when it records the session

    with allure.step(f"draguard: state of namespace {namespace}"):
        for kind in ("Pod", "ResourceClaim", "Event"):
            try:
                items, _ = kube.list(kind, namespace)
            except DraguardError as exc:
                items = [{"error": str(exc)}]
            _attach_json(f"{kind}s", items)
        try:
            slices, _ = kube.list("ResourceSlice")
        except DraguardError as exc:
            slices = [{"error": str(exc)}]
        _attach_json("ResourceSlices", slices)



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
    sanity.addoption("--capabilities", default=None,
                     help="YAML/JSON file of what the driver supports; checks for the rest are not applicable")
    sanity.addoption("--idempotent-count", type=int, default=10,
                     help="how many times each prepare and unprepare check makes each call (default 10)")


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
        if allure_active(request.config):
            _attach_namespace_state(kube, name)
        kube.delete("Namespace", name)
