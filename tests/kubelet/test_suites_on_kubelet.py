"""The sanity and conformance suites with the driver under hollow DRA kubelets instead of the fake agent.

Each node is a hollow kubelet (upstream's kubelet code: plugin registration, the claim cache and
its checkpoint, prepare/unprepare per pod, the health stream), started before its driver (it wipes
its node's ResourceSlices when it starts). The same drivers as on the fake agent, with the same
expectations:

* the correct fake driver passes every check that applies;
* each mutant the suite is aimed at is caught by the checks aimed at it (conformance: every mutant
  it catches on the fake agent; sanity: every mutant, aimed checks only);
* the upstream test driver fails exactly the checks it fails on the fake agent (the findings pinned
  in tests/sanity/test_sanity_upstream.py and tests/certify/test_conformance_upstream.py).

The sanity suite calls the driver's sockets itself; here the real kubelet has registered the same
driver and watches its health stream while the suite runs. The conformance suite's pods are
prepared by the kubelet, so its DRA call timeout (45 s, pkg/kubelet/cm/dra/plugin) applies: the
eviction-during-prepare check holds a prepare 50 s (the suite's default), not the 6 s the fake agent's
3 s timeout allows. Results and differences: docs/kubelet-differential.md.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from draguard.conformance.cluster import ClusterConfig, FakeDriverAccess, cluster_checks, run_conformance
from draguard.conformance.sanity import FakeDriverHooks, SanityConfig, run_sanity
from draguard.conformance.sanity.matrix import CORRECT, aimed
from draguard.harness.cluster.pki import Pki
from draguard.harness.devices.truth import truth_dir
from draguard.harness.driver.external import (
    TEST_DRIVER_NAME,
    ExternalPluginProcess,
    delete_published_slices,
    external_device_class,
    find_test_driver,
)
from draguard.harness.driver.mutants import MUTANTS
from draguard.harness.driver.process import FakeDriverProcess
from draguard.harness.driver.slices import LABEL_NODE
from draguard.harness.core.errors import HarnessError
from draguard.harness.kube import Kube
from draguard.harness.kubelet.process import HollowKubelet, find_kubelet
from draguard.harness.nodes.node import LEASE_NAMESPACE
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs
from draguard.harness.result import RunResult
from support import wait

from certify.test_conformance_driver_calls import not_passed

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def kubelet_binary(draguard_cluster: Any) -> Path:
    if draguard_cluster.local is None:
        pytest.skip("hollow kubelets need the local backend (node credentials come from its CA)")
    try:
        return find_kubelet()
    except HarnessError as exc:
        pytest.fail(f"the hollow kubelet cannot be built: {exc}")


@contextmanager
def kubelet_nodes(cluster: Any, binary: Path, count: int) -> Iterator[tuple[Path, list[HollowKubelet]]]:
    """``count`` hollow kubelets under one short root, started (in parallel) and Ready; all gone afterwards."""
    kube: Kube = cluster.kube()
    tag = uuid.uuid4().hex[:6]
    root = Path(tempfile.mkdtemp(prefix="dgq", dir="/tmp"))  # short: unix socket paths are limited
    local = cluster.local
    kubelets = [HollowKubelet(Pki(local.dir / "pki"), local.server, f"dgq-{tag}-{i}", root, admin=kube, binary=binary)
                for i in range(count)]  # fmt: skip
    try:
        with ThreadPoolExecutor(count) as pool:
            list(pool.map(lambda k: k.start(), kubelets))
        yield root, kubelets
    finally:
        for k in kubelets:
            k.stop()
        for k in kubelets:
            delete_published_slices(kube, k.node)
            kube.delete_collection("ResourceSlice", f"{LABEL_NODE}={k.node}")
            kube.delete("Node", k.node)
            kube.delete("Lease", k.node, LEASE_NAMESPACE)
        shutil.rmtree(root, ignore_errors=True)


def _published(kube: Kube, driver: str, nodes: list[str]) -> bool:
    items, _ = kube.list("ResourceSlice", field_selector=f"spec.driver={driver}")
    return set(nodes) <= {s["spec"].get("nodeName") for s in items if s["spec"].get("devices")}


def _why(result: RunResult) -> dict[str, tuple[str, str]]:
    return {c.id: (c.status, c.reason) for c in result.checks}


# -- the sanity suite ---------------------------------------------------------------------------


def _forget_driver(root: Path, node: str, driver: str) -> None:
    """What one mode of the fake driver leaves on the node (checkpoint, faults, CDI specs, device truth),
    removed so the next mode starts on a fresh node as in the matrix run on the fake agent."""
    dirs = NodeDirs(root, node)
    for path in (dirs.plugin_dir(driver), dirs.cdi, truth_dir(root, node)):
        shutil.rmtree(path, ignore_errors=True)


def test_the_sanity_suite_on_a_hollow_kubelet_passes_the_correct_fake_driver_and_catches_every_mutant(
    draguard_cluster: Any, kubelet_binary: Path
) -> None:
    targets = aimed()
    results: dict[str, RunResult] = {}
    with kubelet_nodes(draguard_cluster, kubelet_binary, 1) as (root, (kubelet,)):
        node, dirs = kubelet.node, NodeDirs(root, kubelet.node)
        for mode in [CORRECT, *sorted(MUTANTS)]:
            _forget_driver(root, node, DEFAULT_DRIVER)
            proc = FakeDriverProcess(draguard_cluster.kubeconfig, node, root=root, devices=48, reset_ms=1,
                                     health_interval=0.2, mutant=None if mode == CORRECT else mode)  # fmt: skip
            try:
                proc.start()
                kubelet.wait_registered(DEFAULT_DRIVER)
                wait(lambda: _published(draguard_cluster.kube(), DEFAULT_DRIVER, [node]), "the driver's slices", 30)
                config = SanityConfig(
                    registration_socket=dirs.registration_socket(DEFAULT_DRIVER), kubeconfig=draguard_cluster.kubeconfig,
                    driver=DEFAULT_DRIVER, plugin_socket=dirs.dra_socket(DEFAULT_DRIVER), node=node, cdi_dir=dirs.cdi,
                    select=() if mode == CORRECT else tuple(targets[mode]),
                )
                results[mode] = run_sanity(config, FakeDriverHooks(root, node, DEFAULT_DRIVER, process=proc))
            finally:
                proc.stop()
        assert kubelet.alive, kubelet.log_tail()
    correct = results[CORRECT]
    bad = {i: r for i, r in _why(correct).items() if r[0] != "passed"}
    # As on the fake agent, only a hook this fake driver lacks may skip, and the counters check when the
    # node's generic topology publishes no partitionable device.
    assert all(s == "skipped" and ("hook" in r or (i == "sanity.slices.counters" and "partitionable device" in r))
               for i, (s, r) in bad.items()), bad
    for mode in sorted(MUTANTS):
        got = _why(results[mode])
        assert {t: got[t][0] for t in targets[mode]} == {t: "failed" for t in targets[mode]}, (mode, got)


def test_the_upstream_test_driver_on_a_hollow_kubelet_fails_the_same_sanity_checks_as_on_the_fake_agent(
    draguard_cluster: Any, kubelet_binary: Path
) -> None:
    from sanity.test_sanity_upstream import FINDINGS, _Restart

    binary = find_test_driver(draguard_cluster.local.bin_dir)
    with kubelet_nodes(draguard_cluster, kubelet_binary, 1) as (root, (kubelet,)):
        proc = ExternalPluginProcess(draguard_cluster.kubeconfig, kubelet.node, root=root, devices=4, binary=binary)
        try:
            proc.start()
            kubelet.wait_registered(TEST_DRIVER_NAME)
            wait(lambda: _published(draguard_cluster.kube(), TEST_DRIVER_NAME, [kubelet.node]), "the driver's slice")
            config = SanityConfig(
                registration_socket=proc.registration_socket, kubeconfig=Path(draguard_cluster.kubeconfig),
                driver=TEST_DRIVER_NAME, plugin_socket=proc.dra_socket, node=kubelet.node,
                cdi_dir=NodeDirs(root, kubelet.node).cdi,
            )
            result = run_sanity(config, _Restart(proc))
        finally:
            proc.stop()
    report = _why(result)
    failed = {i for i, (s, _) in report.items() if s in ("failed", "error")}
    assert failed == set(FINDINGS), {i: report[i] for i in failed ^ set(FINDINGS)}


# -- the conformance (cluster) suite ------------------------------------------------------------


def _conformance_config(kubeconfig: Path, driver: str, device_class: str, **kw: Any) -> ClusterConfig:
    # prepare_delay stays at the suite's 50 s: longer than the kubelet's 45 s DRA call timeout.
    return ClusterConfig(kubeconfig=kubeconfig, driver=driver, device_class=device_class,
                         **({"wait_timeout": 60.0, "reuse_count": 3} | kw))


@contextmanager
def fake_driver_fleet(cluster: Any, binary: Path, nodes: int, mutant: str | None = None) -> Iterator[
        tuple[FakeDriverAccess, str]]:
    kube: Kube = cluster.kube()
    with kubelet_nodes(cluster, binary, nodes) as (root, kubelets):
        cls = f"dgq-{uuid.uuid4().hex[:6]}"
        procs: dict[str, FakeDriverProcess] = {}
        kube.create(external_device_class(cls, DEFAULT_DRIVER))
        try:
            for k in kubelets:
                procs[k.node] = FakeDriverProcess(cluster.kubeconfig, k.node, root=root, devices=4, mutant=mutant,
                                                  reset_ms=1).start()  # fmt: skip
            for k in kubelets:
                k.wait_registered(DEFAULT_DRIVER)
            wait(lambda: _published(kube, DEFAULT_DRIVER, [k.node for k in kubelets]), "the fake drivers' slices", 60)
            yield FakeDriverAccess(root, DEFAULT_DRIVER, procs), cls
        finally:
            for proc in procs.values():
                proc.stop()
            kube.delete("DeviceClass", cls)


def test_the_correct_fake_driver_passes_every_conformance_check_on_hollow_kubelets(
    draguard_cluster: Any, kubelet_binary: Path
) -> None:
    with fake_driver_fleet(draguard_cluster, kubelet_binary, 2) as (access, cls):
        result = run_conformance(_conformance_config(Path(draguard_cluster.kubeconfig), DEFAULT_DRIVER, cls), access)
    assert [c.id for c in result.checks] == [e.name for e in cluster_checks()]
    assert not not_passed(result.checks), _why(result)  # or skipped for what this fleet does not give
    assert result.environment["nodeSide"].startswith("checked")


def _conformance_aimed() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in cluster_checks():
        for m in e.meta.get("aimed_at") or ():
            out.setdefault(m, []).append(e.name)
    return out


@pytest.mark.parametrize("mutant", sorted(_conformance_aimed()))
def test_each_mutant_the_conformance_suite_catches_is_caught_on_hollow_kubelets(
    draguard_cluster: Any, kubelet_binary: Path, mutant: str
) -> None:
    targets = _conformance_aimed()[mutant]
    with fake_driver_fleet(draguard_cluster, kubelet_binary, 1, mutant) as (access, cls):
        result = run_conformance(_conformance_config(Path(draguard_cluster.kubeconfig), DEFAULT_DRIVER, cls,
                                                     select=tuple(targets), wait_timeout=30.0), access)  # fmt: skip
    got = _why(result)
    assert {t: got[t][0] for t in targets} == {t: "failed" for t in targets}, got


def test_the_upstream_test_driver_on_hollow_kubelets_fails_the_same_conformance_checks_as_on_the_fake_agent(
    draguard_cluster: Any, kubelet_binary: Path
) -> None:
    from certify.test_conformance_upstream import FINDINGS

    binary = find_test_driver(draguard_cluster.local.bin_dir)
    kube: Kube = draguard_cluster.kube()
    with kubelet_nodes(draguard_cluster, kubelet_binary, 2) as (root, kubelets):
        cls = f"dgq-{uuid.uuid4().hex[:6]}"
        procs: dict[str, ExternalPluginProcess] = {}
        kube.create(external_device_class(cls))
        try:
            for k in kubelets:
                procs[k.node] = ExternalPluginProcess(draguard_cluster.kubeconfig, k.node, root=root, devices=4,
                                                      binary=binary).start()  # fmt: skip
                k.wait_registered(TEST_DRIVER_NAME)
            wait(lambda: _published(kube, TEST_DRIVER_NAME, [k.node for k in kubelets]), "the upstream driver's slices")
            result = run_conformance(_conformance_config(Path(draguard_cluster.kubeconfig), TEST_DRIVER_NAME, cls),
                                     _UpstreamRestart(procs))
        finally:
            for proc in procs.values():
                proc.stop()
            kube.delete("DeviceClass", cls)
    got = _why(result)
    failed = {k for k, (s, _) in got.items() if s in ("failed", "error")}
    assert failed == set(FINDINGS), got
    assert got["conformance.core.template-claim"][0] == "passed"
    assert got["conformance.chaos.driver-restart"][0] == "passed", got["conformance.chaos.driver-restart"]


class _UpstreamRestart:
    def __init__(self, procs: dict[str, ExternalPluginProcess]) -> None:
        self.procs = procs

    def restart(self, node: str) -> None:
        self.procs[node].stop()
        self.procs[node].start()
