"""Fixtures for scenario tests."""

from __future__ import annotations

from typing import Any

import pytest
from scenario_helpers import EXAMPLE, planned_faults

from draguard.harness.core.registry import Registry


@pytest.fixture
def faults() -> Registry[Any]:
    return planned_faults()


@pytest.fixture
def example_text() -> str:
    return EXAMPLE.read_text()
