"""A kind cluster on the offline node image: 1 control plane + 2 workers Ready with a real kubelet and
containerd, the node image reused from the cache, a pod from a locally built image running to completion
on a worker, and ``cluster down`` leaving no container, bridge, nftables table or dockerd behind.

The tests share one cluster (``kind_cluster``, session-scoped) and run in file order; the last one brings
it down and checks the host."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from draguard.harness.cluster import binaries as bins
from draguard.harness.cluster.kind import components, engine as engine_mod, hostlog
from draguard.harness.cluster.kind.cluster import CLUSTER_LABEL, KindCluster, ensure_node_image, list_kind_clusters
from draguard.harness.cluster.kind.image import busybox_image, upstream_driver_image
from draguard.harness.cluster.kind.components import CONTAINERD_VERSION
from draguard.harness.core.errors import UsageError
from draguard.harness.kube import RUN_LABEL, Kind

pytestmark = pytest.mark.timeout(3600)  # the first test's setup builds the node image cold in CI: up to ~35 min on 2 busy cores

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
TEST_DRIVER = "test-driver.cdi.k8s.io"
DAEMONSET = Kind("DaemonSet", "apps", "v1", "daemonsets", True)


def _kubectl(cluster: KindCluster, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    kubectl = components.ensure("kubernetes").path("kubectl")
    return subprocess.run([str(kubectl), "--kubeconfig", str(cluster.kubeconfig), *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def _wait(what: str, check, timeout: float = 180.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(1)
    raise AssertionError(f"{what} not reached in {timeout:.0f}s (last: {last!r})")


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

    def coredns_ready() -> list[str]:
        dns = [p for p in kind_cluster.kube().items("Pod", namespace="kube-system", label_selector="k8s-app=kube-dns")]
        ready = [p["metadata"]["name"] for p in dns
                 if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))]
        return ready if len(ready) == len(dns) == 2 else []

    _wait("CoreDNS (built from its Go module) Ready", coredns_ready, timeout=120)


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


def test_upstream_test_driver_as_a_daemonset_prepares_a_claim(kind_cluster: KindCluster, tmp_path: Path) -> None:
    """deploy/dra-test-driver.yaml on real kubelets: slices per node, a claim allocated and prepared, and
    containerd injecting the driver's CDI edits into the container (its environment shows them)."""
    busybox = "draguard.dev/busybox:test"
    tag, archive = upstream_driver_image(tmp_path / "dra-test-driver.tar", progress=lambda s: None)
    kind_cluster.load_image_archive(archive)
    kind_cluster.load_image_archive(busybox_image(busybox, tmp_path / "busybox.tar"))
    applied = _kubectl(kind_cluster, "apply", "-f", str(DEPLOY / "dra-test-driver.yaml"))
    assert applied.returncode == 0, applied.stderr
    kube = kind_cluster.kube()
    run = f"kind-dra-{int(time.time())}"
    ns = f"draguard-{run}"
    try:
        workers = sorted(n["metadata"]["name"] for n in kube.items("Node") if "node-role.kubernetes.io/control-plane" not in n["metadata"]["labels"])

        def daemonset_ready() -> bool:
            ds = kube.get(DAEMONSET, "dra-test-driver", "draguard-system") or {}
            st = ds.get("status", {})
            return st.get("desiredNumberScheduled", 0) >= len(workers) and st.get("numberReady") == st.get("desiredNumberScheduled")

        _wait("the test driver's DaemonSet Ready on every worker", daemonset_ready)
        slices = _wait("a ResourceSlice per worker", lambda: (lambda got: got if set(workers) <= got else None)(
            {s["spec"]["nodeName"] for s in kube.items("ResourceSlice") if s["spec"]["driver"] == TEST_DRIVER}))
        assert set(workers) <= slices
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {RUN_LABEL: run}}})
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": "gpu", "namespace": ns, "labels": {RUN_LABEL: run}},
                     "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "draguard-test-driver"}}]}}},
                    namespace=ns)  # fmt: skip
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "uses-gpu", "namespace": ns, "labels": {RUN_LABEL: run}},
                     "spec": {"restartPolicy": "Never", "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
                              "containers": [{"name": "c", "image": busybox, "imagePullPolicy": "Never",
                                              "command": ["sh", "-c", "env | grep '^claim_' | sort; sleep 8"],
                                              "resources": {"claims": [{"name": "gpu"}]}}]}}, namespace=ns)  # fmt: skip
        running = _wait("the pod with a claim to run", lambda: (lambda p: p if p.get("status", {}).get("phase") == "Running" else None)(
            kube.get("Pod", "uses-gpu", ns) or {}))
        node = running["spec"]["nodeName"]
        claim = kube.get("ResourceClaim", "gpu", ns) or {}
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [(r["driver"], r["pool"], r["request"]) for r in results] == [(TEST_DRIVER, node, "req-0")]
        assert [r["name"] for r in claim["status"]["reservedFor"]] == ["uses-gpu"]
        engine = engine_mod.find([], start=False)
        spec = f"{TEST_DRIVER}-{claim['metadata']['uid']}-req-0.json"

        def cdi_specs() -> list[str]:
            return engine.run(["exec", node, "ls", "/var/run/cdi"]).stdout.split()

        assert spec in cdi_specs()  # written by the driver on prepare, read by containerd
        pod = _wait("the pod with a claim to finish", lambda: (lambda p: p if p.get("status", {}).get("phase") in ("Succeeded", "Failed") else None)(
            kube.get("Pod", "uses-gpu", ns) or {}))
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        logs = _kubectl(kind_cluster, "logs", "-n", ns, "uses-gpu")
        assert logs.stdout.split() == ["claim_gpu_req_0=true"], logs.stdout + logs.stderr  # the CDI edit, injected
        _wait("the CDI spec removed on unprepare", lambda: spec not in cdi_specs(), timeout=90)
        _wait("the claim deallocated", lambda: not (kube.get("ResourceClaim", "gpu", ns) or {}).get("status", {}).get("allocation"), timeout=90)
    finally:
        kube.delete("Namespace", ns)
        _kubectl(kind_cluster, "delete", "--wait=false", "-f", str(DEPLOY / "dra-test-driver.yaml"))


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
    ruleset = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True).stdout
    assert "DOCKER" not in ruleset and " br-" not in ruleset
    for table in set(hostlog.nft_tables()) - set(before["nft"]["before"]):  # another program's rules, added meanwhile
        assert not hostlog._only_empty_base_chains(table), f"nft table {table} left behind"
    assert hostlog.forward_policy() in (None, before["forward-policy"]["old"])
    assert [(e["key"], hostlog.sysctl_read(e["key"])) for e in entries if e["kind"] == "sysctl"] == [
        (e["key"], e["old"]) for e in entries if e["kind"] == "sysctl"]  # ip_forward, and the inotify limits where raised
    assert hostlog._cgroup_dirs(engine_mod.CGROUP_PARENT) == []
    if "dir" in before:
        assert not Path(before["dir"]["path"]).exists()
    assert not private.hostlog.path.exists()


