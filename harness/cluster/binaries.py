"""Finding, downloading or building the control-plane binaries at a pinned Kubernetes release.

Resolution order (first hit wins):

1. a directory named by ``--bin-dir`` or ``$DRAGUARD_BIN_DIR`` (used as is);
2. the per-version cache ``$XDG_CACHE_HOME/draguard/bin/<version>/`` (checked against its manifest);
3. the official release binaries, downloaded with a sha256 check (``$DRAGUARD_RELEASE_URL`` overrides
   the base URL, which is how the tests serve them from a local HTTP server);
4. a build from Go modules with this machine's Go toolchain (the module in ``gomod/``), stamped with
   the release version so that ``/version`` reports it.

A cache entry is a directory of binaries plus ``manifest.json`` with each file's sha256; it is made
in a ``.partial`` directory and renamed into place, so an interrupted build or download never looks
complete. Talks to: the network (3), ``go`` (4), the filesystem.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import IO
from dataclasses import dataclass
from typing import IO
from pathlib import Path

from draguard.harness.core.errors import HarnessError
from draguard.harness.core.fsio import publishing
from draguard.harness.core.paths import cache_dir
from draguard.harness.core.progress import Counted, wants_counts

__all__ = [
    "K8S_VERSION",
    "ETCD_VERSION",
    "COMPONENTS",
    "Binaries",
    "resolve",
    "build_from_source",
    "download_release",
    "verify_cache_entry",
    "KUBELET",
    "ensure_built",
    "sources_digest",
    "SCHEDULER_PERF",
    "SCHEDULER_PERF_DATA",
]

K8S_VERSION = "v1.37.2"
ETCD_VERSION = "v3.7.0"
COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager")
TEST_DRIVER = "dra-test-driver"
"""The upstream DRA test driver (k8s.io/kubernetes/test/e2e/dra/test-driver), built beside the control plane."""

SCHEDULER_PERF = "scheduler-perf-dra.test"
"""Upstream scheduler_perf's DRA benchmarks (``k8s.io/kubernetes/test/integration/scheduler_perf/dra``), a
test binary (``go test -c``) built into the cache only on request: ``draguard cluster build --scheduler-perf``."""
SCHEDULER_PERF_DATA = "scheduler-perf"
"""Beside it in the cache entry: the files the test binary reads at run time (its performance-config.yaml and
templates, and the test API server's serving-cert fixtures), copied from the module at build time."""

KUBELET = "draguard-kubelet"
"""draguard's hollow DRA kubelet (``harness/kubelet/*.go``), built from the same module as the control plane."""

GOMOD_DIR = Path(__file__).resolve().parent / "gomod"
KUBELET_SRC = Path(__file__).resolve().parent.parent / "kubelet"
_GO_PACKAGES = {
    "etcd": "go.etcd.io/etcd/server/v3",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    TEST_DRIVER: "k8s.io/kubernetes/test/e2e/dra/test-driver",
    SCHEDULER_PERF: "k8s.io/kubernetes/test/integration/scheduler_perf/dra",
    KUBELET: "./kubelet",
}
_RELEASE_DATE = "2026-10-27T12:01:04Z"  # k8s.io/kubernetes v1.37.2 module time, stamped as buildDate

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Binaries:
    """Paths of one complete set of control-plane binaries."""

    directory: Path
    source: str  # "dir", "cache", "download" or "build"

    def path(self, component: str) -> Path:
        return self.directory / component

    def has(self, component: str) -> bool:
        p = self.path(component)
        return p.is_file() and os.access(p, os.X_OK)


def cache_entry(version: str = K8S_VERSION) -> Path:
    return cache_dir() / "bin" / version


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_manifest(directory: Path, version: str, source: str) -> None:
    files = {p.name: _sha256(p) for p in sorted(directory.iterdir()) if p.is_file() and p.name != "manifest.json"}
    manifest = {"version": version, "source": source, "created": time.time(), "sha256": files}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


_VERIFIED: set[tuple[Path, str]] = set()
"""Files fully hashed by this process already: hashing ~400 MB costs about a second per cluster start."""


def verify_cache_entry(directory: Path, components: tuple[str, ...] = COMPONENTS) -> None:
    """Raise HarnessError naming the entry if it is incomplete or does not match its manifest."""
    hint = f"remove {directory} (or run `draguard cluster build --force`) to rebuild it"
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
        hashes = manifest["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"corrupt binary cache entry {directory}: unreadable manifest.json; {hint}") from exc
    for name in components:
        path = directory / name
        if name not in hashes or not path.is_file():
            raise HarnessError(f"corrupt binary cache entry {directory}: {name} is missing; {hint}")
        stat = path.stat()
        key = (path, f"{stat.st_size}:{stat.st_mtime_ns}")
        if stat.st_size == 0 or (_verify_full() and key not in _VERIFIED and _sha256(path) != hashes[name]):
            raise HarnessError(f"corrupt binary cache entry {directory}: {name} does not match its sha256; {hint}")
        _VERIFIED.add(key)


def _verify_full() -> bool:
    return os.environ.get("DRAGUARD_VERIFY_CACHE", "1") != "0"


def _platform() -> tuple[str, str]:
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return platform.system().lower(), arch


# -- download -------------------------------------------------------------------------------------


def _fetch(url: str, dest: Path, timeout: float = 60.0) -> None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, dest.open("wb") as out:
            shutil.copyfileobj(resp, out, 1 << 20)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise HarnessError(f"cannot download {url}: {exc}") from exc


def download_release(
    dest_root: Path | None = None, version: str = K8S_VERSION, base_url: str | None = None, progress: Progress = print
) -> Binaries:
    """Download the official release binaries, checking each against its published sha256.

    Layout (as on dl.k8s.io): ``<base>/<version>/bin/<os>/<arch>/<name>`` with ``<name>.sha256`` beside it;
    etcd comes from ``<base>/etcd/<etcd-version>/etcd-<etcd-version>-<os>-<arch>.tar.gz`` plus ``SHA256SUMS``
    (the real default points at the etcd GitHub release, whose layout is the same).
    """
    base = (base_url or os.environ.get("DRAGUARD_RELEASE_URL") or "https://dl.k8s.io/release").rstrip("/")
    etcd_base = (
        f"{base}/etcd/{ETCD_VERSION}"
        if base_url or os.environ.get("DRAGUARD_RELEASE_URL")
        else f"https://github.com/etcd-io/etcd/releases/download/{ETCD_VERSION}"
    )
    osname, arch = _platform()
    final = dest_root or cache_entry(version)
    with publishing(final) as partial:
        for name in COMPONENTS[1:]:
            url = f"{base}/{version}/bin/{osname}/{arch}/{name}"
            progress(f"downloading {url}")
            _fetch(url, partial / name)
            _fetch(url + ".sha256", partial / f"{name}.sha256")
            want = (partial / f"{name}.sha256").read_text().split()[0].strip().lower()
            (partial / f"{name}.sha256").unlink()
            got = _sha256(partial / name)
            if got != want:
                raise HarnessError(f"sha256 mismatch for {url}: expected {want}, got {got}")
            (partial / name).chmod(0o755)
        tarname = f"etcd-{ETCD_VERSION}-{osname}-{arch}.tar.gz"
        progress(f"downloading {etcd_base}/{tarname}")
        _fetch(f"{etcd_base}/{tarname}", partial / tarname)
        _fetch(f"{etcd_base}/SHA256SUMS", partial / "SHA256SUMS")
        lines = (line.split() for line in (partial / "SHA256SUMS").read_text().splitlines() if line.strip())
        sums = {name: digest for digest, name in lines}
        if sums.get(tarname) != _sha256(partial / tarname):
            raise HarnessError(f"sha256 mismatch for {etcd_base}/{tarname}")
        with tarfile.open(partial / tarname) as tar:
            member = next((m for m in tar.getmembers() if m.name.endswith("/etcd") and m.isfile()), None)
            if member is None:
                raise HarnessError(f"{etcd_base}/{tarname} has no etcd binary")
            src = tar.extractfile(member)
            assert src is not None
            with (partial / "etcd").open("wb") as out:
                shutil.copyfileobj(src, out)
        (partial / "etcd").chmod(0o755)
        (partial / tarname).unlink()
        (partial / "SHA256SUMS").unlink()
        _write_manifest(partial, version, "download")
    return Binaries(final, "download")


# -- build ----------------------------------------------------------------------------------------


def _ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate={_RELEASE_DATE}",
        ]
    return " ".join(flags) + " -s -w"


def sources_digest() -> str:
    """sha256 over the Go module files and the kubelet's sources: a cached kubelet built from other sources is stale."""
    h = hashlib.sha256()
    for path in [*(GOMOD_DIR / n for n in ("go.mod", "go.sum")), *sorted(KUBELET_SRC.glob("*.go"))]:
        if not path.name.endswith("_test.go"):
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def stage_module(workdir: Path, tests: bool = False) -> Path:
    """Copy the Go module (and the kubelet's sources, as package ``./kubelet``) into ``workdir``."""
    for name in ("go.mod", "go.sum", "tools.go"):
        shutil.copy(GOMOD_DIR / name, workdir / name)
    (workdir / "kubelet").mkdir(exist_ok=True)
    for src in KUBELET_SRC.glob("*.go"):
        if tests or not src.name.endswith("_test.go"):
            shutil.copy(src, workdir / "kubelet" / src.name)
    return workdir


def _go_build(go: str, name: str, out: Path, workdir: Path, version: str, log: IO[str], started: float,
              progress: Progress) -> None:
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
    cmd = [go, "build", "-v", "-trimpath", "-ldflags", _ldflags(version), "-o", str(out), _GO_PACKAGES[name]]
    if name == SCHEDULER_PERF:  # a test package: `go test -c`, no vet (vet re-analyses every dependency)
        cmd = [go, "test", "-c", "-vet=off", "-trimpath", "-ldflags", _ldflags(version), "-o", str(out), _GO_PACKAGES[name]]
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    count = 0
    last = time.monotonic()
    every = 1.0 if wants_counts(progress) else 15.0
    for line in proc.stdout:
        log.write(line)
        count += 1
        if time.monotonic() - last > every:
            if every < 15:
                progress(Counted(f"building {name}: packages compiled", count))
            else:
                progress(f"  {name}: {count} packages compiled, {time.monotonic() - started:.0f}s elapsed")
            last = time.monotonic()
    if proc.wait() != 0:
        log.flush()
        tail = "".join(Path(log.name).read_text().splitlines(keepends=True)[-5:])
        raise HarnessError(f"go build of {name} failed (full log: {log.name}):\n{tail}")


def _stage_scheduler_perf_data(go: str, workdir: Path, dest: Path) -> None:
    """Copy what the scheduler_perf test binary reads at run time out of the module (see SCHEDULER_PERF_DATA).

    - ``config/``: ``test/integration/scheduler_perf/dra/performance-config.yaml`` and its ``templates/``
      (the binary reads them relative to its working directory);
    - ``src/k8s.io/kubernetes@<version>/cmd/kube-apiserver/app/testing/testdata``: the test API server
      finds its serving-cert fixtures from its own source path, which ``-trimpath`` makes relative; it
      then joins ``$TEST_SRCDIR/$TEST_WORKSPACE`` in front (``cmd/kube-apiserver/app/testing/testserver.go``,
      pkgPath), so the run sets TEST_SRCDIR to ``src``.
    """
    env = dict(os.environ, GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
    module = subprocess.run([go, "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"], cwd=workdir, env=env,
                            capture_output=True, text=True, check=False)  # fmt: skip
    if module.returncode != 0 or not module.stdout.strip():
        raise HarnessError(f"cannot locate the k8s.io/kubernetes module source: {module.stderr.strip()[-500:]}")
    src = Path(module.stdout.strip())
    perf = src / "test/integration/scheduler_perf/dra"
    with publishing(dest) as partial:
        shutil.copytree(perf / "templates", partial / "config" / "templates")
        shutil.copy(perf / "performance-config.yaml", partial / "config" / "performance-config.yaml")
        fixtures = f"{src.name}/cmd/kube-apiserver/app/testing/testdata"
        shutil.copytree(src.parent / fixtures, partial / "src" / "k8s.io" / fixtures)
        for p in partial.rglob("*"):  # the module cache is read-only: so would the copies be
            p.chmod(0o755 if p.is_dir() else 0o644)


def ensure_built(entry: Binaries, components: tuple[str, ...] = (KUBELET,), progress: Progress = print) -> None:
    """Build ``components`` into an existing cache entry if they are missing or (the kubelet) stale.

    Each is built beside the entry and renamed in, then the manifest is rewritten with its sha256 and,
    for the kubelet, the digest of the sources it was built from.
    """
    if entry.source == "dir":  # a directory the user named: used as is, never written
        missing = [c for c in components if not entry.has(c)]
        if missing:
            raise HarnessError(f"binary directory {entry.directory} lacks executable {', '.join(missing)}; "
                               "unset DRAGUARD_BIN_DIR to build it into the cache")
        return
    try:
        manifest = json.loads((entry.directory / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise HarnessError(f"binary directory {entry.directory} has no readable manifest.json: {exc}") from exc
    digest = sources_digest()
    todo = [c for c in components
            if not entry.has(c) or (c == KUBELET and manifest.get("sources", {}).get(c) != digest)
            or (c == SCHEDULER_PERF and not (entry.directory / SCHEDULER_PERF_DATA).is_dir())]
    if not todo:
        return
    go = shutil.which("go")
    if go is None:
        raise HarnessError(f"{', '.join(todo)} missing from {entry.directory} and no Go toolchain to build them: install Go >= 1.26")
    workdir = stage_module(Path(tempfile.mkdtemp(prefix="draguard-gomod-")))
    started = time.monotonic()
    try:
        with entry.directory.with_name(entry.directory.name + ".build.log").open("a") as log:
            for name in todo:
                progress(f"building {name} ({_GO_PACKAGES[name]}) into {entry.directory}")
                partial = entry.directory / f".{name}.partial"
                try:
                    _go_build(go, name, partial, workdir, K8S_VERSION, log, started, progress)
                    if name == SCHEDULER_PERF:
                        _stage_scheduler_perf_data(go, workdir, entry.directory / SCHEDULER_PERF_DATA)
                    partial.rename(entry.directory / name)
                finally:
                    partial.unlink(missing_ok=True)
                manifest.setdefault("sha256", {})[name] = _sha256(entry.directory / name)
                if name == KUBELET:
                    manifest.setdefault("sources", {})[name] = digest
                tmp = entry.directory / ".manifest.json.partial"
                tmp.write_text(json.dumps(manifest, indent=2) + "\n")
                tmp.rename(entry.directory / "manifest.json")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    progress(f"built {', '.join(todo)} in {time.monotonic() - started:.0f}s")


def build_from_source(
    dest_root: Path | None = None,
    version: str = K8S_VERSION,
    components: tuple[str, ...] = (*COMPONENTS, TEST_DRIVER, KUBELET),
    progress: Progress = print,
) -> Binaries:
    """Build the binaries from Go modules; minutes warm, tens of minutes cold on 2 cores."""
    go = shutil.which("go")
    if go is None:
        raise HarnessError(
            "no control-plane binaries found and no Go toolchain to build them: install Go >= 1.26, "
            "or set DRAGUARD_BIN_DIR to a directory with etcd, kube-apiserver, kube-scheduler, kube-controller-manager"
        )
    final = dest_root or cache_entry(version)
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    # The module may sit in a read-only site-packages: build from a private copy.
    workdir = stage_module(Path(tempfile.mkdtemp(prefix="draguard-gomod-")))
    log_path = final.with_name(final.name + ".build.log")
    started = time.monotonic()
    try:
        with log_path.open("w") as log:
            for name in components:
                progress(f"building {name} ({_GO_PACKAGES[name]}) with {go}")
                _go_build(go, name, partial / name, workdir, version, log, started, progress)
        _write_manifest(partial, version, "build")
        if KUBELET in components:
            manifest = json.loads((partial / "manifest.json").read_text())
            manifest["sources"] = {KUBELET: sources_digest()}
            (partial / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        partial.rename(final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    progress(f"built {', '.join(components)} in {time.monotonic() - started:.0f}s into {final}")
    return Binaries(final, "build")


# -- resolution -----------------------------------------------------------------------------------


def resolve(
    bin_dir: str | Path | None = None,
    version: str = K8S_VERSION,
    allow_download: bool | None = None,
    allow_build: bool = True,
    progress: Progress = print,
) -> Binaries:
    """Find a complete set of binaries, fetching or building one if needed (see module docstring)."""
    explicit = bin_dir or os.environ.get("DRAGUARD_BIN_DIR")
    if explicit:
        d = Path(explicit).expanduser()
        missing = [c for c in COMPONENTS if not Binaries(d, "dir").has(c)]
        if missing:
            raise HarnessError(f"binary directory {d} lacks executable {', '.join(missing)}")
        return Binaries(d, "dir")
    entry = cache_entry(version)
    if entry.exists():
        verify_cache_entry(entry)
        return Binaries(entry, "cache")
    # Two processes filling the same cache entry would share its .partial directory (one wipes what
    # the other built): one fills it, the other waits and then finds the entry.
    entry.parent.mkdir(parents=True, exist_ok=True)
    with (entry.parent / f"{entry.name}.lock").open("w") as lock:
        if not _try_lock(lock):
            progress(f"another process is filling {entry}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if entry.exists():
            verify_cache_entry(entry)
            return Binaries(entry, "cache")
        return _fill(entry, version, allow_download, allow_build, progress)


def _try_lock(lock: IO[str]) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _fill(entry: Path, version: str, allow_download: bool | None, allow_build: bool, progress: Progress) -> Binaries:
    """Download or build the cache entry (the caller holds its lock)."""
    if allow_download is None:
        allow_download = os.environ.get("DRAGUARD_DOWNLOAD", "1") != "0"
    if allow_download:
        try:
            return download_release(version=version, progress=progress)
        except HarnessError as exc:
            if not allow_build:
                raise
            progress(f"download failed ({exc}); building from Go modules instead")
    if not allow_build:
        raise HarnessError(f"no control-plane binaries for {version} in {entry} and building is off")
    return build_from_source(version=version, progress=progress)
