"""The hollow DRA kubelet on a real control plane: upstream's kubelet code prepares and unprepares
claims through draguard's fake driver and the upstream test driver, its runtime resolves (or refuses)
their CDI devices, and bad input ends with a clear error and nothing left running."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.harness.cluster.pki import Pki
from draguard.harness.driver.external import TEST_DRIVER_NAME, ExternalPluginProcess, external_device_class, find_test_driver
from draguard.harness.driver.process import FakeDriverProcess
from draguard.harness.core.errors import HarnessError
from draguard.harness.kubelet.process import HollowKubelet, find_kubelet
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs
from support import wait

pytestmark = pytest.mark.cluster


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dgk", dir="/tmp"))  # short: unix socket paths are limited to 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kubelet_binary(draguard_cluster: Any) -> Path:
    if draguard_cluster.local is None:
        pytest.skip("hollow kubelets need the local backend (node credentials come from its CA)")
    try:
        return find_kubelet()
    except HarnessError as exc:
        pytest.fail(f"the hollow kubelet cannot be built: {exc}")


def kubelet_for(cluster: Any, node: str, root: Path, binary: Path, **kw: Any) -> HollowKubelet:
    local = cluster.local
    return HollowKubelet(Pki(local.dir / "pki"), local.server, node, root, admin=cluster.kube(), binary=binary, **kw)


def claim_pod(ns: str, name: str, node: str, device_class: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": ns},
         "spec": {"spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": device_class}}]}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
         "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 1,
                  "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "dev"}]}}],
                  "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": name}]}},
    ]


def phase(kube: Any, ns: str, name: str) -> str | None:
    pod = kube.get("Pod", name, ns)
    return pod.get("status", {}).get("phase") if pod else None


def cleanup_node(kube: Any, node: str, *procs: Any) -> None:
    for p in procs:
        p.stop()
    for s in kube.items("ResourceSlice"):
        if s["spec"].get("nodeName") == node:
            kube.delete("ResourceSlice", s["metadata"]["name"])
    kube.delete("Node", node)


def test_a_claim_is_prepared_by_the_real_kubelet_and_its_cdi_devices_reach_the_container(
    draguard_cluster: Any, draguard_namespace: str, root: Path, kubelet_binary: Path
) -> None:
    kube, ns = draguard_cluster.kube(), draguard_namespace
    node = f"kl-{uuid.uuid4().hex[:6]}"
    kubelet = kubelet_for(draguard_cluster, node, root, kubelet_binary)
    driver = FakeDriverProcess(draguard_cluster.kubeconfig, node, root=root, devices=2)
    cls = f"{node}-gpu"
    try:
        kubelet.start()  # first: it wipes its node's slices when it starts
        assert _cert_subject(kubelet) == f"O=system:nodes,CN=system:node:{node}"
        driver.start()
        kubelet.wait_registered(DEFAULT_DRIVER)
        kube.create({**external_device_class(cls, DEFAULT_DRIVER)})
        for obj in claim_pod(ns, "p", node, cls):
            kube.create(obj)
        wait(lambda: phase(kube, ns, "p") == "Running", "the pod to run on the hollow kubelet", timeout=90)
        claim_name = kube.get("Pod", "p", ns)["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        uid = kube.get("ResourceClaim", claim_name, ns)["metadata"]["uid"]
        assert set(driver.checkpoint().claims) == {uid}, "the driver was asked to prepare the claim"
        assert (NodeDirs(root, node).base / "dra_manager_state").exists(), "the kubelet's DRA checkpoint"
        (record,) = wait(lambda: [c for c in kubelet.containers() if c.pod_name == "p" and c.running], "the container")
        assert record.cdi_devices and all(d.startswith(f"{DEFAULT_DRIVER}/gpu={uid}-") for d in record.cdi_devices)
        assert any(e.startswith(f"DRAGUARD_CLAIM_UID={uid}") for e in record.env), record.env
        kube.delete("Pod", "p", ns)
        wait(lambda: kube.get("Pod", "p", ns) is None, "the pod to go", timeout=60)
        wait(lambda: not driver.checkpoint().claims, "the kubelet to unprepare the claim", timeout=60)
    finally:
        cleanup_node(kube, node, driver, kubelet)
        kube.delete("DeviceClass", cls)
    assert not (NodeDirs(root, node).base / "cri.sock").exists(), "a stopped kubelet removes its runtime socket"


def _cert_subject(kubelet: HollowKubelet) -> str:
    """The subject of the client certificate in the kubelet's kubeconfig."""
    import base64

    from cryptography import x509
    from ruamel.yaml import YAML

    doc = YAML(typ="safe").load(kubelet.kubeconfig.read_text())
    data = base64.b64decode(doc["users"][0]["user"]["client-certificate-data"])
    return x509.load_pem_x509_certificate(data).subject.rfc4514_string()