def test_down_after_the_private_engine_was_killed(kind_cluster: KindCluster) -> None:
    """SIGKILL the private dockerd, its containerd and shims under a running node: the node's systemd, kubelet
    and pods live on in their cgroup; ``cluster down`` from a new process still leaves nothing behind."""
    try:
        running = engine_mod.find([], start=False)
    except UsageError:  # nothing runs: this cluster gets the private dockerd
        running = None
    if running is not None and not running.private:
        pytest.skip(f"kind runs on an existing {running.provider} here, not on draguard's private dockerd")
    if list_kind_clusters():  # someone else's clusters: killing the private dockerd would kill their nodes
        pytest.skip(f"other kind clusters run on the private dockerd ({', '.join(list_kind_clusters())})")
    cluster = KindCluster(f"k{os.getpid()}", workers=0, progress=lambda s: None)
    cluster.up(timeout=600)
    private = engine_mod.PrivateDockerd()
    entries = private.hostlog.entries()
    before = {e["kind"]: e for e in entries}
    node_procs = [p for root in hostlog._cgroup_dirs(engine_mod.CGROUP_PARENT) for p in root.rglob("cgroup.procs")]
    assert any(f.read_text().split() for f in node_procs), "the node's processes should be in the engine's cgroup"
    for pid in [private.pid(), *hostlog.processes_with(str(private.exec_root))]:
        if pid:
            os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    assert not private.running()
    done = subprocess.run([sys.executable, "-m", "draguard.cli", "cluster", "down", "--backend", "kind", "--name", cluster.name],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "left in cgroup" in done.stderr
    assert hostlog._cgroup_dirs(engine_mod.CGROUP_PARENT) == []
    assert hostlog.processes_with(str(private.exec_root)) == [] and not private.exec_root.exists()
    assert hostlog.bridges() == before["links"]["before"]
    assert "DOCKER" not in subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True).stdout
    assert [(e["key"], hostlog.sysctl_read(e["key"])) for e in entries if e["kind"] == "sysctl"] == [
        (e["key"], e["old"]) for e in entries if e["kind"] == "sysctl"]  # ip_forward, and the inotify limits where raised
    assert not private.hostlog.path.exists() and not cluster.dir.exists()
    # dockerd restarts the killed node container when it starts again (--restart=on-failure:1): it must not stay.
    from draguard.harness.cluster.kind import quirks

    again = engine_mod.PrivateDockerd()
    try:
        assert again.start(quirks.detect(offline_image=True), progress=lambda s: None).run(["ps", "-aq"]).stdout.split() == []
    finally:
        again.stop(lambda s: None)
