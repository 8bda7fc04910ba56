"""TypeScript and TSX sources (CDK, cdk8s and Pulumi programs, controllers), parsed with the
tree-sitter TypeScript grammars.

The shared walk covers what these programs write: object literals (``resources: {limits:
{"nvidia.com/gpu": 1}}``), cdk8s quantities (``k8s.Quantity.fromNumber(2)``), Pulumi's plain
strings, and template literals holding YAML (``${...}`` substitutions read as a placeholder).

Users: :mod:`.` (the source reader).
"""

from __future__ import annotations

import tree_sitter
import tree_sitter_typescript

from .common import Grammar

__all__ = ["TYPESCRIPT", "TSX"]


def _grammar(language: object) -> Grammar:
    return Grammar(
        name="TypeScript",
        language=tree_sitter.Language(language),
        strings=frozenset({"string", "template_string"}),
        escapes=frozenset({"escape_sequence"}),
        substitutions=frozenset({"template_substitution"}),
        entries=frozenset({"pair"}),
        calls=frozenset({"call_expression", "new_expression"}),
        numbers=frozenset({"number"}),
        names=frozenset({"identifier", "property_identifier", "type_identifier"}),
        wrappers=frozenset({"parenthesized_expression", "as_expression", "satisfies_expression", "non_null_expression"}),
    )


TYPESCRIPT = _grammar(tree_sitter_typescript.language_typescript())
TSX = _grammar(tree_sitter_typescript.language_tsx())
