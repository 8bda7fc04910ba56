"""draguard's Python images for kind nodes, assembled offline from this checkout: the fake DRA driver
(:func:`fake_driver_image`) and the whole CLI (:mod:`.draguardimage` names its requirements and calls
:func:`python_image`, which holds the steps both share).

No registry and no Dockerfile: the image is the cached Debian rootfs of the node image
(:func:`.image.base_rootfs`, debootstrap bookworm) with

1. Debian's ``python3`` installed by ``apt-get`` in a chroot (a private mount namespace, as for the node);
2. the draguard wheel built from this checkout (``pip wheel --no-deps`` of a copy of its tracked and
   untracked-but-not-ignored files, so no stale ``build/`` output goes in) and the fake driver's runtime
   dependencies, installed by the host's pip into ``/usr/local/lib/python3.11/dist-packages`` for CPython
   3.11 manylinux wheels only (``--only-binary :all: --python-version 3.11 --platform manylinux...``), each
   pinned to the version this machine's draguard runs with;
3. a smoke check (the driver's entry point imported by the image's own python3), then the rootfs as the
   one layer of a docker-archive (:func:`.oci.write_archive`), ``kind load image-archive``-able.

Cached as ``$XDG_CACHE_HOME/draguard/kind/<stem>-<key>.tar`` (stem ``fake-driver`` or ``draguard``); the
key hashes every version that goes in: the base rootfs's key, the Debian package, the pinned
requirements, the wheel's content (each member's name and bytes, not the zip's timestamps), the
entrypoint (the fake driver's key leaves it out, as before) and this module's format. Talks to: apt (in
the chroot), pip.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from draguard.harness.cluster.kind import image as image_mod
from draguard.harness.cluster.kind.oci import ImageSpec, write_archive
from draguard.harness.core.errors import HarnessError, UsageError

__all__ = ["FAKE_DRIVER_REPO", "FakeDriverImage", "ImageRecipe", "PythonImage", "fake_driver_image", "driver_requirements",
           "pinned", "python_image", "source_root"]

Progress = Callable[[str], None]
FAKE_DRIVER_REPO = "draguard.dev/fake-driver"
PYTHON = "3.11"
"""Debian bookworm's python3 (3.11.2): the wheels pip picks are built for it."""
DEBIAN_PACKAGES = ("python3",)
RUNTIME = ("kubernetes", "grpcio", "protobuf", "pydantic", "ruamel.yaml", "httptools", "orjson")
"""What ``python -m draguard.harness.driver.main`` imports beyond the standard library (their own
dependencies follow from pip's resolution); the build's smoke check fails if one is missing."""
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64", "manylinux_2_34_x86_64")
"""glibc 2.36 (bookworm) runs wheels built for any of these."""
SITE = f"/usr/local/lib/python{PYTHON}/dist-packages"
_FORMAT = "1"  # bump when what ends up in the image changes


def source_root() -> Path:
    """This checkout's root (its pyproject.toml); UsageError when draguard is installed without its sources."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyproject.toml").is_file() or not (root / "harness" / "driver").is_dir():
        raise UsageError(f"the fake driver's image is built from a draguard source checkout; none at {root}")
    return root


def pinned(names: tuple[str, ...] | list[str], what: str) -> list[str]:
    """``name==version`` for each name, the version installed here; UsageError naming one not installed."""
    out = []
    for name in names:
        try:
            out.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError as exc:
            raise UsageError(f"cannot pin {what}'s requirement {name}: not installed here") from exc
    return out


def driver_requirements() -> list[str]:
    """The fake driver's runtime requirements, each pinned to the version installed here."""
    return pinned(RUNTIME, "the fake driver")


def _run(cmd: list[str], what: str, log: Path, cwd: Path | None = None) -> None:
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False, cwd=cwd)
    if proc.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-8:])
        raise HarnessError(f"{what} failed (exit {proc.returncode}; full log {log}):\n{tail}")


def build_wheel(dest: Path, log: Path) -> Path:
    """The draguard wheel of this checkout's working tree, in ``dest``."""
    root = source_root()
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"], capture_output=True,
                            check=False)  # fmt: skip
    if listed.returncode != 0:
        raise UsageError(f"{root}: cannot list the checkout's files with git: {listed.stderr.decode(errors='replace').strip()}")
    copy = dest / "src"
    for rel in filter(None, listed.stdout.decode().split("\0")):
        src = root / rel
        if src.is_file() and not src.is_symlink():
            target = copy / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dest), str(copy)],
         "building the draguard wheel", log)  # fmt: skip
    shutil.rmtree(copy, ignore_errors=True)
    wheels = sorted(dest.glob("draguard-*.whl"))
    if len(wheels) != 1:
        raise HarnessError(f"building the draguard wheel left {len(wheels)} wheels in {dest}")
    return wheels[0]


def wheel_digest(wheel: Path) -> str:
    """A hash of the wheel's members (names and bytes): the same sources give the same digest."""
    h = hashlib.sha256()
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            h.update(name.encode() + b"\0" + z.read(name) + b"\0")
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class PythonImage:
    key: str
    version: str
    repo: str = FAKE_DRIVER_REPO
    stem: str = "fake-driver"

    @property
    def tag(self) -> str:
        """The tag the deploy/ manifests name (the draguard version)."""
        return f"{self.repo}:{self.version}"

    @property
    def keyed_tag(self) -> str:
        return f"{self.repo}:{self.version}-{self.key}"

    @property
    def tarball(self) -> Path:
        return image_mod.kind_dir() / f"{self.stem}-{self.key}.tar"


FakeDriverImage = PythonImage


