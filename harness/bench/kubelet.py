"""Benchmark hook for ``draguard bench kubelet``: the hollow DRA kubelet beside the fake agent.

In one local cluster, with the fake driver on both: one node run by a hollow kubelet and one by the
fake agent. Reported: the kubelet's start-up time (process start to Node Ready) and resident memory
once idle, and for each agent the time from a pod's bind (``spec.nodeName`` seen) to ``Running``
(phase seen), for a pod with one claim, measured alternately so that machine noise hits both alike.
Talks to: the local backend, the kubelet and fake-agent processes, the fake driver processes.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from draguard.harness.cluster.local import LocalCluster
from draguard.harness.cluster.pki import Pki
from draguard.harness.driver.process import FakeDriverProcess
from draguard.harness.kube import Kube, Obj
from draguard.harness.nodes.process import FakeNodesProcess
from draguard.harness.kubelet.process import HollowKubelet

__all__ = ["kubelet_vs_fake", "rss_mb"]

Progress = Callable[[str], None]
DRIVER = "gpu.draguard.dev"


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MiB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _claim_pod(name: str, namespace: str, node: str) -> list[Obj]:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": namespace},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}}
    return [claim, pod]


def _bind_to_running(kube: Kube, namespace: str, name: str, node: str, timeout: float = 120.0) -> float:
    """Seconds from the pod's binding to its Running, as a watch delivers the two changes (a poll every
    50 ms saw both at once on the fake agent, whose pods run within milliseconds: 0.0 s)."""
    selector = f"metadata.name={name}"
    _, rv = kube.list("Pod", namespace, field_selector=selector)
    stop = threading.Event()
    timer = threading.Timer(timeout, stop.set)
    timer.start()
    try:
        for obj in _claim_pod(name, namespace, node):
            kube.create(obj)
        bound: float | None = None
        for kind, pod in kube.watch("Pod", namespace, resource_version=rv, field_selector=selector,
                                    timeout_seconds=int(timeout) + 1, stop=stop):  # fmt: skip
            now = time.monotonic()
            if kind not in ("ADDED", "MODIFIED"):
                continue
            if bound is None and (pod.get("spec") or {}).get("nodeName"):
                bound = now
            if bound is not None and (pod.get("status") or {}).get("phase") == "Running":
                return now - bound
    finally:
        timer.cancel()
        stop.set()
    raise TimeoutError(f"pod {name} on {node} not Running after {timeout:.0f}s")


def kubelet_vs_fake(repeat: int, progress: Progress) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    kubelet_node, fake_node = f"kl-{run}", f"fk-{run}"
    with tempfile.TemporaryDirectory(prefix="dgkb", dir="/tmp") as tmp, LocalCluster(f"bench-kubelet-{run}") as cluster:
        root, kube = Path(tmp), cluster.kube()
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                     "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})
        kube.create_namespace(f"bench-{run}", {})
        kube.wait_namespace_ready(f"bench-{run}")
        kubelet = HollowKubelet(Pki(cluster.dir / "pki"), cluster.server, kubelet_node, root, admin=kube)
        t0 = time.monotonic()
        kubelet.start()
        start_s = time.monotonic() - t0
        assert kubelet.pid is not None
        fake = FakeNodesProcess(cluster.kubeconfig, [fake_node], root=root).start()
        drivers = [FakeDriverProcess(cluster.kubeconfig, n, root=root, devices=8 * repeat).start()
                   for n in (kubelet_node, fake_node)]
        try:
            time.sleep(10)  # idle: the kubelet's steady state after registration
            idle_mb = rss_mb(kubelet.pid)
            samples: dict[str, list[float]] = {"kubelet": [], "fake": []}
            for i in range(repeat):
                for agent, node in (("kubelet", kubelet_node), ("fake", fake_node)):
                    samples[agent].append(_bind_to_running(kube, f"bench-{run}", f"{agent}-{i}", node))
                progress(f"kubelet #{i + 1}: bind->Running kubelet {samples['kubelet'][-1]:.2f}s, "
                         f"fake {samples['fake'][-1]:.2f}s")
            busy_mb = rss_mb(kubelet.pid)
        finally:
            for d in drivers:
                d.stop()
            fake.stop()
            kubelet.stop()
    med = {a: round(sorted(s)[len(s) // 2], 3) for a, s in samples.items()}
    return {"unit": "s", "kubelet_start_s": round(start_s, 2), "kubelet_rss_idle_mb": idle_mb,
            "kubelet_rss_after_pods_mb": busy_mb, "bind_to_running_median": med,
            "samples": {a: [round(x, 3) for x in s] for a, s in samples.items()},
            "note": json.dumps({"pods": repeat, "per_agent": "alternating, one claim each"})}
