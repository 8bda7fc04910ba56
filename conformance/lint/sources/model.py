"""What the linter learns from one source file (Go, TypeScript, Python), in the shape the rules ask about.

Language-neutral plain values: the language modules produce them, the rules read them. Nothing here
knows about tree-sitter.

Users: the rules (``extended_resources``, ``api_versions``), the inventory, the loader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ..document import Document, Location, NotChecked

__all__ = ["ResourceUse", "PodSpecInCode", "VersionUse", "CodeFile"]


@dataclass(frozen=True)
class ResourceUse:
    """An accelerator extended resource written as a resource request or limit."""

    name: str
    amount: Fraction | None
    """The quantity when it is a literal (``4``, ``"4"``, ``resource.MustParse("4")``, ``Quantity.fromNumber(4)``)."""
    at: Location
    spelling: str
    """How it is written, for the message: ``a limits entry``, ``corev1.ResourceName(...)``."""
    start: int
    end: int
    """Byte range in the file, to tell which pod spec holds it."""


@dataclass(frozen=True)
class PodSpecInCode:
    """A pod spec built in code that declares ``resourceClaims``, and the accelerator resources inside it."""

    at: Location
    """The resourceClaims key."""
    uses: tuple[ResourceUse, ...]


@dataclass(frozen=True)
class VersionUse:
    """A resource.k8s.io group/version written in code: a string, or a Go import path."""

    version: str
    kinds: tuple[str, ...]
    """The kinds it is used for, when the code says (a sibling ``kind`` field, types of the imported package)."""
    at: Location
    spelling: str


@dataclass
class CodeFile:
    """Everything read from one source file."""

    file: str
    language: str
    parse_error: Location | None = None
    resource_uses: list[ResourceUse] = field(default_factory=list)
    pod_specs: list[PodSpecInCode] = field(default_factory=list)
    versions: list[VersionUse] = field(default_factory=list)
    documents: list[Document] = field(default_factory=list)
    """Manifests embedded in string literals, located in this file."""
    not_checked: list[NotChecked] = field(default_factory=list)
    """Embedded manifests that do not parse."""
