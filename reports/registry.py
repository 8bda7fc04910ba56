"""The report formats, registered by name on the one registry class (``draguard.harness.core.registry``).

A format is one module with one function ``render(result, out) -> list[Path]`` that reads only the
result model and returns the files it wrote under ``out`` (the terminal writes none)::

    @REPORTS.register("junit", summary="JUnit XML: one testcase per scenario x invariant and per step")
    def render(result: RunResult, out: Path) -> list[Path]: ...
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from draguard.harness.core.registry import Registry
from draguard.harness.result import RunResult

__all__ = ["REPORTS", "Renderer"]

Renderer = Callable[[RunResult, Path], list[Path]]

REPORTS: Registry[Renderer] = Registry("report")
"""Report formats by name; filled by importing ``draguard.reports``."""
