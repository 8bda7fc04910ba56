"""A broken invariant, as reports and tests see it: :class:`Violation`."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Violation"]


@dataclass(frozen=True, slots=True)
class Violation:
    """One breach of ``invariant`` at ``time``, naming the objects and devices involved."""

    invariant: str
    """The invariant's registered name (``gang-atomic``)."""
    message: str
    """One sentence for a human: what is wrong, with the numbers."""
    objects: tuple[str, ...] = ()
    """``Kind/namespace/name`` of every object involved (``Pod/ns/gang-a-0``, ``ResourceClaim/ns/...``)."""
    devices: tuple[str, ...] = ()
    """``driver/pool/device`` of every device involved."""
    time: float = 0.0
    """Seconds after the scenario started (the snapshot's time)."""
    key: str = ""
    """The breach's identity over time (default: the message); a breach seen again keeps its start."""
    grace: float = 0.0
    """How long the breach must last, seen in judgment after judgment, before it counts."""

    def __str__(self) -> str:
        return f"{self.invariant}: {self.message}"
