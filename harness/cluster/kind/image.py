"""draguard's kind node image, assembled offline, and the small images the nodes run.

``kind build node-image`` cannot work offline (it always fetches etcd, CoreDNS, kindnetd and the
storage provisioner from registry.k8s.io), and kind's base image needs a registry and git clones. The
node image is therefore assembled here, in stages, each cached under ``$XDG_CACHE_HOME/draguard/kind/``:

1. **base rootfs** (``rootfs-<key>.tar``): ``debootstrap --variant=minbase`` of Debian bookworm, then kind's
   base package list (kind ``images/base/Dockerfile``) and Debian's runc installed by ``apt-get`` in a chroot,
   and systemd trimmed to what a node needs (no udev, no getty, no binfmt); mounts made for the chroot live in
   a private mount namespace (``unshare --mount``) and go with it;
2. **node rootfs** (``node-<key>.tar``): the base plus :mod:`.nodefiles`, containerd/ctr/shim, crictl, the CNI
   plugins, kubelet/kubeadm/kubectl (:mod:`.components`), ``/etc/containerd/cri-base.json`` from
   ``ctr oci spec``, and the images kubeadm starts (kube-apiserver, kube-controller-manager,
   kube-scheduler, etcd, kube-proxy, CoreDNS, pause) made from local binaries by :mod:`.oci` and imported into the
   rootfs's ``/var/lib/containerd`` by a containerd started for that alone;
3. **engine image** (``draguard.dev/kind-node:<version>-<key>``): the node rootfs as the one layer of a
   docker-archive (``node-<key>.tar``) with systemd's stop signal (``SIGRTMIN+3``) and the entrypoint, loaded
   with ``docker load`` (dockerd 20.10's ``docker import --change`` refuses ``STOPSIGNAL``).

The key hashes every version that goes in: the Debian suite and packages, Kubernetes, kind, containerd,
CNI plugins, crictl, Go, the node files and this module's format. Talks to: debootstrap, apt (in the
chroot), containerd and ctr (a private instance), the container engine (:mod:`.engine`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from draguard.harness.cluster import binaries as bins
from draguard.harness.cluster.kind import components, nodefiles
from draguard.harness.cluster.kind.oci import Entry, ImageSpec, write_archive, write_image
from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.core.paths import cache_dir

__all__ = ["DEBIAN_SUITE", "PACKAGES", "NodeImage", "node_image_key", "build_node_rootfs", "busybox_image", "upstream_driver_image",
           "kind_dir", "base_key", "base_rootfs", "ETCD_IMAGE_TAG", "missing_build_tools"]

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("DRAGUARD_DEBIAN_MIRROR", "http://deb.debian.org/debian")
PACKAGES = (
    # kind's base package list (kind images/base/Dockerfile) ...
    "systemd", "conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux", "mount", "kmod",
    "libseccomp2", "pigz", "fuse-overlayfs", "nfs-common", "open-iscsi", "e2fsprogs", "bash", "ca-certificates",
    "curl", "jq", "procps",
    # ... and Debian's runc (a Go-built runc needs cgo for seccomp, which kubeadm's static pods use).
    "runc",
)
ETCD_IMAGE_TAG = "3.7.0-0"
"""kubeadm v1.37's etcd image tag (``cmd/kubeadm/app/constants``: DefaultEtcdVersion)."""
_BASE_FORMAT = "3"  # bump when stage 1 changes what ends up in the Debian rootfs
_FORMAT = "4"  # bump when stage 2 or 3 changes what ends up in the image

Progress = Callable[[str], None]


def kind_dir() -> Path:
    return cache_dir() / "kind"


def missing_build_tools() -> list[str]:
    """What building the node image needs from the host and does not find (empty when all is there)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (debootstrap and chroot)")
    for tool in ("debootstrap", "unshare", "chroot", "tar"):
        if shutil.which(tool) is None:
            missing.append(tool + (" (Debian package debootstrap)" if tool == "debootstrap" else ""))
    if shutil.which("go") is None:
        missing.append("go (Go >= 1.26)")
    return missing


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def base_key() -> str:
    """The key of stage 1, the Debian rootfs (the fake driver's image starts from it too)."""
    return _digest(DEBIAN_SUITE, DEBIAN_MIRROR, *PACKAGES, _BASE_FORMAT)


def node_image_key() -> str:
    files = json.dumps(nodefiles.node_files(bins.K8S_VERSION), sort_keys=True)
    return _digest(base_key(), bins.K8S_VERSION, components.KIND_VERSION, components.CONTAINERD_VERSION,
                   components.CNI_PLUGINS_VERSION, components.CRICTL_VERSION, components.COREDNS_VERSION, components.go_version(),
                   ETCD_IMAGE_TAG,
                   nodefiles.SANDBOX_IMAGE, files, _FORMAT)


@dataclass(frozen=True)
class NodeImage:
    key: str

    @property
    def tag(self) -> str:
        return f"draguard.dev/kind-node:{bins.K8S_VERSION}-{self.key}"

    @property
    def tarball(self) -> Path:
        return kind_dir() / f"node-{self.key}.tar"


def _run(cmd: list[str], what: str, log: Path, **kwargs: object) -> None:
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False, **kwargs)  # type: ignore[call-overload]
    if proc.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-6:])
        raise HarnessError(f"{what} failed (exit {proc.returncode}; full log {log}):\n{tail}")