def test_a_cdi_device_missing_from_the_spec_fails_the_container_as_containerd_would(
    draguard_cluster: Any, draguard_namespace: str, root: Path, kubelet_binary: Path
) -> None:
    kube, ns = draguard_cluster.kube(), draguard_namespace
    node = f"kl-{uuid.uuid4().hex[:6]}"
    kubelet = kubelet_for(draguard_cluster, node, root, kubelet_binary)
    driver = FakeDriverProcess(draguard_cluster.kubeconfig, node, root=root, devices=2, mutant="incomplete-cdi")
    cls = f"{node}-gpu"
    try:
        kubelet.start()
        driver.start()
        kubelet.wait_registered(DEFAULT_DRIVER)
        kube.create(external_device_class(cls, DEFAULT_DRIVER))
        for obj in claim_pod(ns, "p", node, cls):
            kube.create(obj)

        def waiting_reason() -> str:
            pod = kube.get("Pod", "p", ns) or {}
            for cs in pod.get("status", {}).get("containerStatuses", []):
                waiting = cs.get("state", {}).get("waiting") or {}
                if "unresolvable CDI devices" in waiting.get("message", ""):
                    return str(waiting.get("reason"))
            return ""

        assert wait(waiting_reason, "the container to fail on its CDI devices", timeout=90) == "CreateContainerError"
        assert phase(kube, ns, "p") == "Pending"
        assert not [c for c in kubelet.containers() if c.pod_name == "p"], "no container was created"
    finally:
        kube.delete("Pod", "p", ns, grace_seconds=0)
        cleanup_node(kube, node, driver, kubelet)
        kube.delete("DeviceClass", cls)


def test_the_upstream_test_driver_runs_under_the_hollow_kubelet(
    draguard_cluster: Any, draguard_namespace: str, root: Path, kubelet_binary: Path
) -> None:
    kube, ns = draguard_cluster.kube(), draguard_namespace
    node = f"kl-{uuid.uuid4().hex[:6]}"
    kubelet = kubelet_for(draguard_cluster, node, root, kubelet_binary)
    driver = ExternalPluginProcess(draguard_cluster.kubeconfig, node, root=root, devices=2, binary=find_test_driver())
    cls = f"{node}-test"
    try:
        kubelet.start()
        driver.start()
        kubelet.wait_registered(TEST_DRIVER_NAME)
        kube.create(external_device_class(cls))
        for obj in claim_pod(ns, "p", node, cls):
            kube.create(obj)
        wait(lambda: phase(kube, ns, "p") == "Running", "the pod to run on the test driver's device", timeout=90)
        (record,) = wait(lambda: [c for c in kubelet.containers() if c.pod_name == "p"], "the container")
        assert record.cdi_devices and record.cdi_devices[0].startswith(f"{TEST_DRIVER_NAME}/test=claim-")
        assert driver.prepared_claims()
        kube.delete("Pod", "p", ns)
        wait(lambda: not driver.prepared_claims(), "the kubelet to unprepare the claim", timeout=60)
    finally:
        cleanup_node(kube, node, driver, kubelet)
        kube.delete("DeviceClass", cls)


def test_a_registration_socket_that_never_answers_is_reported_with_its_path(
    draguard_cluster: Any, root: Path, kubelet_binary: Path
) -> None:
    kube = draguard_cluster.kube()
    node = f"kl-{uuid.uuid4().hex[:6]}"
    kubelet = kubelet_for(draguard_cluster, node, root, kubelet_binary)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        kubelet.start()
        path = NodeDirs(root, node).registration_socket("silent.example.com")
        silent.bind(str(path))
        silent.listen(8)  # accepts connections, never speaks gRPC
        with pytest.raises(HarnessError) as err:
            kubelet.wait_registered("silent.example.com", timeout=15)
        assert str(path) in str(err.value) and "never answered" in str(err.value)
    finally:
        silent.close()
        cleanup_node(kube, node, kubelet)
    assert not kubelet.alive


def test_a_root_that_cannot_be_written_or_a_kubelet_that_fails_to_start_leaves_nothing_running(
    draguard_cluster: Any, root: Path, kubelet_binary: Path
) -> None:
    blocker = root / "file"
    blocker.write_text("not a directory")
    kubelet = kubelet_for(draguard_cluster, "kl-bad", blocker, kubelet_binary)
    with pytest.raises(HarnessError) as err:
        kubelet.start()
    assert str(blocker) in str(err.value) and "not writable" in str(err.value)
    assert kubelet.pid is None

    broken = kubelet_for(draguard_cluster, "kl-broken", root, kubelet_binary, feature_gates={"NoSuchGate": True})
    with pytest.raises(HarnessError) as err:
        broken.start(timeout=60)
    message = str(err.value)
    assert "exited with code 2" in message and "NoSuchGate" in message, message
    assert broken.pid is not None and not broken.alive
    assert not os.path.exists(NodeDirs(root, "kl-broken").base / "cri.sock")
