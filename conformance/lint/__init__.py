"""The guardrail linter (``draguard lint``): the rules draguard checks at run time, applied to manifests.

Data flows: ``reader`` reads files, folders and Helm charts into located documents; ``inventory``
walks them into pod templates, claims and classes; each module of ``rules/`` registers one check
(or a close pair) with ``registry.rule``; ``engine`` runs them; ``formats`` renders findings as text,
JSON, SARIF 2.1.0 or GitHub annotations; ``server`` adds a server-side dry run.

Users: ``draguard.cli.lint`` and the pre-commit hook.
"""

from __future__ import annotations

from .engine import DEFAULT_TARGET_RELEASE, Finding, Report, lint, lint_documents, parse_release
from .formats import FORMATS, render
from .registry import RULES, Rule, Severity, Violation, rule
from .server import ServerCheck
from .document import LintInputError, Location, NotChecked

__all__ = [
    "DEFAULT_TARGET_RELEASE",
    "FORMATS",
    "Finding",
    "LintInputError",
    "Location",
    "NotChecked",
    "RULES",
    "Report",
    "Rule",
    "ServerCheck",
    "Severity",
    "Violation",
    "lint",
    "lint_documents",
    "parse_release",
    "render",
    "rule",
]
