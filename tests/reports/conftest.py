from __future__ import annotations

from collections.abc import Iterator

import pytest

from browser import Browser, find_chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    binary = find_chromium()
    if binary is None:
        pytest.skip("chromium is not installed (Debian package `chromium`; `make test` installs it when run as root)")
    with Browser(binary) as b:
        yield b