_BASE_SCRIPT = r"""
set -eu
root="$1"; suite="$2"; mirror="$3"; shift 3
debootstrap --variant=minbase "$suite" "$root" "$mirror"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/tmp"
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"; chmod 755 "$root/usr/sbin/policy-rc.d"
chroot "$root" apt-get update -qq
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends "$@"
chroot "$root" apt-get clean
rm -rf "$root/var/lib/apt/lists/"* "$root/usr/sbin/policy-rc.d" "$root/var/log/"*.log
# systemd in a container: no udev, no getty, no tmpfiles at boot, no kernel log reading, no binfmt
find "$root/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
rm -f "$root"/lib/systemd/system/multi-user.target.wants/* "$root"/etc/systemd/system/*.wants/* \
      "$root"/lib/systemd/system/local-fs.target.wants/* "$root"/lib/systemd/system/sockets.target.wants/*udev* \
      "$root"/lib/systemd/system/sockets.target.wants/*initctl* "$root"/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >> "$root/etc/systemd/journald.conf"
ln -sf /lib/systemd/systemd "$root/sbin/init"
chroot "$root" systemctl mask systemd-binfmt.service >/dev/null 2>&1
mkdir -p "$root/etc/kubernetes/manifests"
"""


def base_rootfs(work: Path, progress: Progress) -> Path:
    """Stage 1, cached as a tarball: the Debian rootfs with the packages installed."""
    cached = kind_dir() / f"rootfs-{base_key()}.tar"
    if cached.is_file():
        return cached
    root = work / "base"
    log = kind_dir() / "image-build.log"
    started = time.monotonic()
    progress(f"debootstrap {DEBIAN_SUITE} and {len(PACKAGES)} packages from {DEBIAN_MIRROR} (about 2-4 minutes)")
    _run(["unshare", "--mount", "--propagation", "private", "sh", "-c", _BASE_SCRIPT, "base", str(root), DEBIAN_SUITE,
          DEBIAN_MIRROR, *PACKAGES], "building the Debian rootfs", log)
    partial = cached.with_name(cached.name + ".partial")
    _run(["tar", "-C", str(root), "--numeric-owner", "--xattrs", "-cf", str(partial), "."], "archiving the rootfs", log)
    partial.rename(cached)
    shutil.rmtree(root, ignore_errors=True)
    progress(f"Debian rootfs ready in {time.monotonic() - started:.0f}s")
    return cached


def _closure(root: Path, binaries: list[str], log: Path) -> set[str]:
    """The shared libraries ``binaries`` (paths inside ``root``) load, as paths inside ``root``."""
    out: set[str] = set()
    for b in binaries:
        proc = subprocess.run(["chroot", str(root), "ldd", b], capture_output=True, text=True, check=False)
        for line in proc.stdout.splitlines():
            parts = line.split()
            for p in parts:
                if p.startswith("/"):
                    out.add(p)
                    break
    return out


def _real(root: Path, path: str) -> Path:
    """``path`` inside ``root`` with symlinks resolved inside ``root``."""
    p = root / path.lstrip("/")
    for _ in range(40):
        if not p.is_symlink():
            return p
        target = os.readlink(p)
        p = (root / target.lstrip("/")) if target.startswith("/") else (p.parent / target)
    raise HarnessError(f"symlink loop at {path} in the node rootfs")


def _static_image(name: str, tag: str, binary: Path, dest: Path, entrypoint: bool = False) -> Path:
    entries = [Entry(f"/usr/local/bin/{name}", source=binary), Entry("/tmp", mode=0o1777, directory=True),
               Entry("/etc/passwd", data=b"root:x:0:0:root:/root:/sbin/nologin\n", mode=0o644),
               Entry("/etc/group", data=b"root:x:0:\n", mode=0o644)]
    return write_image(ImageSpec(tags=[tag], entries=entries, entrypoint=[f"/usr/local/bin/{name}"] if entrypoint else None), dest)


