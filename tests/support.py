"""Helpers shared by the end-to-end tests (on the test path through ``pythonpath`` in pyproject.toml)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait(fn: Callable[[], T], what: str = "condition", timeout: float = 30.0) -> T:
    """Poll ``fn`` until it returns something truthy and return that; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)
