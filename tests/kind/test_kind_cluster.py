"""A kind cluster on the offline node image: 1 control plane + 2 workers Ready with a real kubelet and
containerd, the node image reused from the cache, a pod from a locally built image running to completion
on a worker, and ``cluster down`` leaving no container, bridge, nftables table or dockerd behind.

The tests share one cluster (``kind_cluster``, session-scoped) and run in file order; the last one brings
it down and checks the host."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from draguard.harness.cluster import binaries as bins
from draguard.harness.cluster.kind import components, engine as engine_mod, hostlog
from draguard.harness.cluster.kind.cluster import CLUSTER_LABEL, KindCluster, ensure_node_image
from draguard.harness.cluster.kind.image import busybox_image
from draguard.harness.cluster.kind.components import CONTAINERD_VERSION
from draguard.harness.kube import RUN_LABEL

pytestmark = pytest.mark.timeout(1800)


def _ready(node: dict) -> bool:  # type: ignore[type-arg]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])


def test_nodes_ready_with_a_real_kubelet_and_containerd(kind_cluster: KindCluster) -> None:
    nodes = kind_cluster.kube().items("Node")
    assert len(nodes) == 3 and all(_ready(n) for n in nodes), [n["metadata"]["name"] for n in nodes]
    control = [n for n in nodes if "node-role.kubernetes.io/control-plane" in n["metadata"].get("labels", {})]
    assert len(control) == 1
    for n in nodes:
        info = n["status"]["nodeInfo"]
        assert info["kubeletVersion"] == bins.K8S_VERSION
        assert info["containerRuntimeVersion"] == f"containerd://{CONTAINERD_VERSION.lstrip('v')}"
    pods = kind_cluster.kube().items("Pod", namespace="kube-system")
    running = {p["metadata"]["name"].rsplit("-", 1)[0] for p in pods if p["status"].get("phase") == "Running"}
    for component in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert f"{component}-{kind_cluster.kind_name}-control" in running, sorted(running)
    proxies = [p for p in pods if p["metadata"]["name"].startswith("kube-proxy-")]
    assert len(proxies) == 3


def test_node_image_reused_from_the_cache(kind_cluster: KindCluster) -> None:
    eng = engine_mod.find([], start=False)
    t0 = time.monotonic()
    tag, stages = ensure_node_image(eng, progress=lambda s: None)
    assert stages == {} and time.monotonic() - t0 < 30
    assert tag.startswith(f"draguard.dev/kind-node:{bins.K8S_VERSION}-")
    cli = subprocess.run([sys.executable, "-m", "draguard.cli", "cluster", "kind-image"], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and cli.stdout.strip() == tag, cli.stderr


def test_pod_from_a_local_image_runs_to_completion(kind_cluster: KindCluster, tmp_path: Path) -> None:
    tag = "draguard.dev/busybox:test"
    kind_cluster.load_image_archive(busybox_image(tag, tmp_path / "busybox.tar"))
    kube = kind_cluster.kube()
    run = f"kind-{int(time.time())}"
    ns = f"draguard-{run}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {RUN_LABEL: run}}})
    try:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hello", "namespace": ns, "labels": {RUN_LABEL: run}},
               "spec": {"restartPolicy": "Never", "nodeName": f"{kind_cluster.kind_name}-worker",
                        "containers": [{"name": "c", "image": tag, "imagePullPolicy": "Never",
                                        "command": ["sh", "-c", "echo hello from $(hostname) on a kind node"]}]}}
        kube.create(pod, namespace=ns)
        deadline = time.monotonic() + 180
        phase = None
        while time.monotonic() < deadline:
            got = kube.get("Pod", "hello", ns)
            phase = (got or {}).get("status", {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                break
            time.sleep(1)
        assert phase == "Succeeded", got
        kubectl = components.ensure("kubernetes").path("kubectl")
        logs = subprocess.run([str(kubectl), "--kubeconfig", str(kind_cluster.kubeconfig), "logs", "-n", ns, "hello"],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert logs.stdout.strip() == "hello from hello on a kind node", logs.stderr
    finally:
        kube.delete("Namespace", ns)


def test_down_leaves_nothing_behind(kind_cluster: KindCluster) -> None:
    private = engine_mod.PrivateDockerd()
    eng = engine_mod.find([], start=False)
    entries = private.hostlog.entries() if eng.private else []
    before = {e["kind"]: e for e in entries}
    kind_name = kind_cluster.kind_name
    assert eng.containers(f"{CLUSTER_LABEL}={kind_name}"), "the cluster's node containers should exist before down"
    others = [c for c in (kind_cluster.dir.parent.iterdir() if kind_cluster.dir.parent.is_dir() else []) if c != kind_cluster.dir]
    kind_cluster.down()
    assert not kind_cluster.dir.exists()
    if not eng.private:
        assert eng.containers(f"{CLUSTER_LABEL}={kind_name}") == []
        return
    if others:
        pytest.skip(f"other kind clusters still run on the private dockerd ({others}): it stays up")
    assert private.pid() is None and not private.socket.exists()
    assert hostlog.processes_with(str(private.exec_root)) == []
    assert not private.exec_root.exists()
    assert hostlog.bridges() == before["links"]["before"]
    assert hostlog.nft_tables() == before["nft"]["before"]
    assert hostlog.sysctl_read("net.ipv4.ip_forward") == before["sysctl"]["old"]
    if "dir" in before:
        assert not Path(before["dir"]["path"]).exists()
    assert not private.hostlog.path.exists()
