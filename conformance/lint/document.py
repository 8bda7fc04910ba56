"""The linted documents: a manifest (or an item of a ``kind: List``) with the place of every field,
where it came from, the paths not checked, and the input error; :func:`parse_text` makes them from a
YAML or JSON text.

Parsed with ruamel.yaml's round-trip loader, which keeps the line and column of every mapping key,
value and sequence item, so that a finding can point at the exact field. JSON is YAML too; a JSON text
ruamel cannot read (tabs in indentation) falls back to the json module and its findings point at the
file's first line.

Users: the reader (:mod:`.reader`), the source-code readers (:mod:`.sources`), the engine, the
inventory and the rules. Talks to: nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from draguard.harness.core.errors import UsageError

__all__ = ["Location", "TextOrigin", "Document", "NotChecked", "LintInputError", "parse_text"]


class LintInputError(UsageError):
    """Some input could not be read or parsed; one line per bad file."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True, order=True)
class Location:
    """A 1-based position in a linted file."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class TextOrigin:
    """Maps positions in a text parsed out of a file (a string literal's value) back into that file.

    ``points[i]`` is the 0-based (line, column) in the file of the text's ``i``-th character, and
    ``points[len(text)]`` that of its end; an escape sequence's characters all map to the escape.
    """

    def __init__(self, text: str, points: Sequence[tuple[int, int]]) -> None:
        self.points = list(points)
        self.line_starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]

    def place(self, file: str, line: int, column: int) -> Location:
        if not self.points:
            return Location(file, 1, 1)
        start = self.line_starts[min(line, len(self.line_starts) - 1)]
        index = min(start + column, len(self.points) - 1)
        row, col = self.points[index]
        return Location(file, row + 1, col + 1)


@dataclass(frozen=True)
class Document:
    """One YAML/JSON document: a top-level mapping, with the means to locate its nodes."""

    file: str
    index: int
    obj: Mapping[str, Any]
    line_offset: int = 0
    """Added to ruamel's line numbers (rendered Helm documents are parsed one at a time)."""
    origin: TextOrigin | None = None
    """Where the parsed text sits in its file, when it is a string literal in source code."""

    @property
    def api_version(self) -> str:
        value = self.obj.get("apiVersion")
        return value if isinstance(value, str) else ""

    @property
    def kind(self) -> str:
        value = self.obj.get("kind")
        return value if isinstance(value, str) else ""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def name(self) -> str:
        meta = self.obj.get("metadata")
        value = meta.get("name") if isinstance(meta, Mapping) else None
        return value if isinstance(value, str) else ""

    @property
    def namespace(self) -> str | None:
        meta = self.obj.get("metadata")
        value = meta.get("namespace") if isinstance(meta, Mapping) else None
        return value if isinstance(value, str) else None

    def at(self, node: Any = None, key: Any = None) -> Location:
        """Where ``node`` is, or its ``key`` (a mapping key, or a sequence index: the item)."""
        node = self.obj if node is None else node
        lc = getattr(node, "lc", None)
        pos: tuple[int, int] | None = None
        try:
            if lc is not None and key is not None:
                pos = lc.item(key) if isinstance(key, int) and isinstance(node, list) else lc.key(key)
            elif lc is not None:
                pos = (lc.line, lc.col)
        except (KeyError, IndexError, TypeError, AttributeError):
            pos = (lc.line, lc.col) if lc is not None else None
        if pos is None or pos[0] is None:
            root = getattr(self.obj, "lc", None)
            pos = (root.line, root.col) if root is not None and root.line is not None else (0, 0)
        return self._place(pos[0], pos[1])

    def _place(self, line: int, column: int) -> Location:
        """The file position of 0-based ``line``/``column`` in the parsed text."""
        if self.origin is not None:
            return self.origin.place(self.file, line, column)
        return Location(self.file, line + 1 + self.line_offset, column + 1)

    def value_at(self, node: Mapping[str, Any], key: str) -> Location:
        """Where the value of ``node[key]`` starts (for a scalar; a collection's first entry otherwise)."""
        lc = getattr(node, "lc", None)
        try:
            if lc is not None:
                line, col = lc.value(key)
                return self._place(line, col)
        except (KeyError, TypeError, AttributeError):
            pass
        return self.at(node, key)


@dataclass(frozen=True)
class NotChecked:
    """A path the linter did not judge, and why (a Helm chart without helm)."""

    path: str
    reason: str
    unparsable: bool = False
    """The file is source code that does not parse (bad input, unlike a chart with no helm to render it)."""


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    return yaml


def _flatten(obj: Any) -> Iterator[Mapping[str, Any]]:
    """A document, or the items of a ``kind: List`` (``v1/List``, ``PodList``, ...)."""
    if not isinstance(obj, Mapping):
        return
    kind = obj.get("kind")
    items = obj.get("items")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        for item in items:
            if isinstance(item, Mapping):
                yield item
        return
    yield obj


def parse_text(text: str, display: str, line_offset: int = 0, origin: TextOrigin | None = None) -> list[Document]:
    """The documents of one YAML/JSON text; raises :class:`LintInputError` when it is malformed."""
    try:
        loaded = list(_yaml().load_all(text))
    except (YAMLError, ValueError) as exc:
        if display.lower().endswith(".json"):
            try:
                loaded = [json.loads(text)]
            except ValueError as jexc:
                raise LintInputError([f"{display}: cannot parse JSON: {jexc}"]) from jexc
        else:
            raise LintInputError([_yaml_problem(display, exc, line_offset)]) from exc
    docs: list[Document] = []
    for obj in loaded:
        for item in _flatten(obj):
            docs.append(Document(display, len(docs), item, line_offset, origin))
    return docs


def _yaml_problem(display: str, exc: Exception, line_offset: int) -> str:
    mark = getattr(exc, "problem_mark", None) if isinstance(exc, MarkedYAMLError) else None
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        return f"{display}:{mark.line + 1 + line_offset}:{mark.column + 1}: cannot parse YAML: {problem}"
    return f"{display}: cannot parse YAML: {problem}"
