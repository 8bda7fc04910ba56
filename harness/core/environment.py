"""What a run ran on, for the result (``RunResult.environment``, ``ScenarioResult.environment``).

Only facts that help someone reproduce or compare a run: the draguard version, the machine
(architecture, CPUs, memory, Python, OS), and per scenario the Kubernetes server version and feature
gates, the driver and its mutant, the node agent and the node count (filled by the runner).
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Any

__all__ = ["draguard_version", "machine", "run_environment"]


def draguard_version() -> str:
    try:
        return metadata.version("draguard")
    except metadata.PackageNotFoundError:
        return "unknown"


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def machine() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "cpus": os.cpu_count(),
        "memoryBytes": _memory_bytes(),
        "python": platform.python_version(),
    }


def run_environment(seed: int | None = None) -> dict[str, Any]:
    """The environment of a whole run: draguard's version, the machine, the seed override if any."""
    env: dict[str, Any] = {"draguardVersion": draguard_version(), "machine": machine()}
    if seed is not None:
        env["seed"] = seed
    return env
