"""Python sources (operators such as kopf handlers, scripts using the kubernetes client), parsed with
the tree-sitter Python grammar.

The shared walk covers dict literals (``{"limits": {"nvidia.com/gpu": 1}}``), the kubernetes client's
keyword arguments (``V1ResourceRequirements(limits={...})``, ``V1PodSpec(resource_claims=[...])``)
and triple-quoted strings holding YAML; f-string substitutions read as a placeholder and raw strings
keep their backslashes. Docstrings are documentation: a manifest shown in one is not linted.

Users: :mod:`.` (the source reader).
"""

from __future__ import annotations

import tree_sitter
import tree_sitter_python

from .common import Grammar

__all__ = ["PYTHON"]


def _raw(node: tree_sitter.Node) -> bool:
    start = node.children[0] if node.children else None
    return start is not None and start.type == "string_start" and "r" in (start.text or b"").decode().lower()


def _docstring(node: tree_sitter.Node) -> bool:
    """The first statement of a module, class or function body, when it is a lone string."""
    statement = node.parent
    if statement is None or statement.type != "expression_statement" or statement.named_child_count != 1:
        return False
    body = statement.parent
    return body is not None and body.type in ("module", "block") and body.named_children[0] == statement


PYTHON = Grammar(
    name="Python",
    language=tree_sitter.Language(tree_sitter_python.language()),
    strings=frozenset({"string"}),
    escapes=frozenset({"escape_sequence", "escape_interpolation"}),
    substitutions=frozenset({"interpolation"}),
    entries=frozenset({"pair", "keyword_argument"}),
    calls=frozenset({"call"}),
    numbers=frozenset({"integer", "float"}),
    wrappers=frozenset({"parenthesized_expression"}),
    names=frozenset({"identifier"}),
    raw_string=_raw,
    is_doc=_docstring,
)
