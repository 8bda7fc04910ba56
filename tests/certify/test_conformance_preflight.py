"""The cluster suite's pre-flight, against the real local control plane: ``draguard conformance`` with a
DeviceClass that does not exist, or that selects no published device, is exit 2 at once saying that
nothing can be allocated; the library (what ``certify`` and a vendor's own pytest run use) fails
``conformance.core.driver-publishes`` and skips every check that would create claims, with the cause,
without waiting for pods that cannot run."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from draguard.cli.main import main
from draguard.conformance.cluster import ClusterConfig, run_conformance
from draguard.harness.kube import Kube

pytestmark = pytest.mark.cluster


@pytest.fixture
def empty_class(draguard_cluster: Any) -> Iterator[tuple[str, str]]:
    """(DeviceClass, driver): the class selects that driver's devices, and it publishes none."""
    kube: Kube = draguard_cluster.kube()
    driver = f"nobody-{uuid.uuid4().hex[:6]}.example.com"
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": driver},
                 "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]}})
    try:
        yield driver, driver
    finally:
        kube.delete("DeviceClass", driver)


@pytest.mark.parametrize("which", ["missing", "selects-nothing"])
def test_conformance_with_nothing_allocatable_exits_2_before_any_check(
    draguard_cluster: Any, empty_class: tuple[str, str], which: str, capsys: pytest.CaptureFixture[str]
) -> None:
    device_class, driver = empty_class
    if which == "missing":
        device_class = "no-such-class.example.com"
    start = time.monotonic()
    code = main(["conformance", "--kubeconfig", str(draguard_cluster.kubeconfig), "--driver", driver,
                 "--device-class", device_class, "--profile", "core"])
    out = capsys.readouterr()
    assert code == 2, out.out
    assert f"--device-class {device_class}: nothing can be allocated: " in out.err
    assert ("no DeviceClass" if which == "missing" else "no device published for DeviceClass") in out.err
    assert "PASS" not in out.out and "FAIL" not in out.out  # no check started
    assert time.monotonic() - start < 20


def test_the_suite_skips_every_check_that_would_create_claims_naming_the_cause(
    draguard_cluster: Any, empty_class: tuple[str, str]
) -> None:
    device_class, driver = empty_class
    start = time.monotonic()
    result = run_conformance(ClusterConfig(kubeconfig=draguard_cluster.kubeconfig, driver=driver,
                                           device_class=device_class, profiles=("core", "sharing")))
    took = time.monotonic() - start
    statuses = {c.id: (c.status, c.reason) for c in result.checks}
    assert statuses.pop("conformance.core.driver-publishes")[0] == "failed"
    assert statuses and all(s == "skipped" and r.startswith("nothing can be allocated: no device published")
                            for s, r in statuses.values()), statuses
    assert took < 30  # used to wait --wait-timeout (60 s) for each pod
