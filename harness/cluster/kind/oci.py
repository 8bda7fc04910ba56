"""Single-layer container images written as docker-archive tarballs, without a registry or a daemon.

The format is what ``docker save`` writes and what ``docker load``, ``ctr images import`` and
``kind load image-archive`` read: ``manifest.json`` (config file, repo tags, layer files), the image
config (``architecture``, ``os``, ``config.Entrypoint``/``Env``, ``rootfs.diff_ids``) and one
uncompressed layer tar. draguard builds the node's control-plane images, the sandbox (pause) image
and its test and driver images this way from local binaries. Talks to: the filesystem only.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import tarfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Entry", "ImageSpec", "write_image", "write_archive"]


@dataclass(frozen=True)
class Entry:
    """One thing in the layer: a file (from ``source`` or ``data``), a directory or a symlink."""

    path: str  # absolute path inside the image
    source: Path | None = None
    data: bytes | None = None
    mode: int = 0o755
    link: str | None = None  # symlink target
    directory: bool = False


@dataclass(frozen=True)
class ImageSpec:
    tags: list[str]
    entries: list[Entry]
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    env: list[str] = field(default_factory=lambda: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])
    workdir: str = "/"


def _arch() -> str:
    m = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(m, m)


def _layer(entries: Iterable[Entry]) -> bytes:
    buf = io.BytesIO()
    made: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def parents(path: str) -> None:
            parts = path.strip("/").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in made:
                    made.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
                    tar.addfile(info)

        for e in sorted(entries, key=lambda e: e.path):
            name = e.path.strip("/")
            parents(e.path)
            info = tarfile.TarInfo(name)
            info.mtime = 0
            info.mode = e.mode
            if e.directory:
                if name in made:
                    continue
                made.add(name)
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif e.link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, e.link
                tar.addfile(info)
            else:
                data = e.data if e.data is not None else (e.source.read_bytes() if e.source else b"")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_image(spec: ImageSpec, dest: Path) -> Path:
    """Write ``spec`` as a docker-archive tarball at ``dest`` (atomically); returns ``dest``."""
    layer = dest.with_name(dest.name + ".layer")
    dest.parent.mkdir(parents=True, exist_ok=True)
    layer.write_bytes(_layer(spec.entries))
    try:
        return write_archive(spec, layer, dest)
    finally:
        layer.unlink(missing_ok=True)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_archive(spec: ImageSpec, layer: Path, dest: Path, stop_signal: str | None = None) -> Path:
    """Write a docker-archive at ``dest`` whose one layer is the tar file ``layer`` (``spec.entries`` unused);
    the layer is streamed, so a whole node rootfs fits."""
    diff_id = "sha256:" + _sha256_file(layer)
    container_config: dict[str, object] = {"Env": spec.env, "WorkingDir": spec.workdir}
    if spec.entrypoint is not None:
        container_config["Entrypoint"] = spec.entrypoint
    if spec.cmd is not None:
        container_config["Cmd"] = spec.cmd
    if stop_signal is not None:
        container_config["StopSignal"] = stop_signal
    config = {
        "architecture": _arch(),
        "os": "linux",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(0)),
        "config": container_config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "draguard (harness/cluster/kind/oci.py)"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    layer_name = diff_id.split(":", 1)[1] + "/layer.tar"
    manifest = [{"Config": config_name, "RepoTags": spec.tags, "Layers": [layer_name]}]
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".partial")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in ((config_name, config_bytes), ("manifest.json", json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(layer_name)
        info.size, info.mtime, info.mode = layer.stat().st_size, 0, 0o644
        with layer.open("rb") as f:
            tar.addfile(info, f)
    os.replace(tmp, dest)
    return dest
