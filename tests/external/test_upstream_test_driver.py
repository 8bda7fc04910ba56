"""A real DRA driver written by others on a fake node: the upstream test driver
(k8s.io/kubernetes/test/e2e/dra/test-driver, standing in for dra-example-driver, which the module proxy
refuses) runs as a plain process, publishes its slice, and is prepared and unprepared by the fake node."""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.cli.main import main
from draguard.harness.driver.external import (
    TEST_DRIVER_NAME,
    ExternalPluginProcess,
    delete_published_slices,
    external_device_class,
    find_test_driver,
    published_slices,
)
from draguard.harness.core.errors import HarnessError
from draguard.harness.nodes import Checkpoint, FakeNodesProcess
from draguard.harness.nodes.node import LEASE_NAMESPACE
from draguard.harness.core.paths import NodeDirs
from support import wait



@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dgx", dir="/tmp"))  # short: unix socket paths are limited to 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def test_driver(draguard_cluster: Any) -> Path:
    bin_dir = draguard_cluster.local.bin_dir if draguard_cluster.local is not None else None
    try:
        return find_test_driver(bin_dir)
    except HarnessError as exc:
        pytest.skip(str(exc))


def test_a_missing_test_driver_binary_is_reported_with_its_path_and_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(HarnessError) as err:
        find_test_driver(tmp_path)
    assert str(tmp_path / "dra-test-driver") in str(err.value)
    assert "draguard cluster build" in str(err.value)


