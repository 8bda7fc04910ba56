"""Reading the linted set: files and folders of YAML and JSON, multi-document, Helm charts, and
source code (Go, TypeScript, Python) and manifest templates, which :mod:`.sources` reads.

Manifests become documents through :func:`.document.parse_text`. A source file that does not parse is
not checked (``unparsable``); the others are still read.

A folder holding ``Chart.yaml`` is a Helm chart: it is rendered with ``helm template`` when helm is
installed, and otherwise reported as not checked, with the reason. Unreadable or malformed input
raises :class:`LintInputError` (exit 2) naming every bad file, one line each.

Users: the engine. Talks to: the file system and the ``helm`` binary.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .document import Document, LintInputError, Location, NotChecked, parse_text
from .sources import CodeFile, is_code, read_code

__all__ = ["Location", "Document", "NotChecked", "Sources", "LintInputError", "load", "is_code", "MANIFEST_SUFFIXES"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""Files a folder walk picks up; a file named on the command line is read whatever its name."""

SKIPPED_FOLDERS = frozenset({"node_modules", "vendor", "__pycache__"})
"""Dependencies and caches a folder walk does not enter (a project's own code is what is linted)."""

HELM_TIMEOUT_S = 120


@dataclass
class Sources:
    """What :func:`load` found."""

    documents: list[Document] = field(default_factory=list)
    not_checked: list[NotChecked] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    code: list[CodeFile] = field(default_factory=list)
    """What was read from Go, TypeScript and Python files and manifest templates."""


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


def _display(path: Path) -> str:
    text = str(path)
    return text[2:] if text.startswith("./") else text


def _read_code(path: Path, display: str) -> CodeFile:
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
