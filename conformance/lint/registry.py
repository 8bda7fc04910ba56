"""The lint rule registry: each rule is one decorated function with a stable id and a rule sentence.

A rule module registers its check with :func:`rule`; the decorator validates the definition at once
(a kebab-case id never used before, a one-line statement and fix, a function taking the inventory)
and raises :class:`~draguard.harness.core.errors.DefinitionError` naming the function otherwise. The
function is returned unchanged; the frozen :class:`Rule` record lands in :data:`RULES`.

Users: the rule modules in ``rules/`` (register), the engine (runs them), the formatters (rule
metadata for SARIF and JSON).
"""

from __future__ import annotations

import enum
import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from draguard.harness.core.errors import DefinitionError

if TYPE_CHECKING:
    from .inventory import Inventory
    from .document import Location

__all__ = ["Severity", "Violation", "Rule", "RULES", "rule", "CheckFn"]


class Severity(str, enum.Enum):
    """How bad a finding is; an error makes ``draguard lint`` exit 1."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Violation:
    """What a check yields: where, and a message about this occurrence."""

    at: Location
    message: str


CheckFn = Callable[["Inventory"], Iterable[Violation]]
F = TypeVar("F", bound=CheckFn)


@dataclass(frozen=True)
class Rule:
    """A registered rule: the stable id, its severity, the rule sentence, the fix, and the check."""

    id: str
    severity: Severity
    statement: str
    fix: str
    check: CheckFn
    needs_server: bool = False
    """The check judges only with a cluster (``--server``); static examples cannot exercise it."""


RULES: dict[str, Rule] = {}
"""Every registered rule by id, in registration order."""

_ID = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


def rule(
    *, id: str, severity: Severity, statement: str, fix: str, needs_server: bool = False  # noqa: A002
) -> Callable[[F], F]:
    """Register the decorated function as the check of rule ``id``.

    The function takes the :class:`~draguard.conformance.lint.inventory.Inventory` of the linted set
    and yields a :class:`Violation` per occurrence.
    """

    def decorate(fn: F) -> F:
        where = f"lint rule {id!r} ({getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)!s})"
        if not isinstance(id, str) or not _ID.match(id):
            raise DefinitionError(f"{where}: the id must be kebab-case, like 'gang-policy'")
        if id in RULES:
            other = RULES[id].check
            raise DefinitionError(
                f"{where}: the id is already registered by {other.__module__}.{other.__qualname__}; "
                "pick another id"
            )
        if not isinstance(severity, Severity):
            raise DefinitionError(f"{where}: severity must be a Severity, not {severity!r}")
        for label, text in (("statement", statement), ("fix", fix)):
            if not isinstance(text, str) or not text.strip() or "\n" in text.strip():
                raise DefinitionError(f"{where}: the {label} must be one non-empty line")
        if not callable(fn):
            raise DefinitionError(f"{where}: the decorated object is not callable")
        try:
            inspect.signature(fn).bind(object())
        except TypeError:
            raise DefinitionError(f"{where}: the check must take exactly one argument, the inventory") from None
        RULES[id] = Rule(id, severity, statement.strip(), fix.strip(), fn, needs_server)
        return fn

    return decorate
