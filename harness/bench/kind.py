"""``draguard bench kind``: the offline kind node image and ``kind create`` on this machine.

Measured, in order:

- **cold image** (with ``DRAGUARD_BENCH_KIND_COLD=1``): the node image from nothing draguard cached (no Debian rootfs, no node rootfs, no
  kind/containerd/CNI/crictl/kubelet binaries in draguard's cache, no image in the engine): debootstrap, apt
  in the chroot, the Go builds (Go's own build cache is left as it is, and said so in the result), the
  assembly and ``docker import`` (target: under 15 minutes on 2 cores);
- **cached import**: the image again with the node rootfs cached but the engine's image removed;
- **warm image**: the image already in the engine;
- **kind create**: 1 control plane + ``workers`` workers on the warm image until every node is Ready, ``repeat``
  times (target: under 60 s).

Talks to: :mod:`draguard.harness.cluster.kind`.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

from draguard.harness.cluster import binaries as bins
from draguard.harness.cluster.kind import components, engine as engine_mod, image as image_mod, quirks
from draguard.harness.cluster.kind.cluster import KindCluster, ensure_node_image, list_kind_clusters

__all__ = ["bench_kind"]

Progress = Callable[[str], None]


def _go_cache_note() -> str:
    go = shutil.which("go")
    if go is None:
        return "no go"
    out = subprocess.run([go, "env", "GOCACHE"], capture_output=True, text=True, check=False).stdout.strip()
    return f"Go build cache {out} kept (warm from the control plane's build)"


def bench_kind(repeat: int, progress: Progress, workers: int = 2, cold: bool | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"unit": "s", "workers": workers}
    if cold is None:  # the cold build throws draguard's kind caches away first: only when asked for
        cold = os.environ.get("DRAGUARD_BENCH_KIND_COLD") == "1"
        if cold:
            result["environment"] = {"DRAGUARD_BENCH_KIND_COLD": "1"}
    host_quirks = quirks.detect(offline_image=True)
    result["quirks"] = [q.name for q in host_quirks]
    eng = engine_mod.find(host_quirks, progress=progress)
    try:
        node = image_mod.NodeImage(image_mod.node_image_key())
        if cold:
            if eng.has_image(node.tag):
                eng.run(["rmi", "-f", node.tag])
            for stale in image_mod.kind_dir().glob("*.tar"):
                stale.unlink()
            shutil.rmtree(image_mod.kind_dir() / "bin", ignore_errors=True)
            t0 = time.monotonic()
            _, stages = ensure_node_image(eng, progress)
            result["image_cold_s"] = round(time.monotonic() - t0, 1)
            result["image_cold_stages"] = stages
            result["image_cold_note"] = _go_cache_note()
            result["image_cold_met"] = result["image_cold_s"] < 15 * 60
            progress(f"kind image cold: {result['image_cold_s']}s")
        if eng.has_image(node.tag):
            eng.run(["rmi", "-f", node.tag])
        t0 = time.monotonic()
        ensure_node_image(eng, progress)
        result["image_cached_import_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        ensure_node_image(eng, progress)
        result["image_warm_s"] = round(time.monotonic() - t0, 2)
        progress(f"kind image: import from the cached rootfs {result['image_cached_import_s']}s, warm {result['image_warm_s']}s")
        creates, ready = [], []
        for i in range(repeat):
            cluster = KindCluster(f"bench-{os.getpid()}-{i}", workers=workers, progress=lambda s: None)
            try:
                cluster.up()
                creates.append(cluster.timings["kind_create_s"])
                ready.append(round(cluster.timings["kind_create_s"] + cluster.timings["nodes_ready_s"], 1))
            finally:
                cluster.down()
            progress(f"kind create 1+{workers} #{i + 1}: {creates[-1]}s, all nodes Ready at {ready[-1]}s")
        result.update({"kind_create_samples": creates, "kind_create_median": round(statistics.median(creates), 1),
                       "nodes_ready_samples": ready, "median": round(statistics.median(ready), 1),
                       "target": "node image cold < 15 min on 2 cores; kind create 1+2 until Ready < 60 s warm",
                       "met": statistics.median(ready) < 60 and result.get("image_cold_met", True)})
        result["versions"] = {"kubernetes": bins.K8S_VERSION, "kind": components.KIND_VERSION,
                              "containerd": components.CONTAINERD_VERSION, "cni": components.CNI_PLUGINS_VERSION,
                              "crictl": components.CRICTL_VERSION, "go": components.go_version(), "debian": image_mod.DEBIAN_SUITE}
    finally:
        if eng.private and not list_kind_clusters():
            engine_mod.PrivateDockerd().stop(progress)
    return result
