"""A kind cluster run by draguard: 1 control plane + N workers on the offline node image.

:class:`KindCluster` detects the host's quirks (:mod:`.quirks`), finds or starts the container engine
(:mod:`.engine`), builds or reuses the node image (:mod:`.image`), writes kind's ``Cluster`` config with
the quirks' fragments, runs ``kind create cluster`` and waits until every node is Ready. ``down`` deletes
the cluster and, when it was the last one on draguard's private dockerd, stops that dockerd and undoes
its host changes. Its state (kind config, kubeconfig, ``cluster.json``) lives under
``$XDG_STATE_HOME/draguard/kind/clusters/<name>/``. Talks to: kind, the engine, the API server.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from draguard.harness.cluster import binaries as bins
from draguard.harness.cluster.kind import components, engine as engine_mod, image as image_mod, quirks as quirks_mod
from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.core.paths import state_dir
from draguard.harness.kube import Kube

__all__ = ["KindCluster", "KindNodes", "ensure_node_image", "list_kind_clusters", "clusters_root", "CLUSTER_LABEL"]

Progress = Callable[[str], None]
CLUSTER_LABEL = "io.x-k8s.kind.cluster"
"""The label kind puts on every node container (``pkg/cluster/internal/providers/docker``)."""
MAX_WORKERS = 10


def clusters_root() -> Path:
    return state_dir() / "kind" / "clusters"


def list_kind_clusters() -> list[str]:
    """Clusters that are up or coming up (a directory is made before ``kind create`` starts, so that
    another process's ``down`` does not stop the shared private dockerd under it)."""
    root = clusters_root()
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def ensure_node_image(engine: engine_mod.Engine, progress: Progress = print) -> tuple[str, dict[str, float]]:
    """The node image's tag in ``engine``, built or imported if missing, and the time each stage took."""
    times: dict[str, float] = {}
    node = image_mod.NodeImage(image_mod.node_image_key())
    if engine.has_image(node.tag):
        return node.tag, times
    t0 = time.monotonic()
    cached = node.tarball.is_file()
    image_mod.build_node_rootfs(node, progress)
    times["rootfs_s" if not cached else "rootfs_cached_s"] = round(time.monotonic() - t0, 1)
    progress(f"loading the node image {node.tag}")
    t0 = time.monotonic()
    engine.run(["load", "-i", str(node.tarball)], timeout=1200)
    times["import_s"] = round(time.monotonic() - t0, 1)
    if engine.private:  # node images of other versions only fill draguard's own data root
        repo = node.tag.rsplit(":", 1)[0]
        stale = [t for t in engine.run(["images", repo, "--format", "{{.Repository}}:{{.Tag}}"]).stdout.split() if t != node.tag]
        if stale:
            engine.run(["rmi", *stale], check=False)
    for old in image_mod.kind_dir().glob("node-*.tar"):
        if old != node.tarball:
            old.unlink(missing_ok=True)
    return node.tag, times


class KindCluster:
    def __init__(self, name: str = "default", workers: int = 2, progress: Progress = print) -> None:
        if not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?", name):
            raise UsageError(f"cluster name {name!r}: expected lowercase letters, digits and '-', at most 32 characters")
        if not 0 <= workers <= MAX_WORKERS:
            raise UsageError(f"--workers {workers}: expected 0 to {MAX_WORKERS}")
        self.name = name
        self.workers = workers
        self.progress = progress
        self.dir = clusters_root() / name
        self.timings: dict[str, float] = {}

    @property
    def kind_name(self) -> str:
        return f"draguard-{self.name}"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    def kube(self) -> Kube:
        return Kube.from_kubeconfig(self.kubeconfig)

    def _kind(self, engine: engine_mod.Engine, args: list[str], timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        kind = components.ensure("kind", self.progress).path("kind")
        return subprocess.run([str(kind), *args], env=engine.environ(), capture_output=True, text=True, timeout=timeout,
                              check=False)  # fmt: skip

    def config(self, host_quirks: list[quirks_mod.Quirk]) -> dict[str, Any]:
        cfg: dict[str, Any] = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
                               "nodes": [{"role": "control-plane"}] + [{"role": "worker"} for _ in range(self.workers)]}
        cfg.update(quirks_mod.kind_config_fragments(host_quirks))
        return cfg

    def up(self, timeout: float = 300.0) -> KindCluster:
        if (self.dir / "cluster.json").exists():
            raise UsageError(f"kind cluster {self.name!r} is already up (kubeconfig {self.kubeconfig}); `draguard cluster down --backend kind --name {self.name}` first")
        self.dir.mkdir(parents=True, exist_ok=True)
        host_quirks = quirks_mod.detect(offline_image=True)
        for q in host_quirks:
            self.progress(f"host quirk {q.name}: {q.note}")
        t0 = time.monotonic()
        try:
            engine = engine_mod.find(host_quirks, progress=self.progress)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.timings["engine_s"] = round(time.monotonic() - t0, 1)
        if not engine.private and any(q.name == "capabilities" for q in host_quirks):
            self.progress(f"note: {engine.provider} is not draguard's, so its runtime has no capability wrapper; if its "
                          "privileged nodes fail with 'unable to apply caps', set DRAGUARD_KIND_ENGINE=private")
        try:
            t0 = time.monotonic()
            tag, stages = ensure_node_image(engine, self.progress)
            self.timings["image_s"] = round(time.monotonic() - t0, 1)
            self.timings.update(stages)
            self.dir.mkdir(parents=True, exist_ok=True)
            config_path = self.dir / "kind-config.yaml"  # JSON, which is YAML
            config_path.write_text(json.dumps(self.config(host_quirks), indent=2) + "\n")
            self.progress(f"kind create cluster {self.kind_name}: 1 control plane + {self.workers} worker(s)")
            t0 = time.monotonic()
            proc = self._kind(engine, ["create", "cluster", "--name", self.kind_name, "--image", tag, "--config", str(config_path),
                                       "--kubeconfig", str(self.kubeconfig), "--wait", "0s"], timeout=timeout)  # fmt: skip
            self.timings["kind_create_s"] = round(time.monotonic() - t0, 1)
            (self.dir / "kind-create.log").write_text(proc.stdout + proc.stderr)
            if proc.returncode != 0:
                raise HarnessError(f"kind create cluster failed (log {self.dir / 'kind-create.log'}): "
                                   f"{_last_error(proc.stdout + proc.stderr)}")
            (self.dir / "cluster.json").write_text(json.dumps(
                {"name": self.name, "kindName": self.kind_name, "workers": self.workers, "image": tag,
                 "kubernetes": bins.K8S_VERSION, "engine": {"provider": engine.provider, "private": engine.private, **engine.env},
                 "quirks": [{"name": q.name, "note": q.note} for q in host_quirks]}, indent=2) + "\n")
            t0 = time.monotonic()
            self.wait_ready(timeout)
            self.timings["nodes_ready_s"] = round(time.monotonic() - t0, 1)
        except BaseException:
            self._teardown(engine)
            raise
        return self

    def wait_ready(self, timeout: float = 300.0) -> None:
        kube = self.kube()
        deadline = time.monotonic() + timeout
        want = 1 + self.workers
        ready: list[str] = []
        while time.monotonic() < deadline:
            try:
                nodes = kube.items("Node")
            except HarnessError:
                nodes = []
            ready = [n["metadata"]["name"] for n in nodes
                     if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))]
            if len(ready) >= want:
                return
            time.sleep(1.0)
        raise HarnessError(f"kind cluster {self.name}: {len(ready)} of {want} nodes Ready after {timeout:.0f}s")

    @classmethod
    def of_kubeconfig(cls, path: str | Path) -> KindCluster | None:
        """The draguard kind cluster whose kubeconfig ``path`` is, if it is up; else None."""
        try:
            resolved = Path(path).resolve()
            root = clusters_root().resolve()
        except OSError:
            return None
        if resolved.name != "kubeconfig" or resolved.parent.parent != root:
            return None
        cluster = cls(resolved.parent.name, progress=lambda s: None)
        return cluster if (cluster.dir / "cluster.json").exists() else None

    def node_containers(self) -> KindNodes:
        """The cluster's node containers, through the engine it was created with."""
        info = json.loads((self.dir / "cluster.json").read_text())
        recorded = dict(info.get("engine") or {})
        provider = str(recorded.pop("provider", "docker"))
        private = bool(recorded.pop("private", False))
        cli = shutil.which(provider) or provider
        return KindNodes(self.kind_name, engine_mod.Engine(provider, cli, {str(k): str(v) for k, v in recorded.items()}, private))

    def nodes(self) -> list[str]:
        engine = engine_mod.find([], start=False)
        proc = self._kind(engine, ["get", "nodes", "--name", self.kind_name])
        return sorted(proc.stdout.split())

    def load_image_archive(self, archive: Path, nodes: list[str] | None = None) -> None:
        """Load a docker-archive tarball into every node's containerd (``kind load image-archive``)."""
        engine = engine_mod.find([], start=False)
        args = ["load", "image-archive", str(archive), "--name", self.kind_name]
        if nodes:
            args += ["--nodes", ",".join(nodes)]
        proc = self._kind(engine, args)
        if proc.returncode != 0:
            raise HarnessError(f"kind load image-archive {archive.name}: {_last_error(proc.stdout + proc.stderr)}")

    def _teardown(self, engine: engine_mod.Engine) -> list[str]:
        done = []
        proc = self._kind(engine, ["delete", "cluster", "--name", self.kind_name])
        if proc.returncode == 0:
            done.append(f"deleted kind cluster {self.kind_name}")
        shutil.rmtree(self.dir, ignore_errors=True)
        if engine.private and not list_kind_clusters():
            done += engine_mod.PrivateDockerd().stop(self.progress)
        return done

    def down(self) -> list[str]:
        """Delete the cluster; the last one on the private dockerd stops it and undoes its host changes."""
        private = engine_mod.PrivateDockerd()
        if private.running():
            engine = private.engine
        else:
            try:
                engine = engine_mod.find([], start=False)
            except UsageError:  # nothing runs: only host changes of a killed private dockerd may be left
                shutil.rmtree(self.dir, ignore_errors=True)
                return private.stop(self.progress) if private.hostlog.path.exists() else []
        return self._teardown(engine)


