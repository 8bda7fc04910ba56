"""Typed registries of named units of behaviour: fault kinds, invariants and contract checks.

A unit registers itself with a decorator that returns the function or class unchanged and stores a
frozen :class:`Entry` (the pattern of kopf's ``@kopf.on.*``)::

    @FAULTS.register("evict", summary="evict a pod through the Eviction API", params=EvictParams)
    def evict(ctx: StepContext, params: EvictParams) -> None: ...

Misuse (a duplicate name, an empty or multi-line summary, a parameter model that is not a strict
pydantic model, a name that is not kebab-case) raises :class:`~draguard.harness.core.errors.DefinitionError`
at decoration time, naming the function and saying how to fix it.

The module-level registries are filled by importing the packages that define the units:
``draguard.chaos`` fills :data:`FAULTS`, ``draguard.harness.invariants`` fills :data:`INVARIANTS`,
``draguard.conformance`` fills :data:`CHECKS`. Nothing here imports them (harness imports no one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from draguard.harness.core.errors import DefinitionError

__all__ = ["Entry", "Registry", "FAULTS", "INVARIANTS", "CHECKS", "KEBAB", "DOTTED_KEBAB", "CAPABILITIES", "JUDGED"]

T = TypeVar("T", bound=Callable[..., Any])

KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
"""A kebab-case name: ``drain-node``, ``claim-atomic``."""
DOTTED_KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*(\.[a-z][a-z0-9]*(-[a-z0-9]+)*)*$")
"""Dot-separated kebab-case segments, for check ids: ``sanity.unprepare.unknown-claim``."""


CAPABILITIES: Mapping[str, str] = MappingProxyType({
    "fake-driver": "draguard's fake DRA driver on every node",
    "fake-nodes": "draguard's fake node agents",
    "local-backend": "a control plane draguard started itself",
    "interposer": "the gRPC interposer between the nodes and the driver",
    "rpc-faults": "prepare and unprepare calls can be made to fail or hang (draguard's fake driver, or the gRPC "
                  "interposer in front of any driver)",
    "restart-driver": "a node's driver can be restarted (a process draguard runs, an installed driver's "
                      "DaemonSet pod, or a restart command the user gives)",
    "stop-driver": "a node's driver can be taken down for a while and brought back (a process draguard runs, or "
                   "an installed driver's DaemonSet)",
    "kill-node": "a node's agent can be restarted and the node lost (draguard's node agents, or a kind node's container)",
    "rolling-update": "a node's driver can be replaced by a second instance started beside it (draguard's fake driver)",
})
"""What a fault may need from the run (``needs=`` at registration); validation rejects a scenario whose
run lacks one, naming the step and the reason."""

JUDGED = ("continuously", "at-settle", "after-cleanup")
"""When an invariant is judged (``judged=`` at registration): every second while the scenario runs
and again once it settled; once it settled; once the workloads are gone after cleanup."""


@dataclass(frozen=True, slots=True)
class Entry(Generic[T]):
    """One registered unit: its stable name, its one-line rule or summary, and what implements it."""

    name: str
    """Stable kebab-case name used in scenario files, reports and tests."""
    summary: str
    """One sentence: the rule an invariant states, or what a fault does."""
    target: T
    """The decorated function or class, unchanged."""
    params: type[BaseModel] | None = None
    """The pydantic model that validates the ``params`` of a scenario step (faults), or None."""
    meta: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Free-form extra keywords given to ``register`` (read-only)."""


def _describe(target: object) -> str:
    module = getattr(target, "__module__", "?")
    qualname = getattr(target, "__qualname__", repr(target))
    return f"{module}.{qualname}"


class Registry(Generic[T]):
    """Named entries of one kind (``fault``, ``invariant``, ``check``), in registration order."""

    def __init__(self, kind: str, *, name_pattern: re.Pattern[str] = KEBAB) -> None:
        self.kind = kind
        self._pattern = name_pattern
        self._entries: dict[str, Entry[T]] = {}

    def register(
        self,
        name: str,
        *,
        summary: str,
        params: type[BaseModel] | None = None,
        **meta: Any,
    ) -> Callable[[T], T]:
        """Return a decorator that records ``name`` and gives the decorated object back unchanged."""

        def decorate(target: T) -> T:
            where = _describe(target)
            if not callable(target):
                raise DefinitionError(f"{self.kind} {name!r}: {where} is not callable; decorate a function or class")
            if not isinstance(name, str) or not self._pattern.match(name):
                example = "drain-node" if self._pattern is KEBAB else "sanity.prepare.unknown-claim"
                raise DefinitionError(
                    f"{self.kind} name {name!r} on {where} is not "
                    f"{'kebab-case' if self._pattern is KEBAB else 'dotted kebab-case'}; use a name like {example!r}"
                )
            if name in self._entries:
                other = _describe(self._entries[name].target)
                raise DefinitionError(
                    f"{self.kind} {name!r} on {where} is already registered by {other}; choose another name"
                )
            if not isinstance(summary, str) or not summary.strip():
                raise DefinitionError(
                    f"{self.kind} {name!r} on {where} has an empty summary; pass summary='<one sentence>'"
                )
            if "\n" in summary.strip():
                raise DefinitionError(
                    f"{self.kind} {name!r} on {where} has a multi-line summary; keep it to one sentence on one line"
                )
            if params is not None:
                if not (isinstance(params, type) and issubclass(params, BaseModel)):
                    raise DefinitionError(
                        f"{self.kind} {name!r} on {where}: params={params!r} is not a pydantic BaseModel subclass; "
                        "define `class Params(BaseModel)` with model_config = ConfigDict(extra='forbid')"
                    )
                if params.model_config.get("extra") != "forbid":
                    raise DefinitionError(
                        f"{self.kind} {name!r} on {where}: params model {params.__qualname__} accepts unknown keys; "
                        "set model_config = ConfigDict(extra='forbid') so typos in scenario files are caught"
                    )
            for need in meta.get("needs", ()) if self.kind == "fault" else ():
                if need not in CAPABILITIES:
                    raise DefinitionError(
                        f"{self.kind} {name!r} on {where}: needs={need!r} is not a capability; "
                        f"known: {', '.join(CAPABILITIES)}"
                    )
            if "judged" in meta and meta["judged"] not in JUDGED:
                raise DefinitionError(
                    f"{self.kind} {name!r} on {where}: judged={meta['judged']!r}; use one of {', '.join(JUDGED)}"
                )
            self._entries[name] = Entry(
                name=name,
                summary=summary.strip(),
                target=target,
                params=params,
                meta=MappingProxyType(dict(meta)),
            )
            return target

        return decorate

    def get(self, name: str) -> Entry[T]:
        """The entry called ``name``; KeyError (naming the known ones) if there is none."""
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or 'none'}") from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def entries(self) -> list[Entry[T]]:
        """Registered entries, sorted by name."""
        return [self._entries[n] for n in self.names()]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[Entry[T]]:
        return iter(self.entries())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self)} entries)"


FAULTS: Registry[Callable[..., Any]] = Registry("fault")
"""Fault kinds for scenario timelines; filled by importing ``draguard.chaos``."""
INVARIANTS: Registry[Callable[..., Any]] = Registry("invariant")
"""Invariants judged over snapshots; filled by importing ``draguard.harness.invariants``."""
CHECKS: Registry[Callable[..., Any]] = Registry("check", name_pattern=DOTTED_KEBAB)
"""Driver contract checks (ids like ``sanity.unprepare.unknown-claim``); filled by ``draguard.conformance``."""
