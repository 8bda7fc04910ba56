"""``draguard load`` checks before it starts that its claims can be allocated at all: a DeviceClass that
does not exist, or one no published device matches, is exit 2 at once with the cause (it used to wait
--op-timeout for each operation and report "fell behind"). Against the real local control plane."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from draguard.harness.cluster.preflight import allocatable
from draguard.harness.kube import Kube

pytestmark = pytest.mark.cluster


def _load(kubeconfig: Any, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "draguard.cli.main", "load", "--kubeconfig", str(kubeconfig),
                           "--rate", "2", "--duration", "5s", "--report-dir", "/tmp/dg-load-preflight", *args],
                          capture_output=True, text=True, timeout=120)
    return done, time.monotonic() - start


@pytest.fixture
def device_class(draguard_cluster: Any) -> Iterator[str]:
    """A DeviceClass whose selector matches the devices of one driver only (none published at first)."""
    kube: Kube = draguard_cluster.kube()
    run = uuid.uuid4().hex[:6]
    name, driver = f"preflight-{run}.example.com", f"preflight-{run}.example.com"
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                 "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]}})
    try:
        yield name
    finally:
        kube.delete("DeviceClass", name)
        for s in kube.items("ResourceSlice"):
            if s["spec"].get("driver") == driver:
                kube.delete("ResourceSlice", s["metadata"]["name"])


def test_load_on_a_device_class_that_does_not_exist_says_nothing_can_be_allocated(draguard_cluster: Any) -> None:
    done, took = _load(draguard_cluster.kubeconfig, "--device-class", "no-such-class.example.com")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "--device-class no-such-class.example.com: nothing can be allocated: no DeviceClass" in done.stderr
    assert "Traceback" not in done.stderr and "fell behind" not in done.stdout + done.stderr
    assert took < 30


def test_load_on_a_class_no_published_device_matches_says_so_at_once(draguard_cluster: Any, device_class: str) -> None:
    done, took = _load(draguard_cluster.kubeconfig, "--device-class", device_class)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"nothing can be allocated: no device published for DeviceClass {device_class}" in done.stderr
    assert took < 30


def test_a_published_device_the_class_selects_is_found(draguard_cluster: Any, device_class: str) -> None:
    kube: Kube = draguard_cluster.kube()
    assert allocatable(kube, device_class).problem
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                 "metadata": {"name": f"{device_class}-slice"},
                 "spec": {"driver": device_class, "allNodes": True, "pool": {"name": "p", "generation": 1,
                                                                             "resourceSliceCount": 1},
                          "devices": [{"name": "d0"}, {"name": "d1"}]}})
    got = allocatable(kube, device_class)
    assert got.problem == "" and got.devices == (f"{device_class}/p/d0", f"{device_class}/p/d1")