def _last_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "ERROR" in line or "error" in line or "failed" in line]
    return (errors or lines or ["(no output)"])[-1][:400]


class KindNodes:
    """The node containers of one kind cluster (kind names each container after its node), as chaos
    reaches them: a command inside a node (its kubelet restarted), a node frozen and thawed."""

    def __init__(self, kind_name: str, engine: engine_mod.Engine) -> None:
        self.kind_name = kind_name
        self.engine = engine

    def names(self) -> list[str]:
        proc = self.engine.run(["ps", "-a", "--filter", f"label={CLUSTER_LABEL}={self.kind_name}", "--format", "{{.Names}}"])
        return sorted(proc.stdout.split())

    def exec(self, node: str, args: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run ``args`` inside ``node``'s container (HarnessError when it fails)."""
        return self.engine.run(["exec", node, *args], timeout=timeout)

    def pause(self, node: str) -> None:
        """Freeze every process of the node (its kubelet, containerd and pods): it stops heartbeating."""
        self.engine.run(["pause", node])

    def unpause(self, node: str) -> None:
        """Thaw a paused node; nothing when it is not paused (so that undoing twice is safe)."""
        state = self.engine.run(["inspect", "--format", "{{.State.Paused}}", node], check=False)
        if state.returncode == 0 and state.stdout.strip() == "true":
            self.engine.run(["unpause", node])

    def undo_args(self, node: str) -> dict[str, object]:
        """What a journal entry needs to thaw ``node`` without this object (``draguard cleanup``)."""
        return {"provider": self.engine.provider, "cli": self.engine.cli, "env": dict(self.engine.env),
                "kindName": self.kind_name, "node": node}

    @classmethod
    def from_undo_args(cls, args: dict[str, object]) -> tuple[KindNodes, str]:
        env = args.get("env") or {}
        engine = engine_mod.Engine(str(args["provider"]), str(args["cli"]),
                                   {str(k): str(v) for k, v in dict(env).items()})  # type: ignore[call-overload]
        return cls(str(args["kindName"]), engine), str(args["node"])

