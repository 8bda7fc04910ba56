"""Progress messages with counts, for long phases (building binaries, starting fleets, deleting pods).

Harness code reports progress through a plain ``Callable[[str], None]``; a message about a phase
with a count is a :class:`Counted`, a ``str`` that also carries ``done`` and ``total``, so a
callback that only prints still works, and the terminal renderer (``draguard.reports.terminal``)
draws a progress bar with rate from it. A callback that sets ``counts = True`` on itself asks for
frequent counted updates (every second or so) rather than the occasional line a log wants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Counted", "Progress", "wants_counts"]

Progress = Callable[[str], None]


class Counted(str):
    """A progress message for a phase that has done ``done`` of ``total`` (None: total unknown) items."""

    phase: str
    done: int
    total: int | None

    def __new__(cls, phase: str, done: int, total: int | None = None) -> Counted:
        text = f"{phase}: {done}/{total}" if total is not None else f"{phase}: {done}"
        self = super().__new__(cls, text)
        self.phase = phase
        self.done = done
        self.total = total
        return self


def wants_counts(progress: Any) -> bool:
    """True when ``progress`` asked for frequent counted updates (``counts = True``)."""
    return bool(getattr(progress, "counts", False))
