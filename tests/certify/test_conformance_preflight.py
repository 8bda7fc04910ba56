"""The cluster suite's pre-flight, against the real local control plane: ``draguard conformance`` and
``draguard certify`` with a DeviceClass that does not exist, or that selects no published device, are
exit 2 at once saying that nothing can be allocated (certify before its sanity part starts, writing no
bundle), and so are a ``--namespace`` that does not exist and, for certify's sanity part, a node it
cannot tell; the library (what a vendor's own pytest run
uses) fails ``conformance.core.driver-publishes`` and skips every check that would create claims, with
the cause, without waiting for pods that cannot run."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.cli.main import main
from draguard.conformance.cluster import ClusterConfig, run_conformance
from draguard.harness.core.paths import NodeDirs
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


PRODUCT = ("vendor: Example\nname: GPU\nversion: '1'\ntype: DRA driver\ndescription: d\n"
           "website_url: https://example.com\ndocumentation_url: https://example.com/docs\n"
           "contact_email_address: dra@example.com\ndriver_image: registry.example.com/gpu:1\n")


@pytest.mark.parametrize("which", ["missing", "selects-nothing"])
def test_certify_with_nothing_allocatable_exits_2_before_either_suite(
    draguard_cluster: Any, empty_class: tuple[str, str], which: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """certify ran the sanity suite (minutes, with the driver's sockets) and then a cluster suite whose
    every check could only record that nothing is allocatable, into a bundle; now it is exit 2 at once."""
    device_class, driver = empty_class
    if which == "missing":
        device_class = "no-such-class.example.com"
    (tmp_path / "product.yaml").write_text(PRODUCT)
    start = time.monotonic()
    with socket.socket(socket.AF_UNIX) as listening:  # a socket is there: the sanity suite would start
        listening.bind(str(tmp_path / "reg.sock"))
        code = main(["certify", "--kubeconfig", str(draguard_cluster.kubeconfig), "--driver", driver,
                     "--device-class", device_class, "--product", str(tmp_path / "product.yaml"),
                     "--out", str(tmp_path / "bundle"), "--registration-socket", str(tmp_path / "reg.sock"),
                     "--programme", "ai-conformance"])
    out = capsys.readouterr()
    assert code == 2, out.out
    assert f"--device-class {device_class}: nothing can be allocated: " in out.err
    assert ("no DeviceClass" if which == "missing" else "no device published for DeviceClass") in out.err
    assert "PASS" not in out.out and "FAIL" not in out.out and "SKIP" not in out.out  # no check started
    assert not (tmp_path / "bundle").exists()
    assert time.monotonic() - start < 20


def test_a_namespace_that_does_not_exist_is_exit_2_naming_it(
    make_fleet: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "product.yaml").write_text(PRODUCT)
    with make_fleet(nodes=1) as f:
        common = ["--kubeconfig", str(f.kubeconfig), "--driver", f.driver, "--device-class", f.device_class,
                  "--profile", "core", "--namespace", "no-such-namespace"]
        codes = [main(["conformance", *common]),
                 main(["certify", *common, "--product", str(tmp_path / "product.yaml"), "--out", str(tmp_path / "b")])]
    out = capsys.readouterr()
    assert codes == [2, 2], out.out
    assert out.err.count("--namespace no-such-namespace: no such namespace in the cluster") == 2, out.err
    assert "PASS" not in out.out and not (tmp_path / "b").exists()


def test_certify_with_sockets_and_no_node_needs_the_one_node_the_slices_name(
    make_fleet: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """The driver serves two nodes: which node's sockets were given is not known, so no sanity check
    can claim devices; exit 2 at once asking for --node (the sanity part ran each check into that error)."""
    (tmp_path / "product.yaml").write_text(PRODUCT)
    with make_fleet(nodes=2) as f:
        sock = NodeDirs(f.root, f.nodes[0]).registration_socket(f.driver)
        code = main(["certify", "--kubeconfig", str(f.kubeconfig), "--driver", f.driver, "--device-class",
                     f.device_class, "--profile", "core", "--product", str(tmp_path / "product.yaml"),
                     "--out", str(tmp_path / "b"), "--registration-socket", str(sock)])
    out = capsys.readouterr()
    assert code == 2, out.out
    assert f"publishes slices for several nodes ({', '.join(sorted(f.nodes))}); give --node" in out.err, out.err
    assert "PASS" not in out.out and not (tmp_path / "b").exists()
