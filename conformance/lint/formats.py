"""Rendering a lint report: text (``file:line:col rule-id message``), JSON, SARIF 2.1.0, GitHub annotations.

Users: the CLI. Talks to: nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from .engine import Report
from .registry import Severity

__all__ = ["FORMATS", "render", "SARIF_SCHEMA"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _version() -> str:
    try:
        return metadata.version("draguard")
    except metadata.PackageNotFoundError:
        return "0"


def _release(report: Report) -> str:
    return f"{report.target_release[0]}.{report.target_release[1]}"


def render_text(report: Report) -> str:
    lines = [f"{f.file}:{f.line}:{f.column} {f.rule} {f.severity.value}: {f.message}" for f in report.findings]
    lines += [f"{n.path}: not checked: {n.reason}" for n in report.not_checked]
    files = len(report.files)
    lines.append(
        f"draguard lint: {report.errors} error(s), {report.warnings} warning(s) in {files} file(s)"
        f" for Kubernetes {_release(report)}"
        + (f", {len(report.not_checked)} not checked" if report.not_checked else "")
    )
    return "\n".join(lines) + "\n"


def render_json(report: Report) -> str:
    out = {
        "tool": "draguard lint",
        "version": _version(),
        "targetRelease": _release(report),
        "summary": {"errors": report.errors, "warnings": report.warnings, "files": len(report.files)},
        "findings": [
            {
                "file": f.file,
                "line": f.line,
                "column": f.column,
                "rule": f.rule,
                "severity": f.severity.value,
                "message": f.message,
                "fix": f.fix,
            }
            for f in report.findings
        ],
        "notChecked": [{"path": n.path, "reason": n.reason} for n in report.not_checked],
        "rules": [
            {"id": r.id, "severity": r.severity.value, "statement": r.statement, "fix": r.fix} for r in report.rules
        ],
    }
    return json.dumps(out, indent=2) + "\n"


def _uri(file: str) -> str:
    path = Path(file)
    return path.as_uri() if path.is_absolute() else path.as_posix()


_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning"}


def render_sarif(report: Report) -> str:
    index = {r.id: i for i, r in enumerate(report.rules)}
    rules = [
        {
            "id": r.id,
            "name": "".join(part.capitalize() for part in r.id.split("-")),
            "shortDescription": {"text": r.statement},
            "fullDescription": {"text": r.statement},
            "help": {"text": r.fix},
            "defaultConfiguration": {"level": _LEVEL[r.severity]},
        }
        for r in report.rules
    ]
    results: list[dict[str, Any]] = []
    for f in report.findings:
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "level": _LEVEL[f.severity],
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(f.file)},
                        "region": {"startLine": f.line, "startColumn": f.column},
                    }
                }
            ],
        }
        if f.rule in index:
            result["ruleIndex"] = index[f.rule]
        results.append(result)
    notes = [
        {
            "level": "note",
            "message": {"text": f"not checked: {n.reason}"},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(n.path.split(":")[0])}}}],
        }
        for n in report.not_checked
    ]
    sarif = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "draguard", "version": _version(), "rules": rules}},
                "results": results,
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notes}],
            }
        ],
    }
    return json.dumps(sarif, indent=2) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: Report) -> str:
    """GitHub Actions workflow commands: each finding becomes an annotation on the pull request."""
    lines = []
    for f in report.findings:
        props = f"file={_escape_property(f.file)},line={f.line},col={f.column},title={_escape_property(f.rule)}"
        lines.append(f"::{_LEVEL[f.severity]} {props}::{_escape_data(f.message)}")
    for n in report.not_checked:
        lines.append(f"::notice file={_escape_property(n.path.split(':')[0])}::{_escape_data('not checked: ' + n.reason)}")
    return "\n".join(lines) + ("\n" if lines else "")


FORMATS: dict[str, Callable[[Report], str]] = {
    "text": render_text,
    "json": render_json,
    "sarif": render_sarif,
    "github": render_github,
}


def render(report: Report, fmt: str = "text") -> str:
    """The report in one of :data:`FORMATS`."""
    return FORMATS[fmt](report)
