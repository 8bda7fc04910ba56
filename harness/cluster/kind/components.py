"""The Go-built pieces of a kind node and of kind itself, each cached under the XDG cache by version.

Every piece is a static binary (``CGO_ENABLED=0``, ``-trimpath``, version ldflags) built with this
machine's Go toolchain from the module proxy, the same way as the control plane in
:mod:`draguard.harness.cluster.binaries`:

- ``kind`` (``sigs.k8s.io/kind``), the cluster tool;
- ``containerd``, ``ctr``, ``containerd-shim-runc-v2`` (``github.com/containerd/containerd/v2``);
- the CNI plugins ``bridge``, ``loopback``, ``host-local``, ``portmap``
  (``github.com/containernetworking/plugins``);
- ``crictl`` (``sigs.k8s.io/cri-tools``);
- ``coredns`` (``github.com/coredns/coredns``), the cluster DNS kubeadm deploys;
- ``kubelet``, ``kubeadm``, ``kubectl``, ``kube-proxy`` from the pinned ``k8s.io/kubernetes`` module,
  built in the control plane's module (``binaries.stage_module``) with its ldflags, so that Go's build
  cache is shared with the control-plane build;
- ``pause``, the pod sandbox's process (``images/pause``, draguard's own).

A cache entry ``$XDG_CACHE_HOME/draguard/kind/bin/<group>-<version>/`` is built in a ``.partial``
directory and renamed into place. Talks to: ``go``, the filesystem.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from draguard.harness.cluster import binaries as bins
from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.core.paths import cache_dir

__all__ = [
    "KIND_VERSION",
    "CONTAINERD_VERSION",
    "CNI_PLUGINS_VERSION",
    "CRICTL_VERSION",
    "COREDNS_VERSION",
    "GROUPS",
    "Group",
    "ensure",
    "ensure_all",
    "go_version",
    "PAUSE_SRC",
]

KIND_VERSION = "v0.33.0"
CONTAINERD_VERSION = "v2.4.2"
CNI_PLUGINS_VERSION = "v1.10.0"
CRICTL_VERSION = "v1.37.0"
COREDNS_VERSION = "v1.14.6"
"""kubeadm v1.37's CoreDNS (``cmd/kubeadm/app/constants``: CoreDNSVersion), the cluster DNS it deploys."""

PAUSE_SRC = Path(__file__).resolve().parent / "pause"
"""The sandbox process's Go source (a ``main`` package with no dependencies)."""

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Group:
    """Binaries built together from one module at one version."""

    name: str
    version: str
    packages: dict[str, str]  # output name -> Go package (with @version for `go install`)
    ldflags: str

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"

    def directory(self) -> Path:
        return cache_dir() / "kind" / "bin" / self.key

    def path(self, binary: str) -> Path:
        return self.directory() / binary


def _at(pkgs: dict[str, str], version: str) -> dict[str, str]:
    return {name: f"{pkg}@{version}" for name, pkg in pkgs.items()}


_CONTAINERD = "github.com/containerd/containerd/v2"
_CNI = "github.com/containernetworking/plugins"

