"""Source code the linter reads besides manifests: Go, TypeScript (and TSX) and Python files, and
manifest template files (``*.yaml.tmpl``, ``*.yaml.j2``, ...).

Each language module describes its tree-sitter grammar; :mod:`.common` holds the shared walk and
:mod:`.model` the facts it yields (a :class:`~.model.CodeFile` per file). A file that does not parse
is not checked, with the place of the first syntax error; manifests embedded in string literals
become documents located in the source file and go through every manifest rule.

Users: the loader (``source.load``), the inventory and the rules. Talks to: tree-sitter.
"""

from __future__ import annotations

from pathlib import Path

import tree_sitter

from .common import Grammar, SourceText, analyse, embedded, first_error
from .go import GO
from .model import CodeFile, PodSpecInCode, ResourceUse, VersionUse
from .python import PYTHON
from .typescript import TSX, TYPESCRIPT

__all__ = [
    "CODE_SUFFIXES",
    "TEMPLATE_SUFFIXES",
    "CodeFile",
    "PodSpecInCode",
    "ResourceUse",
    "VersionUse",
    "is_code",
    "read_code",
]

GRAMMARS: dict[str, Grammar] = {
    ".go": GO,
    ".ts": TYPESCRIPT,
    ".mts": TYPESCRIPT,
    ".cts": TYPESCRIPT,
    ".tsx": TSX,
    ".py": PYTHON,
}
CODE_SUFFIXES = tuple(GRAMMARS)
TEMPLATE_SUFFIXES = (".tmpl", ".tpl", ".gotmpl", ".j2", ".jinja", ".jinja2", ".template")
"""A manifest template is ``NAME.yaml.tmpl`` (``.yml``, ``.json`` and each of these suffixes)."""
_MANIFEST_STEMS = (".yaml", ".yml", ".json")


def is_template(path: Path) -> bool:
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    return len(suffixes) == 2 and suffixes[0] in _MANIFEST_STEMS and suffixes[1] in TEMPLATE_SUFFIXES


def is_code(path: Path) -> bool:
    """Whether the file is read as source code or a template rather than as a manifest."""
    return path.suffix.lower() in GRAMMARS or is_template(path)


def read_code(data: bytes, path: Path, display: str) -> CodeFile:
    """The facts of one source or template file; raises UnicodeDecodeError for non-UTF-8 bytes."""
    src = SourceText(data, display)
    if is_template(path):
        code = CodeFile(display, "template")
        embedded(src.text, None, src.at(0), code, "template")
        return code
    grammar = GRAMMARS[path.suffix.lower()]
    tree = tree_sitter.Parser(grammar.language).parse(data)
    error = first_error(tree.root_node)
    if error is not None:
        return CodeFile(display, grammar.name, parse_error=src.at(error))
    return analyse(grammar, src, tree.root_node)