@dataclass(frozen=True)
class ImageRecipe:
    """What one Python image holds beyond the shared base: its name, requirements, entry point and smoke check."""

    stem: str  # the cache file's and the build log's stem
    repo: str
    title: str  # for progress and errors: "fake driver image"
    requirements: list[str]
    entrypoint: list[str]
    smoke: str  # python code the image's python3 runs; it prints ok
    key_extra: tuple[str, ...] = ()
    command: tuple[str, str] | None = None  # (name, module): /usr/local/bin/<name> runs python3 -m <module>


_PYTHON_SCRIPT = r"""
set -eu
root="$1"; shift
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/tmp"
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"; chmod 755 "$root/usr/sbin/policy-rc.d"
chroot "$root" apt-get update -qq
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends "$@"
chroot "$root" apt-get clean
rm -rf "$root/var/lib/apt/lists/"* "$root/usr/sbin/policy-rc.d" "$root/var/log/"*.log
"""

_SMOKE = "import draguard.harness.driver.main, draguard.harness.driver.service, draguard.harness.kube; print('ok')"


def fake_driver_image(progress: Progress = print) -> tuple[FakeDriverImage, dict[str, float]]:
    """The fake driver's image archive (built, or reused from the cache) and the time each stage took."""
    return python_image(ImageRecipe("fake-driver", FAKE_DRIVER_REPO, "fake driver image", driver_requirements(),
                                    ["python3", "-m", "draguard.harness.driver.main"], _SMOKE), progress)


def python_image(recipe: ImageRecipe, progress: Progress = print) -> tuple[PythonImage, dict[str, float]]:
    """The recipe's image archive (built, or reused from the cache) and the time each stage took."""
    title = recipe.title
    missing = [m for m in image_mod.missing_build_tools() if not m.startswith("go ")]
    if missing:
        raise UsageError(f"cannot build the {title} offline: missing {', '.join(missing)}")
    kind_dir = image_mod.kind_dir()
    kind_dir.mkdir(parents=True, exist_ok=True)
    log = kind_dir / f"{recipe.stem}-build.log"
    times: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix=f"{recipe.stem}-", dir=kind_dir))
    try:
        t0 = time.monotonic()
        wheel = build_wheel(work, log)
        requirements = recipe.requirements
        version = wheel.name.split("-")[1]
        key = hashlib.sha256("\0".join([image_mod.base_key(), *DEBIAN_PACKAGES, PYTHON, *PLATFORMS, *requirements,
                                        wheel_digest(wheel), _FORMAT, *recipe.key_extra]).encode()).hexdigest()[:16]  # fmt: skip
        img = PythonImage(key, version, recipe.repo, recipe.stem)
        times["wheel_s"] = round(time.monotonic() - t0, 1)
        if img.tarball.is_file():
            return img, times
        t0 = time.monotonic()
        base = image_mod.base_rootfs(work, progress)
        times["base_rootfs_s"] = round(time.monotonic() - t0, 1)
        root = work / "rootfs"
        root.mkdir()
        t0 = time.monotonic()
        progress(f"{title}: Debian's {' '.join(DEBIAN_PACKAGES)} into the {image_mod.DEBIAN_SUITE} rootfs")
        _run(["tar", "-C", str(root), "--numeric-owner", "--xattrs", "-xf", str(base)], "unpacking the Debian rootfs", log)
        _run(["unshare", "--mount", "--propagation", "private", "sh", "-c", _PYTHON_SCRIPT, "python", str(root),
              *DEBIAN_PACKAGES], "installing python3 in the rootfs", log)  # fmt: skip
        times["python3_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        progress(f"{title}: the draguard wheel and {len(requirements)} pinned requirements (pip, cp311 manylinux)")
        site = root / SITE.lstrip("/")
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-warn-script-location", "--target", str(site),
               "--only-binary", ":all:", "--python-version", PYTHON, "--implementation", "cp", "--abi", "cp311"]
        pip += [arg for platform in PLATFORMS for arg in ("--platform", platform)]
        _run([*pip, *requirements], f"installing the {title}'s requirements", log)
        _run([*pip, "--no-deps", str(wheel)], "installing the draguard wheel", log)
        if recipe.command:
            shutil.rmtree(site / "bin", ignore_errors=True)  # pip's console scripts name the host's interpreter
            launcher = root / "usr/local/bin" / recipe.command[0]
            launcher.write_text(f'#!/bin/sh\nexec python3 -m {recipe.command[1]} "$@"\n')
            launcher.chmod(0o755)
        times["pip_s"] = round(time.monotonic() - t0, 1)
        smoke = subprocess.run(["chroot", str(root), "python3", "-c", recipe.smoke], capture_output=True, text=True,
                               check=False)  # fmt: skip
        if smoke.returncode != 0 or smoke.stdout.strip().splitlines()[-1:] != ["ok"]:
            raise HarnessError(f"the {title} cannot import its entry point: "
                               f"{(smoke.stderr or smoke.stdout).strip()[-400:]}")
        t0 = time.monotonic()
        progress(f"{title}: archiving")
        layer = work / "layer.tar"
        _run(["tar", "-C", str(root), "--numeric-owner", "--xattrs", "-cf", str(layer), "."], "archiving the rootfs", log)
        shutil.rmtree(root)
        write_archive(ImageSpec(tags=[img.tag, img.keyed_tag], entries=[],
                                entrypoint=recipe.entrypoint,
                                env=["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                     "PYTHONUNBUFFERED=1"]), layer, img.tarball)  # fmt: skip
        times["archive_s"] = round(time.monotonic() - t0, 1)
        for old in kind_dir.glob(f"{recipe.stem}-*.tar"):
            if old != img.tarball:
                old.unlink(missing_ok=True)
        return img, times
    finally:
        shutil.rmtree(work, ignore_errors=True)