GROUPS: dict[str, Group] = {
    "kind": Group("kind", KIND_VERSION, _at({"kind": "sigs.k8s.io/kind"}, KIND_VERSION), "-s -w"),
    "containerd": Group(
        "containerd", CONTAINERD_VERSION,
        _at({"containerd": f"{_CONTAINERD}/cmd/containerd", "ctr": f"{_CONTAINERD}/cmd/ctr",
             "containerd-shim-runc-v2": f"{_CONTAINERD}/cmd/containerd-shim-runc-v2"}, CONTAINERD_VERSION),
        f"-s -w -X {_CONTAINERD}/version.Version={CONTAINERD_VERSION} -X {_CONTAINERD}/version.Package={_CONTAINERD}"),
    "cni": Group(
        "cni", CNI_PLUGINS_VERSION,
        _at({"bridge": f"{_CNI}/plugins/main/bridge", "loopback": f"{_CNI}/plugins/main/loopback",
             "host-local": f"{_CNI}/plugins/ipam/host-local", "portmap": f"{_CNI}/plugins/meta/portmap"},
            CNI_PLUGINS_VERSION),
        f"-s -w -X {_CNI}/pkg/utils/buildversion.BuildVersion={CNI_PLUGINS_VERSION}"),
    "coredns": Group("coredns", COREDNS_VERSION, _at({"coredns": "github.com/coredns/coredns"}, COREDNS_VERSION),
                     f"-s -w -X github.com/coredns/coredns/coremain.GitCommit={COREDNS_VERSION}"),
    "crictl": Group("crictl", CRICTL_VERSION, _at({"crictl": "sigs.k8s.io/cri-tools/cmd/crictl"}, CRICTL_VERSION),
                    f"-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version={CRICTL_VERSION}"),
    # Built inside the control plane's module (no @version): same module, same flags, same build cache.
    "kubernetes": Group(
        "kubernetes", bins.K8S_VERSION,
        {"kubelet": "k8s.io/kubernetes/cmd/kubelet", "kubeadm": "k8s.io/kubernetes/cmd/kubeadm",
         "kubectl": "k8s.io/kubernetes/cmd/kubectl", "kube-proxy": "k8s.io/kubernetes/cmd/kube-proxy"},
        bins._ldflags(bins.K8S_VERSION)),
    "pause": Group("pause", "", {"pause": "pause.go"}, "-s -w"),
}


def _pause_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(PAUSE_SRC.glob("*")):
        if p.is_file() and p.suffix == ".go":
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def _resolved(group: Group) -> Group:
    if group.name == "pause":  # keyed by its source, which lives here
        return Group(group.name, _pause_digest(), group.packages, group.ldflags)
    return group


def go_version() -> str:
    go = shutil.which("go")
    if go is None:
        raise UsageError("missing: go (the Go toolchain builds kind, containerd and the node's binaries; install Go >= 1.26)")
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def _build(group: Group, dest: Path, log_path: Path) -> None:
    go = shutil.which("go")
    if go is None:
        raise UsageError("missing: go (the Go toolchain builds kind, containerd and the node's binaries; install Go >= 1.26)")
    env = dict(os.environ, CGO_ENABLED="0", GOTOOLCHAIN="local")
    env.pop("GOFLAGS", None)
    flags = ["-trimpath", "-ldflags", group.ldflags]
    workdir: Path | None = None
    try:
        if group.name == "kubernetes":
            workdir = bins.stage_module(Path(tempfile.mkdtemp(prefix="draguard-gomod-")))
            env["GOFLAGS"] = "-mod=mod"
            steps = [([go, "build", "-v", *flags, "-o", str(dest / name), pkg], workdir) for name, pkg in group.packages.items()]
        elif group.name == "pause":
            steps = [([go, "build", *flags, "-o", str(dest / "pause"), "pause.go"], PAUSE_SRC)]
        else:  # `go install pkg@version` outside any module: the module's own go.mod and go.sum decide
            env["GOBIN"] = str(dest)
            steps = [([go, "install", *flags, *group.packages.values()], Path(tempfile.gettempdir()))]
        with log_path.open("a") as log:
            for cmd, cwd in steps:
                log.write(f"$ {' '.join(cmd)}\n")
                log.flush()
                proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
                if proc.returncode != 0:
                    tail = "".join(log_path.read_text().splitlines(keepends=True)[-5:])
                    raise HarnessError(f"go build of {group.key} failed (full log: {log_path}):\n{tail}")
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    for name in group.packages:
        if not (dest / name).is_file():
            raise HarnessError(f"go build of {group.key} made no {name} (log: {log_path})")


def ensure(name: str, progress: Progress = print) -> Group:
    """The group's cache entry, built first if it is missing; returns the resolved group."""
    group = _resolved(GROUPS[name])
    final = group.directory()
    if final.is_dir() and all((final / b).is_file() for b in group.packages):
        return group
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    started = time.monotonic()
    progress(f"building {group.key} ({', '.join(group.packages)})")
    try:
        _build(group, partial, final.with_name(final.name + ".build.log"))
        shutil.rmtree(final, ignore_errors=True)
        partial.rename(final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    progress(f"built {group.key} in {time.monotonic() - started:.0f}s")
    return group


def ensure_all(progress: Progress = print) -> dict[str, Group]:
    return {name: ensure(name, progress) for name in GROUPS}
