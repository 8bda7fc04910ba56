"""Generic file IO the whole harness shares: atomic replacement, directory syncs, reads kept while a
file's stamp vouches for them, and cache folders published whole.

Writers (the fake driver's checkpoint, CDI specs, device truth, the node agents' checkpoints, report
files) replace a file whole through :func:`atomic_write`; readers that poll such files (the runner's
judging rounds, the fake nodes, health checks) keep what they parsed through :class:`StampedReads`.
Talks to nothing but the filesystem.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, Literal, TypeVar

K = TypeVar("K")
T = TypeVar("T")

__all__ = [
    "Sync",
    "atomic_write",
    "sync_dir",
    "file_stamp",
    "StampedReads",
    "vouches",
    "STAMP_SETTLED_AFTER",
    "cleanup_temporaries",
    "damaged",
    "publishing",
]

Sync = Literal["none", "file", "full"]
"""How :func:`atomic_write` makes a replacement durable (readers always see the old or the new content
whole: the rename is atomic):

- ``none``: no fsync; a power loss may lose the update, or, on a filesystem that does not flush a
  file renamed over another (ext4 does, ``auto_da_alloc``), leave it empty. For live state that a
  power loss ends anyway: the device truth (the hardware), CDI specs (``/var/run/cdi`` is a tmpfs on
  a real node), the calls-in-flight counter;
- ``file``: the file is synced before the rename, so even a power loss leaves the old or the new
  version whole, though the rename itself may be lost until the directory is synced. This is the
  kubelet's own checkpoint write (``pkg/kubelet/util/store/filestore.go`` ``writeFile``: temporary
  file, ``Sync``, ``Rename``, no directory sync), which the NVIDIA driver and dra-example-driver
  use through ``pkg/kubelet/checkpointmanager``;
- ``full``: ``file`` plus an fsync of the directory: the new content survives a power loss once this returns.
"""

def file_stamp(path: Path) -> tuple[int, int] | None:
    """(mtime in ns, size) of a file replaced by :func:`atomic_write` (or of a directory); None when it
    does not exist. A reader that polls keeps what it parsed while the stamp stays the same and
    :func:`vouches` for it."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


STAMP_SETTLED_AFTER = 1.0
"""Seconds a stamp's mtime must lie before a read for that read to vouch for it. File times come from
a coarse clock (a tick of milliseconds on kernels without fine-grained timestamps), so a rewrite of the
same size in the tick of a read keeps the stamp, and a reader trusting it would keep stale content
until the next change, which may never come (the last unprepare of a run)."""


def vouches(stamps: tuple[tuple[int, int] | None, ...], read_at: float) -> bool:
    """Whether a read begun at ``read_at`` (``time.time()``, after taking ``stamps``) may be kept while the
    stamps stay the same: every mtime lay :data:`STAMP_SETTLED_AFTER` before it, so any later change
    gets a newer one."""
    return all(s is None or read_at - s[0] / 1e9 >= STAMP_SETTLED_AFTER for s in stamps)


class StampedReads(Generic[K, T]):
    """What was last read for each key, kept while the stamps of the files it came from stay the same
    and :func:`vouches` for the read: readers that poll files every second (a runner reading 500 nodes'
    books and device truth, a health check) read one again only after it changed."""

    def __init__(self) -> None:
        self._kept: dict[K, tuple[tuple[tuple[int, int] | None, ...] | None, T]] = {}

    def get(self, key: K, paths: tuple[Path, ...], read: Callable[[], T]) -> T:
        """``read()``'s value for ``key``, read again unless ``paths`` have the stamps of a vouched read."""
        stamps = tuple(file_stamp(p) for p in paths)
        kept = self._kept.get(key)
        if kept is not None and kept[0] == stamps:
            return kept[1]
        read_at = time.time()
        value = read()
        # Kept only when the stamps vouch for the read: a change in the same clock tick keeps the stamp.
        self._kept[key] = (stamps if vouches(stamps, read_at) else None, value)
        return value


def atomic_write(
    path: Path, data: bytes, crash: Callable[[str], None] | None = None, point: str = "write", sync: Sync = "full"
) -> None:
    """Replace ``path`` with ``data``: write a temporary file, sync it (``sync`` says how far, see
    :data:`Sync`), rename it over ``path``.

    ``crash`` (fault control) is called at ``<point>.mid_write`` (half the bytes written) and
    ``<point>.before_rename``; an exit there must leave the previous content intact.
    """
    # One temporary file per writing thread: two threads of one process replacing the same file (two
    # chaos steps switching a node's faults at once) must not rename each other's file away.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        half = len(data) // 2
        os.write(fd, data[:half])
        if crash:
            crash(f"{point}.mid_write")
        view = memoryview(data)[half:]
        while view:
            view = view[os.write(fd, view) :]
        if sync != "none":
            os.fsync(fd)
    finally:
        os.close(fd)
    if crash:
        crash(f"{point}.before_rename")
    os.replace(tmp, path)
    if sync == "full":
        sync_dir(path.parent)


@contextlib.contextmanager
def publishing(final: Path) -> Iterator[Path]:
    """A fresh, empty ``<final>.partial`` folder to fill; when the block ends without an error it replaces
    ``final`` by a rename, else it is removed. A cache entry (the control-plane binaries, a driver variant,
    a node image's parts) is therefore never seen half built, whatever interrupted the build."""
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        yield partial
        shutil.rmtree(final, ignore_errors=True)
        partial.rename(final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def sync_dir(directory: Path) -> None:
    """fsync a directory: the renames done in it so far survive a power loss."""
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)



def cleanup_temporaries(directory: Path, prefix: str) -> None:
    """Remove temporary files a killed writer left behind (``.<prefix>*.tmp``, see atomic_write)."""
    for p in directory.glob(f".{prefix}*.tmp"):
        try:
            p.unlink()
        except OSError:
            pass


def damaged(data: bytes, mode: str, at: float = 0.5) -> bytes:
    """A file's bytes damaged as a cut-short write (``truncated``: the first half kept) or a bad
    disk block (``garbled``: 16 bytes from ``at`` of the way in overwritten with bytes that are not UTF-8)."""
    if mode == "truncated":
        return data[: len(data) // 2]
    start = int((len(data) - 16) * at) if len(data) > 16 else 0
    return data[:start] + b"\xff" * 16 + data[start + 16:]
