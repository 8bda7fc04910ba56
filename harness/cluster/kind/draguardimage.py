"""The draguard image: the whole CLI (``draguard certify``, ``run``, ...) for in-cluster runs, built offline.

The same steps as the fake driver's image (:func:`.driverimage.python_image`: the cached bookworm rootfs,
Debian's python3, this checkout's wheel, cp311 manylinux wheels installed by the host's pip), with every
requirement of pyproject's ``project.dependencies``, each pinned to the version installed here, and
``/usr/local/bin/draguard`` (``python3 -m draguard.cli``) as the entry point. deploy/draguard-certify-job.yaml and deploy/sonobuoy-plugin.yaml run it;
``draguard cluster draguard-image`` builds it and loads it into a kind cluster.
Talks to: :mod:`.driverimage` (the shared build), importlib.metadata (the installed versions).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable

from draguard.harness.core.errors import UsageError

from .driverimage import ImageRecipe, PythonImage, pinned, python_image, source_root

__all__ = ["DRAGUARD_REPO", "draguard_image", "draguard_requirements"]

DRAGUARD_REPO = "draguard.dev/draguard"
"""The repository deploy/draguard-certify-job.yaml and deploy/sonobuoy-plugin.yaml name (tag: the version)."""
_SMOKE = ("import draguard.cli.main, draguard.conformance.certify, draguard.harness.kube, draguard.reports.bundle; "
          "print('ok')")  # fmt: skip


def draguard_requirements() -> list[str]:
    """pyproject's ``project.dependencies``, each pinned to the version installed here."""
    pyproject = source_root() / "pyproject.toml"
    try:
        deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise UsageError(f"{pyproject}: cannot read project.dependencies: {exc}") from exc
    names = []
    for dep in deps:
        m = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", dep)
        if not m:
            raise UsageError(f"{pyproject}: project.dependencies: cannot read a name in {dep!r}")
        names.append(m.group(0))
    return pinned(names, "draguard")


def draguard_image(command: tuple[str, str], progress: Callable[[str], None] = print) -> tuple[PythonImage, dict[str, float]]:
    """The draguard image's archive (built, or reused from the cache) and the time each stage took;
    ``command``: (name, module) of the launcher ``/usr/local/bin/<name>`` (the command line's module, which
    the command line layer names)."""
    return python_image(ImageRecipe("draguard", DRAGUARD_REPO, "draguard image", draguard_requirements(),
                                    ["draguard"], _SMOKE, key_extra=("draguard", "command"),
                                    command=command), progress)