def test_the_cli_rejects_a_bad_node_name_or_a_missing_binary_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    assert main(["external-driver", "--kubeconfig", str(kubeconfig), "--node", "Bad_Name"]) == 2
    assert "node name 'Bad_Name'" in capsys.readouterr().err
    assert main(["external-driver", "--kubeconfig", str(kubeconfig), "--node", "n1", "--bin-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dra-test-driver is missing" in err


def test_an_unreachable_api_server_or_a_missing_node_stops_it_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], draguard_cluster: Any
) -> None:
    fake = tmp_path / "dra-test-driver"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    nowhere = tmp_path / "kc"
    nowhere.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                       "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n")
    assert main(["external-driver", "--kubeconfig", str(nowhere), "--node", "n1", "--bin-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach the API server" in err and str(nowhere) in err, err
    assert main(["external-driver", "--kubeconfig", str(draguard_cluster.kubeconfig), "--node", "dg-no-such-node",
                 "--bin-dir", str(tmp_path), "--root", str(tmp_path / "nodes")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--node dg-no-such-node: no such Node in the cluster" in err, err
    assert not (tmp_path / "nodes").exists()  # nothing was started or written


def test_the_plugin_is_started_with_every_directory_under_the_node_root(tmp_path: Path) -> None:
    fake = tmp_path / "dra-test-driver"
    plugin = ExternalPluginProcess(tmp_path / "kc", "n1", root=tmp_path / "nodes", binary=fake, devices=2)
    dirs = NodeDirs(tmp_path / "nodes", "n1")
    assert plugin.argv[0] == str(fake)
    for flag in (f"--plugin-registration-path={dirs.registry}", f"--datadir={dirs.plugins}", f"--cdi-dir={dirs.cdi}",
                 "--node-name=n1", "--num-devices=2", f"--drivername={TEST_DRIVER_NAME}"):
        assert flag in plugin.argv
    assert plugin.registration_socket == dirs.registry / f"{TEST_DRIVER_NAME}-reg.sock"
    assert plugin.dra_socket == dirs.plugins / TEST_DRIVER_NAME / "dra.sock"


@pytest.mark.cluster
def test_a_pod_claiming_a_test_driver_device_runs_with_its_cdi_spec_and_leaves_nothing_prepared_after_deletion(
    draguard_cluster: Any, draguard_namespace: str, root: Path, test_driver: Path
) -> None:
    kube, ns = draguard_cluster.kube(), draguard_namespace
    node = f"fn-{uuid.uuid4().hex[:8]}"
    cls = f"{node}-test"
    dirs = NodeDirs(root, node)
    nodes = FakeNodesProcess(draguard_cluster.kubeconfig, [node], root=root, run_label=draguard_cluster.run_id,
                             log=root / "nodes.log", extra_args=["--backoff-max", "1"])
    driver = ExternalPluginProcess(draguard_cluster.kubeconfig, node, root=root, devices=2, binary=test_driver)
    try:
        nodes.start()  # first: the driver's slice is owned by the Node object
        driver.start()
        (slice_,) = wait(lambda: published_slices(kube, node), "the driver to publish its slice")
        assert [d["name"] for d in slice_["spec"]["devices"]] == ["device-00", "device-01"]
        assert slice_["metadata"]["ownerReferences"][0]["kind"] == "Node"
        kube.create(external_device_class(cls))
        kube.create({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "dev", "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": cls}}]}}},
        })
        kube.create({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "dev"}]}}],
                "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": "dev"}],
            },
        })

        def phase() -> str | None:
            pod = kube.get("Pod", "p", ns)
            return pod.get("status", {}).get("phase") if pod else None

        wait(lambda: phase() == "Running", "the pod to run on the test driver's device")
        (status,) = kube.get("Pod", "p", ns)["status"]["resourceClaimStatuses"]
        claim = kube.get("ResourceClaim", status["resourceClaimName"], ns)
        uid = claim["metadata"]["uid"]
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"]) == (TEST_DRIVER_NAME, node)

        spec_file = dirs.cdi / f"{TEST_DRIVER_NAME}-{uid}-req.json"
        spec = json.loads(spec_file.read_text())
        cdi_id = f"{TEST_DRIVER_NAME}/test=claim-{uid}-req"
        assert spec["kind"] == f"{TEST_DRIVER_NAME}/test"
        assert [d["name"] for d in spec["devices"]] == [f"claim-{uid}-req"]
        assert driver.prepared_claims() == {uid}
        kept = Checkpoint.read(dirs.base / "dra_manager_state.json")
        assert kept[uid]["prepared"], "the fake node recorded the claim as prepared"
        assert cdi_id in json.dumps(kept[uid]["drivers"][TEST_DRIVER_NAME]), "the node kept the CDI id the driver returned"

        kube.delete("Pod", "p", ns)
        wait(lambda: kube.get("Pod", "p", ns) is None, "the pod to go")
        wait(lambda: kube.get("ResourceClaim", claim["metadata"]["name"], ns) is None, "the claim to go")
        assert driver.prepared_claims() == set() and not spec_file.exists()
        assert Checkpoint.read(dirs.base / "dra_manager_state.json") == {}
        assert driver.alive, f"the driver died:\n{driver.log_tail()}"
    finally:
        for pod in kube.items("Pod", ns):
            kube.delete("Pod", pod["metadata"]["name"], ns, grace_seconds=0)
        driver.stop()
        nodes.stop()
        delete_published_slices(kube, node)
        kube.delete("DeviceClass", cls)
        kube.delete("Node", node)
        kube.delete("Lease", node, LEASE_NAMESPACE)
    assert not driver.registration_socket.exists(), "a clean stop removes the registration socket"


def test_its_api_rate_limit_is_its_own_unless_raised_and_is_given_before_the_subcommand(tmp_path: Path) -> None:
    fake = tmp_path / "dra-test-driver"
    plain = ExternalPluginProcess(tmp_path / "kc", "n1", root=tmp_path / "nodes", binary=fake)
    assert not [a for a in plain.argv if a.startswith("--kube-api-")]  # the driver's defaults (50/s, bursts of 100)
    raised = ExternalPluginProcess(tmp_path / "kc", "n1", root=tmp_path / "nodes", binary=fake,
                                   kube_api_qps=1000, kube_api_burst=2000)  # fmt: skip
    sub = raised.argv.index("kubelet-plugin")  # global flags of the test driver's root command
    assert raised.argv.index("--kube-api-qps=1000") < sub and raised.argv.index("--kube-api-burst=2000") < sub