def _kube_proxy_image(root: Path, binary: Path, tag: str, dest: Path, log: Path) -> Path:
    """kube-proxy with the iptables (nft backend) and conntrack programs it runs, and their libraries."""
    programs = ["/usr/sbin/xtables-nft-multi", "/usr/sbin/conntrack"]
    xtables = sorted(str(p.relative_to(root)) for p in (root / "usr/lib/x86_64-linux-gnu/xtables").glob("*.so"))
    xtables = ["/" + p for p in xtables]
    libs = _closure(root, programs + xtables, log)
    entries = [Entry("/usr/local/bin/kube-proxy", source=binary), Entry("/tmp", mode=0o1777, directory=True)]
    for path in sorted({*programs, *xtables, *libs}):
        entries.append(Entry(path, source=_real(root, path)))
    for tool in ("iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"):
        entries.append(Entry(f"/usr/sbin/{tool}", link="xtables-nft-multi"))
    for etc in ("/etc/protocols", "/etc/services", "/etc/ethertypes"):
        if (root / etc.lstrip("/")).is_file():
            entries.append(Entry(etc, source=root / etc.lstrip("/"), mode=0o644))
    return write_image(ImageSpec(tags=[tag], entries=entries), dest)


def _import_images(root: Path, archives: list[Path], ctr_bin: Path, containerd_bin: Path, work: Path, log: Path,
                   pinned: list[str]) -> None:  # fmt: skip
    """Import docker-archives into the rootfs's containerd store (namespace k8s.io), not unpacked: the
    node's containerd unpacks what it runs. A containerd with its root in the rootfs does the import."""
    state = Path(tempfile.mkdtemp(prefix="ctrd-", dir="/run" if os.access("/run", os.W_OK) else None))
    sock = state / "c.sock"
    config = work / "import-containerd.toml"
    config.write_text(
        f'version = 3\nroot = "{root}/var/lib/containerd"\nstate = "{state}"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", '
        '"io.containerd.podsandbox.controller.v1.podsandbox", "io.containerd.sandbox.controller.v1.shim", '
        '"io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", '
        '"io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", '
        '"io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp"]\n'
        f'[grpc]\n  address = "{sock}"\n[ttrpc]\n  address = "{sock}.ttrpc"\n'
        '[debug]\n  level = "warn"\n'
    )
    with log.open("a") as f:
        proc = subprocess.Popen([str(containerd_bin), "--config", str(config)], stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise HarnessError(f"the containerd that imports the node's images did not start (log {log})")
            time.sleep(0.1)
        ctr = [str(ctr_bin), "--address", str(sock), "--namespace", "k8s.io"]
        for archive in archives:
            _run([*ctr, "images", "import", "--no-unpack", "--digests", "--all-platforms", str(archive)],
                 f"importing {archive.name} into the node", log)
        for ref in pinned:
            _run([*ctr, "images", "label", ref, "io.cri-containerd.pinned=pinned"], f"pinning {ref}", log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(state, ignore_errors=True)


def build_node_rootfs(image: NodeImage, progress: Progress = print) -> Path:
    """Stages 1 and 2: the node image's docker-archive at ``image.tarball`` (reused when present)."""
    if image.tarball.is_file():
        return image.tarball
    missing = missing_build_tools()
    if missing:
        raise UsageError(f"cannot build the kind node image offline: missing {', '.join(missing)}")
    kind_dir().mkdir(parents=True, exist_ok=True)
    log = kind_dir() / "image-build.log"
    work = Path(tempfile.mkdtemp(prefix="node-", dir=kind_dir()))
    try:
        base = base_rootfs(work, progress)
        groups = components.ensure_all(progress)
        control = bins.resolve(progress=progress)
        root = work / "rootfs"
        root.mkdir()
        progress("assembling the node rootfs")
        _run(["tar", "-C", str(root), "--numeric-owner", "--xattrs", "-xf", str(base)], "unpacking the Debian rootfs", log)
        for path, (mode, text) in nodefiles.node_files(bins.K8S_VERSION).items():
            dest = root / path.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
            dest.chmod(mode)
        placed = {
            "containerd": ["/usr/local/bin/containerd", "/usr/local/bin/ctr", "/usr/local/bin/containerd-shim-runc-v2"],
            "crictl": ["/usr/local/bin/crictl"],
            "cni": ["/opt/cni/bin/bridge", "/opt/cni/bin/loopback", "/opt/cni/bin/host-local", "/opt/cni/bin/portmap"],
            "kubernetes": ["/usr/bin/kubelet", "/usr/bin/kubeadm", "/usr/bin/kubectl"],
        }
        for group, paths in placed.items():
            for path in paths:
                dest = root / path.lstrip("/")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(groups[group].path(Path(path).name), dest)
                dest.chmod(0o755)
        spec = subprocess.run([str(groups["containerd"].path("ctr")), "oci", "spec"], capture_output=True, text=True, check=True)
        (root / "etc/containerd/cri-base.json").write_text(json.dumps(nodefiles.cri_base_spec(json.loads(spec.stdout)), indent=2))
        _run(["chroot", str(root), "systemctl", "enable", "kubelet.service", "containerd.service"], "enabling the node's units", log)
        progress("making the control-plane, etcd, kube-proxy, CoreDNS and pause images from local binaries")
        images = work / "images"
        version = bins.K8S_VERSION
        archives = [
            _static_image(name, f"registry.k8s.io/{name}:{version}", control.path(name), images / f"{name}.tar")
            for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
        ]
        archives.append(_static_image("etcd", f"registry.k8s.io/etcd:{ETCD_IMAGE_TAG}", control.path("etcd"), images / "etcd.tar"))
        archives.append(_kube_proxy_image(root, groups["kubernetes"].path("kube-proxy"), f"registry.k8s.io/kube-proxy:{version}",
                                          images / "kube-proxy.tar", log))  # fmt: skip
        archives.append(write_image(ImageSpec(tags=[f"registry.k8s.io/coredns/coredns:{components.COREDNS_VERSION}"],
                                              entries=[Entry("/coredns", source=groups["coredns"].path("coredns")),
                                                       Entry("/etc/ssl/certs/ca-certificates.crt", mode=0o644,
                                                             source=root / "etc/ssl/certs/ca-certificates.crt")],
                                              entrypoint=["/coredns"]), images / "coredns.tar"))  # fmt: skip
        pause = write_image(ImageSpec(tags=[nodefiles.SANDBOX_IMAGE], entries=[Entry("/pause", source=groups["pause"].path("pause"))],
                                      entrypoint=["/pause"]), images / "pause.tar")  # fmt: skip
        archives.append(pause)
        _import_images(root, archives, groups["containerd"].path("ctr"), groups["containerd"].path("containerd"), work, log,
                       [nodefiles.SANDBOX_IMAGE])  # fmt: skip
        progress("archiving the node rootfs")
        layer = work / "layer.tar"
        _run(["tar", "-C", str(root), "--numeric-owner", "--xattrs", "-cf", str(layer), "."], "archiving the node rootfs", log)
        shutil.rmtree(root)
        write_archive(ImageSpec(tags=[image.tag], entries=[], entrypoint=["/usr/local/bin/entrypoint", "/sbin/init"],
                                env=["container=docker", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]),
                      layer, image.tarball, stop_signal="SIGRTMIN+3")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return image.tarball


def upstream_driver_image(dest: Path, progress: Progress = print) -> tuple[str, Path]:
    """The upstream DRA test driver (static, from the control plane's binary cache) as an image; its tag and archive."""
    control = bins.resolve(progress=progress)
    bins.ensure_built(control, (bins.TEST_DRIVER,), progress=progress)
    tag = f"draguard.dev/dra-test-driver:{bins.K8S_VERSION}"
    return tag, _static_image(bins.TEST_DRIVER, tag, control.path(bins.TEST_DRIVER), dest, entrypoint=True)


def busybox_image(tag: str, dest: Path) -> Path:
    """A tiny image from Debian's busybox-static: ``/bin/busybox`` and a link per applet used in tests."""
    busybox = Path("/bin/busybox")  # Debian's busybox-static installs a static binary here
    if not busybox.is_file():
        raise UsageError("missing: busybox-static (Debian package busybox-static) for the test image")
    entries = [Entry("/bin/busybox", source=busybox), Entry("/tmp", mode=0o1777, directory=True)]
    for applet in ("sh", "echo", "cat", "ls", "sleep", "env", "true", "false", "test", "grep", "mount", "id", "hostname"):
        entries.append(Entry(f"/bin/{applet}", link="busybox"))
    return write_image(ImageSpec(tags=[tag], entries=entries, cmd=["/bin/sh"]), dest)
