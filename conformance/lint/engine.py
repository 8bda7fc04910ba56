"""Running the rules: load the linted set, build the inventory, collect findings in file order.

Users: the CLI (``draguard lint``) and the tests. Talks to: the loader, the rules, and with
``--server`` the API server through :mod:`.server`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from . import rules as _rules  # noqa: F401  (registers the static rules)
from . import server as _server  # noqa: F401  (registers server-rejected)
from .inventory import build
from .registry import RULES, Rule, Severity
from .server import ServerCheck
from .document import Document, LintInputError, NotChecked
from .reader import load
from .sources import CodeFile

__all__ = ["Finding", "Report", "lint", "lint_documents", "DEFAULT_TARGET_RELEASE", "parse_release"]

DEFAULT_TARGET_RELEASE = (1, 37)


def parse_release(text: str) -> tuple[int, int]:
    """``"1.37"`` -> ``(1, 37)``; raises ValueError otherwise."""
    major, _, minor = text.strip().lstrip("v").partition(".")
    minor = minor.split(".")[0]
    if not (major.isdigit() and minor.isdigit()):
        raise ValueError(f"{text!r} is not a Kubernetes release like 1.37")
    return int(major), int(minor)


@dataclass(frozen=True, order=True)
class Finding:
    """One rule violation at one place."""

    file: str
    line: int
    column: int
    rule: str
    severity: Severity
    message: str

    @property
    def fix(self) -> str:
        return RULES[self.rule].fix


@dataclass
class Report:
    """The result of a lint run."""

    findings: list[Finding] = field(default_factory=list)
    not_checked: list[NotChecked] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    target_release: tuple[int, int] = DEFAULT_TARGET_RELEASE

    @property
    def errors(self) -> int:
        return sum(f.severity is Severity.ERROR for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity is Severity.WARNING for f in self.findings)


def lint_documents(
    documents: Sequence[Document],
    target_release: tuple[int, int] = DEFAULT_TARGET_RELEASE,
    server: ServerCheck | None = None,
    code: Sequence[CodeFile] = (),
) -> list[Finding]:
    """Findings of every rule over already loaded documents (and source files), sorted by place then rule."""
    inv = build(list(documents), target_release)
    inv.code = list(code)
    inv.server = server
    found: set[Finding] = set()
    for r in RULES.values():
        if r.needs_server and server is None:
            continue
        for v in r.check(inv):
            found.add(Finding(v.at.file, v.at.line, v.at.column, r.id, r.severity, v.message))
    return sorted(found)


def lint(
    paths: Iterable[str | os.PathLike[str]],
    target_release: tuple[int, int] = DEFAULT_TARGET_RELEASE,
    server: ServerCheck | None = None,
) -> Report:
    """Lint files and folders; raises LintInputError (a UsageError) on unreadable or malformed input,
    and when every file is source code that does not parse (nothing could be checked)."""
    sources = load(paths)
    unparsable = [n for n in sources.not_checked if n.unparsable]
    if unparsable and not sources.files:
        raise LintInputError([f"{n.path}: not checked: {n.reason}" for n in unparsable])
    findings = lint_documents(sources.documents, target_release, server, sources.code)
    not_checked = list(sources.not_checked) + (list(server.not_checked) if server else [])
    rules = [r for r in RULES.values() if server is not None or not r.needs_server]
    return Report(findings, not_checked, list(sources.files), rules, target_release)
