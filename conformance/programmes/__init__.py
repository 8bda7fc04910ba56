"""Certification programmes a bundle is made for, registered by name in :data:`PROGRAMMES`.

A programme is one module with one class registered here (the project's registry class,
``draguard.harness.core.registry``)::

    @PROGRAMMES.register("ai-conformance", summary="...", source="https://github.com/cncf/k8s-ai-conformance")
    class AiConformance: ...

Each class answers :class:`Programme`: ``preflight`` refuses a run it cannot serve before any check
starts, ``render`` turns a certify run into the files the programme wants in the bundle (written
by :func:`draguard.reports.bundle.write_bundle`, the only writer), and ``verify`` reads an unpacked
bundle through :class:`BundleView` and adds what it finds to a
:class:`~draguard.reports.bundle.Verification`. ``draguard certify`` calls them
(:mod:`draguard.conformance.certify`); ``verify-conformance`` runs on every ``--verify``.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from draguard.harness.core.registry import Registry
from draguard.harness.result import RunResult
from draguard.reports.bundle import SUBMISSION, Verification

__all__ = ["PROGRAMMES", "Programme", "BundleView", "Case", "release_of", "programme"]


class Programme(Protocol):
    """What a registered programme class gives once instantiated (no arguments)."""

    def preflight(self, release: str | None) -> None:
        """Raise :class:`~draguard.harness.core.errors.UsageError` (exit 2) if the run cannot serve it."""

    def render(self, result: RunResult, product: Mapping[str, Any], submission: Mapping[str, Any]) -> dict[str, str]:
        """Files for the bundle: path under the bundle → text."""

    def verify(self, view: BundleView, v: Verification) -> None:
        """Add to ``v.problems`` what is wrong with the bundle and to ``v.requirements`` what is not met."""


PROGRAMMES: Registry[Callable[[], Programme]] = Registry("programme")
"""Programmes by name; filled by importing this package."""

RELEASE = re.compile(r"^v(\d+)\.(\d+)")


def release_of(version: object) -> str | None:
    """``v1.37.2-gke.1`` → ``v1.37``; None for what is not a Kubernetes version."""
    m = RELEASE.match(str(version or ""))
    return f"v{m.group(1)}.{m.group(2)}" if m else None


@dataclass(frozen=True)
class Case:
    """One testcase of ``junit_01.xml``: its name (the check id), its outcome and message."""

    name: str
    status: str
    """passed, failed, error or skipped."""
    message: str = ""


class BundleView:
    """Read-only access to an unpacked bundle's files, each parsed once; a file that cannot be read
    or parsed reads as None (the programme that needs it says so)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def text(self, name: str) -> str | None:
        try:
            return (self.root / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def yaml(self, name: str) -> Any:
        text = self.text(name)
        if text is None:
            return None
        try:
            return YAML(typ="safe").load(text)
        except YAMLError:
            return None

    @cached_property
    def submission(self) -> dict[str, Any]:
        text = self.text(SUBMISSION)
        try:
            data = json.loads(text) if text is not None else None
        except ValueError:
            data = None
        return data if isinstance(data, dict) else {}

    @cached_property
    def cases(self) -> dict[str, Case] | None:
        """junit_01.xml's testcases by name; None when it is missing or not XML."""
        text = self.text("junit_01.xml")
        if not text:
            return None
        try:
            root = ET.fromstring(text)
        except ET.ParseError:
            return None
        out: dict[str, Case] = {}
        for case in root.iter("testcase"):
            name = case.get("name") or ""
            status, message = "passed", ""
            for tag, outcome in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
                child = case.find(tag)
                if child is not None:
                    status, message = outcome, child.get("message") or ""
                    break
            out[name] = Case(name, status, message)
        return out

    @cached_property
    def logged(self) -> dict[str, str] | None:
        """e2e.log's checks: id → status, from its ``[STATUS] id (1.0s)`` lines; None when missing."""
        text = self.text("e2e.log")
        if text is None:
            return None
        found = re.findall(r"^\[([A-Z-]+)\] (\S+) \(", text, re.M)
        return {name: status.lower() for status, name in found}


def programme(name: str) -> Programme:
    """An instance of the programme ``name``; KeyError naming the known ones."""
    return PROGRAMMES.get(name).target()


from . import ai_conformance, verify_conformance  # noqa: E402,F401  (fill the registry)
