"""Variants of the upstream DRA test driver, each with one planted bug, built with Go's ``-overlay`` flag.

The upstream test driver (``k8s.io/kubernetes/test/e2e/dra/test-driver``, see :mod:`.external`) is what
draguard runs as "a driver written by others". A variant is that driver with one file of the module,
``test/e2e/dra/test-driver/app/kubeletplugin.go``, replaced for the build: each edit names an exact
snippet of the pinned release's file (it must occur once) and what takes its place. The edited file is
written beside the binary with an overlay JSON, and ``go build -overlay`` compiles the test driver from
the module as it sits in the Go module cache (:data:`LOCAL_PACKAGE` says how); no copy of the module is kept.

A variant is a subclass of :class:`Variant` registered with :func:`variant`; its docstring's first line
says which bug it plants. The registry rejects a duplicate name, a missing docstring, or a variant with no
edit. Builds are cached under ``$XDG_CACHE_HOME/draguard/variants/<k8s version>/<name>-<digest>/``,
keyed by the module version and the variant's content hash (:meth:`Variant.digest`), made in a
``.partial`` folder and renamed into place.

``DRAGUARD_TEST_DRIVER_VARIANT=<name>`` makes :func:`draguard.harness.driver.external.find_test_driver`
return that variant's binary (building it when missing), so every command that runs the upstream test
driver (``draguard run --cluster local --driver test-driver.cdi.k8s.io``, ``draguard external-driver``,
the suites' tests) runs the variant instead.

Talks to: ``go`` (``go list -m`` to find the module, ``go build -overlay``), the filesystem.
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
from pathlib import Path
from typing import ClassVar, TypeVar

from draguard.harness.core.errors import DefinitionError, HarnessError, UsageError
from draguard.harness.core.fsio import publishing
from draguard.harness.core.paths import cache_dir

from ..cluster import binaries

__all__ = [
    "MODULE",
    "PLUGIN_FILE",
    "PACKAGE",
    "VARIANT_ENV",
    "Edit",
    "Variant",
    "VARIANTS",
    "variant",
    "get_variant",
    "module_dir",
    "apply_edits",
    "variant_binary",
    "build_variant",
]

MODULE = "k8s.io/kubernetes"
PLUGIN_FILE = "test/e2e/dra/test-driver/app/kubeletplugin.go"
"""The one file of the module that a variant replaces."""
PACKAGE = "k8s.io/kubernetes/test/e2e/dra/test-driver"
VARIANT_ENV = "DRAGUARD_TEST_DRIVER_VARIANT"
"""Names the variant that :func:`draguard.harness.driver.external.find_test_driver` returns."""

Edit = tuple[str, str]
"""(exact snippet of the pinned file, its replacement)."""


class Variant:
    """The upstream test driver as released: no edit."""

    name: ClassVar[str] = "unmodified"
    edits: ClassVar[tuple[Edit, ...]] = ()

    @classmethod
    def describe(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0]

    @classmethod
    def digest(cls, version: str = binaries.K8S_VERSION) -> str:
        """The content hash that keys the variant's build: the module version and its edits."""
        payload = json.dumps({"version": version, "file": PLUGIN_FILE, "edits": cls.edits}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


VARIANTS: dict[str, type[Variant]] = {}

V = TypeVar("V", bound=type[Variant])


def variant(name: str) -> Callable[[V], V]:
    """Class decorator: register a variant of the upstream test driver under ``name``."""

    def register(cls: V) -> V:
        where = f"variant class {cls.__qualname__}"
        if not (isinstance(cls, type) and issubclass(cls, Variant)):
            raise DefinitionError(f"{where}: must subclass Variant")
        if name in VARIANTS or name == Variant.name:
            raise DefinitionError(f"{where}: name {name!r} is already taken")
        if not (cls.__doc__ or "").strip() or cls.__doc__ == Variant.__doc__:
            raise DefinitionError(f"{where}: add a docstring that says which bug it plants")
        if not cls.edits:
            raise DefinitionError(f"{where}: a variant plants its bug with at least one edit")
        cls.name = name
        VARIANTS[name] = cls
        return cls

    return register


def get_variant(name: str) -> type[Variant]:
    """The registered variant ``name`` (``unmodified`` is the driver as released); UsageError otherwise."""
    if name == Variant.name:
        return Variant
    try:
        return VARIANTS[name]
    except KeyError:
        raise UsageError(f"unknown upstream test driver variant {name!r}; known: "
                         f"{', '.join([Variant.name, *sorted(VARIANTS)])}") from None


# -- the planted bugs (edits of test/e2e/dra/test-driver/app/kubeletplugin.go at v1.37.2) -------------


@variant("cdi-left-behind")
class CdiLeftBehind(Variant):
    """Unprepare forgets the claim but leaves its CDI spec on the node."""

    edits = (("if err := ex.fileOps.Remove(filePath); err != nil {", "if err := error(nil); err != nil {"),)


@variant("non-idempotent-prepare")
class NonIdempotentPrepare(Variant):
    """A repeated prepare of a prepared claim prepares it afresh: a new CDI device name replaces the old one."""

    edits = (
        ("\tif result, ok := ex.prepared[claimID]; ok {\n\t\t// Idempotent call, nothing to do.\n\t\treturn result, nil\n\t}\n",
         "\trepeat := \"\"\n\tif _, ok := ex.prepared[claimID]; ok {\n"
         "\t\trepeat = fmt.Sprintf(\"-again%d\", len(ex.gRPCCalls))\n\t}\n"),
        ('deviceName := "claim-" + string(claim.UID) + "-" + baseRequestName\n',
         'deviceName := "claim-" + string(claim.UID) + "-" + baseRequestName + repeat\n'),
    )


@variant("forget-before-cleanup")
class ForgetBeforeCleanup(Variant):
    """Unprepare drops the claim from its records, then fails before removing its CDI spec; a retry finds nothing to do."""

    edits = (
        ("\tfor _, device := range devices {\n\t\t// In practice we only prepare one",
         "\tdelete(ex.prepared, claimID)\n\tif len(devices) > 0 {\n"
         "\t\treturn fmt.Errorf(\"claim %s: CDI files not removed yet\", claimRef.UID)\n\t}\n"
         "\tfor _, device := range devices {\n\t\t// In practice we only prepare one"),
    )


@variant("unknown-unprepare-error")
class UnknownUnprepareError(Variant):
    """Unprepare of a claim the driver does not hold (never prepared, already unprepared, lost in a restart) errs."""

    edits = (
        ("\tif !ok {\n\t\t// Idempotent call, nothing to do.\n\t\treturn nil\n\t}\n",
         "\tif !ok {\n\t\treturn fmt.Errorf(\"claim %s is not prepared\", claimRef.UID)\n\t}\n"),
    )


@variant("lock-across-slow-prepare")
class LockAcrossSlowPrepare(Variant):
    """A first prepare of a claim takes 2 s of device set-up while it holds the driver's one lock."""

    edits = (
        ("\tvar devices []kubeletplugin.Device\n\tfor _, result := range claim.Status.Allocation.Devices.Results {",
         "\ttime.Sleep(2 * time.Second)\n"
         "\tvar devices []kubeletplugin.Device\n\tfor _, result := range claim.Status.Allocation.Devices.Results {"),
    )


@variant("cdi-wrong-device")
class CdiWrongDevice(Variant):
    """The CDI spec names another device than the CDI device ID that prepare answers."""

    edits = (("\t\t\t\t\tName: deviceName,\n", "\t\t\t\t\tName: deviceName + \"-other\",\n"),)


@variant("batch-abort")
class BatchAbort(Variant):
    """The first claim of a batch that fails to prepare aborts the whole call, the other claims with it."""

    edits = (
        ("\t\tif err != nil {\n\t\t\tclaimResult.Err = err\n\t\t} else {",
         "\t\tif err != nil {\n\t\t\treturn nil, fmt.Errorf(\"prepare claim %s: %w\", claim.UID, err)\n\t\t} else {"),
    )


# -- building ---------------------------------------------------------------------------------------

MAIN_FILE = "test/e2e/dra/test-driver/dra-test-driver.go"
LOCAL_PACKAGE = "upstreamvariant"
"""Go refuses an overlay that replaces a file in the module cache, so the build serves the test driver's
package under the staged main module instead: ``<workdir>/upstreamvariant/`` (its ``main``) and
``upstreamvariant/app/`` (the module's ``app`` files as they are, ``kubeletplugin.go`` edited). Only the
main file's import of ``app`` changes; every other package comes from the module cache unchanged."""


def _retarget_main(text: str) -> str:
    old = f'"{PACKAGE}/app"'
    if text.count(old) != 1:
        raise HarnessError(f"{MAIN_FILE}: expected one import of {old}")
    return text.replace(old, f'"draguard.dev/k8sbins/{LOCAL_PACKAGE}/app"')


def overlay_map(module: Path, workdir: Path, folder: Path) -> dict[str, str]:
    """The overlay's ``Replace`` map: each file of the staged package -> where its content is read
    (the module cache for unchanged files; ``folder`` for the edited ``kubeletplugin.go`` and ``main.go``)."""
    app = (module / PLUGIN_FILE).parent
    files = {str(workdir / LOCAL_PACKAGE / "main.go"): str(folder / "main.go")}
    for src in sorted(app.glob("*.go")):
        if src.name.endswith("_test.go"):
            continue
        target = folder / src.name if src.name == Path(PLUGIN_FILE).name else src
        files[str(workdir / LOCAL_PACKAGE / "app" / src.name)] = str(target)
    return files



def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise HarnessError("building an upstream test driver variant needs a Go toolchain (Go >= 1.26)")
    return go


def _env() -> dict[str, str]:
    return dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod", GOTOOLCHAIN="local")


def module_dir(workdir: Path | None = None) -> Path:
    """The pinned ``k8s.io/kubernetes`` module's folder in the Go module cache (``go list -m``)."""
    staged = workdir or binaries.stage_module(Path(tempfile.mkdtemp(prefix="draguard-gomod-")))
    try:
        done = subprocess.run([_go(), "list", "-m", "-f", "{{.Dir}}", MODULE], cwd=staged, env=_env(),
                              capture_output=True, text=True, check=False, timeout=600)
    finally:
        if workdir is None:
            shutil.rmtree(staged, ignore_errors=True)
    if done.returncode != 0 or not done.stdout.strip():
        raise HarnessError(f"cannot locate the {MODULE} module source: {done.stderr.strip()[-500:]}")
    return Path(done.stdout.strip())


def apply_edits(source: str, cls: type[Variant]) -> str:
    """``source`` with each of the variant's edits applied; HarnessError when a snippet does not occur exactly once."""
    for i, (old, new) in enumerate(cls.edits):
        count = source.count(old)
        if count != 1:
            raise HarnessError(f"variant {cls.name}: edit {i + 1} of {PLUGIN_FILE} expects its snippet once, "
                               f"found it {count} time(s) (a different module version?): {old.strip()[:60]!r}")
        source = source.replace(old, new)
    return source


def variant_dir(cls: type[Variant], version: str = binaries.K8S_VERSION) -> Path:
    return cache_dir() / "variants" / version / f"{cls.name}-{cls.digest(version)}"


def variant_binary(name: str, version: str = binaries.K8S_VERSION) -> Path | None:
    """The cached binary of variant ``name``, or None when it has not been built."""
    path = variant_dir(get_variant(name), version) / binaries.TEST_DRIVER
    return path if path.is_file() and os.access(path, os.X_OK) else None


def build_variant(name: str, version: str = binaries.K8S_VERSION, progress: Callable[[str], None] = print) -> Path:
    """Build variant ``name`` (cached: see the module docstring) and return its binary.

    Its folder holds the binary, the edited ``kubeletplugin.go``, ``overlay.json`` and ``variant.json``
    (name, bug, module file, digest, the module file's sha256). A minute or so with a warm Go build cache.
    """
    if version != binaries.K8S_VERSION:
        raise UsageError(f"variants are built against the pinned module {binaries.K8S_VERSION}, not {version}")
    cls = get_variant(name)
    found = variant_binary(name, version)
    if found is not None:
        return found
    final = variant_dir(cls, version)
    workdir = binaries.stage_module(Path(tempfile.mkdtemp(prefix="draguard-gomod-")))
    started = time.monotonic()
    try:
        with publishing(final) as partial:
            _build_variant(cls, name, version, workdir, final, partial, progress)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    progress(f"built variant {name} in {time.monotonic() - started:.0f}s into {final}")
    return final / binaries.TEST_DRIVER


def _build_variant(cls: type[Variant], name: str, version: str, workdir: Path, final: Path, partial: Path,
                   progress: Callable[[str], None]) -> None:
    """Edit, build and describe one variant into ``partial`` (published as ``final``)."""
    module = module_dir(workdir)
    original = module / PLUGIN_FILE
    text = original.read_text()
    edited = partial / "kubeletplugin.go"
    edited.write_text(apply_edits(text, cls))
    main = partial / "main.go"
    main.write_text(_retarget_main((module / MAIN_FILE).read_text()))
    progress(f"building upstream test driver variant {name} ({cls.describe()})")
    for folder, overlay in ((partial, partial / ".overlay-build.json"), (final, partial / "overlay.json")):
        overlay.write_text(json.dumps({"Replace": overlay_map(module, workdir, folder)}, indent=1) + "\n")
    done = subprocess.run([_go(), "build", "-trimpath", "-overlay", str(partial / ".overlay-build.json"), "-o",
                           str(partial / binaries.TEST_DRIVER), f"./{LOCAL_PACKAGE}"], cwd=workdir, env=_env(),
                          capture_output=True, text=True, check=False, timeout=1800)
    (partial / ".overlay-build.json").unlink()
    if done.returncode != 0:
        raise HarnessError(f"go build of variant {name} failed:\n{done.stderr.strip()[-2000:]}")
    (partial / "variant.json").write_text(json.dumps({
        "name": name, "bug": cls.describe(), "module": f"{MODULE}@{version}", "file": PLUGIN_FILE,
        "digest": cls.digest(version), "moduleFileSha256": hashlib.sha256(text.encode()).hexdigest(),
    }, indent=1) + "\n")
