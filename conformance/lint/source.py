"""Reading the linted set: files and folders of YAML and JSON, multi-document, Helm charts, and
source code (Go, TypeScript, Python) and manifest templates, which :mod:`.sources` reads.

Everything is parsed with ruamel.yaml's round-trip loader, which keeps the line and column of every
mapping key, value and sequence item, so that a finding can point at the exact field. JSON is
YAML too; a JSON file ruamel cannot read (tabs in indentation) falls back to the json module and
its findings point at the file's first line. A source file that does not parse is not checked
(``unparsable``); the others are still read.

A folder holding ``Chart.yaml`` is a Helm chart: it is rendered with ``helm template`` when helm is
installed, and otherwise reported as not checked, with the reason. Unreadable or malformed input
raises :class:`LintInputError` (exit 2) naming every bad file, one line each.

Users: the engine. Talks to: the file system and the ``helm`` binary.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from draguard.harness.core.errors import UsageError

if TYPE_CHECKING:
    from .sources import CodeFile

__all__ = ["Location", "Document", "NotChecked", "Sources", "LintInputError", "load", "MANIFEST_SUFFIXES"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""Files a folder walk picks up; a file named on the command line is read whatever its name."""

SKIPPED_FOLDERS = frozenset({"node_modules", "vendor", "__pycache__"})
"""Dependencies and caches a folder walk does not enter (a project's own code is what is linted)."""

HELM_TIMEOUT_S = 120


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


@dataclass
class Sources:
    """What :func:`load` found."""

    documents: list[Document] = field(default_factory=list)
    not_checked: list[NotChecked] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    code: list[CodeFile] = field(default_factory=list)
    """What was read from Go, TypeScript and Python files and manifest templates."""


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    return yaml


def _walk(folder: Path) -> Iterator[Path]:
    """Manifest, source and template files and chart folders under ``folder``, sorted; hidden folders
    and :data:`SKIPPED_FOLDERS` skipped."""
    if (folder / "Chart.yaml").is_file():
        yield folder
        return
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise LintInputError([f"{folder}: cannot read the folder: {exc.strerror or exc}"]) from exc
    for entry in entries:
        if entry.name.startswith(".") or (entry.name in SKIPPED_FOLDERS and entry.is_dir()):
            continue
        if entry.is_dir():
            yield from _walk(entry)
        elif (entry.suffix.lower() in MANIFEST_SUFFIXES or is_code(entry)) and entry.is_file():
            yield entry


def is_code(path: Path) -> bool:
    """Whether a file is read as Go, TypeScript or Python source, or as a manifest template."""
    from .sources import is_code as _is_code  # see _read_code

    return _is_code(path)


def _display(path: Path) -> str:
    text = str(path)
    return text[2:] if text.startswith("./") else text


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


def _read_code(path: Path, display: str) -> CodeFile:
    from .sources import read_code  # here, not at the top: the sources package reads this module's types

    try:
        return read_code(path.read_bytes(), path, display)
    except UnicodeDecodeError as exc:
        raise LintInputError([f"{display}: cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from exc
    except OSError as exc:
        raise LintInputError([f"{display}: cannot read: {exc.strerror or exc}"]) from exc


def _read(path: Path, display: str) -> list[Document]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise LintInputError([f"{display}: cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from exc
    except OSError as exc:
        raise LintInputError([f"{display}: cannot read: {exc.strerror or exc}"]) from exc
    return parse_text(text, display)


_SOURCE = re.compile(r"^# Source: (?P<path>\S.*)$")


def _render_chart(chart: Path, display: str) -> tuple[list[Document], NotChecked | None]:
    helm = shutil.which("helm")
    if helm is None:
        return [], NotChecked(display, "Helm chart, and helm is not installed to render its templates")
    try:
        proc = subprocess.run(
            [helm, "template", "draguard-lint", str(chart)],
            capture_output=True,
            text=True,
            timeout=HELM_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], NotChecked(display, f"Helm chart, and helm template failed: {exc}")
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        return [], NotChecked(display, f"Helm chart, and helm template failed: {reason}")
    return _split_rendered(proc.stdout, chart, display), None


def _split_rendered(text: str, chart: Path, display: str) -> list[Document]:
    """Rendered documents, each attributed to its template (``# Source: <chart>/templates/x.yaml``).

    Lines count from the document's start in the rendered output: the template's own lines
    differ wherever it has template logic.
    """
    docs: list[Document] = []
    chunk: list[str] = []
    source = display

    def flush() -> None:
        body = "\n".join(chunk)
        if body.strip():
            for doc in parse_text(body, source):
                docs.append(Document(doc.file, len(docs), doc.obj, doc.line_offset))

    for line in text.splitlines():
        if line.startswith("---"):
            flush()
            chunk, source = [], display
            continue
        match = _SOURCE.match(line)
        if match and not chunk:
            rel = match["path"].split("/", 1)[1] if "/" in match["path"] else match["path"]
            source = _display(Path(display) / rel)
            continue
        chunk.append(line)
    flush()
    return docs


def _chart_of(path: Path) -> Path | None:
    """The Helm chart a file belongs to (its templates are not YAML until rendered), if any."""
    for parent in path.parents:
        if (parent / "Chart.yaml").is_file():
            return parent
    return None


def load(paths: Iterable[str | os.PathLike[str]]) -> Sources:
    """Read every path (file, folder or chart); raises :class:`LintInputError` listing all bad input."""
    sources = Sources()
    problems: list[str] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        display = _display(path)
        if not path.exists():
            problems.append(f"{display}: cannot read: no such file or folder")
            continue
        try:
            chart = _chart_of(path)
            targets = [chart] if chart else list(_walk(path)) if path.is_dir() else [path]
        except LintInputError as exc:
            problems.extend(exc.problems)
            continue
        for target in targets:
            if target.resolve() in seen:
                continue
            seen.add(target.resolve())
            shown = _display(target)
            try:
                if target.is_dir():
                    docs, skipped = _render_chart(target, shown)
                    if skipped:
                        sources.not_checked.append(skipped)
                        continue
                elif is_code(target):
                    code = _read_code(target, shown)
                    if code.parse_error is not None:
                        reason = f"parse error at {code.parse_error}"
                        sources.not_checked.append(NotChecked(shown, reason, unparsable=True))
                        continue
                    sources.code.append(code)
                    sources.not_checked.extend(code.not_checked)
                    docs = code.documents
                else:
                    docs = _read(target, shown)
            except LintInputError as exc:
                problems.extend(exc.problems)
                continue
            sources.files.append(shown)
            sources.documents.extend(docs)
    if problems:
        raise LintInputError(problems)
    return sources
