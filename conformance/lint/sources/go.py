"""Go sources (controllers, operators), parsed with the tree-sitter Go grammar.

Beyond the shared walk (composite literals: ``corev1.ResourceList{"nvidia.com/gpu": ...}``,
``Limits: ...``, ``corev1.ResourceName("...")``, raw and interpreted strings), Go has two spellings
of its own:

- an import of a resource.k8s.io version's packages (``k8s.io/api/resource/v1beta1``, client-go's
  typed clients, listers, informers, apply configurations): a group/version like any other, with
  the kinds the file uses from that package;
- a constant or variable typed ``ResourceName`` whose value names an accelerator
  (``const gpu corev1.ResourceName = "nvidia.com/gpu"``).

Users: :mod:`.` (the source reader).
"""

from __future__ import annotations

import re

import tree_sitter
import tree_sitter_go

from ..knowledge import knowledge
from .common import Grammar, SourceText, _walk, decode_string, unwrap
from .model import CodeFile, ResourceUse, VersionUse

__all__ = ["GO"]

# k8s.io/api/resource/<v>, k8s.io/client-go/{kubernetes/typed,listers,informers,applyconfigurations}/resource/<v>
_IMPORT = re.compile(r"k8s\.io/(?:api|client-go(?:/[\w.-]+)+)/resource/(v[0-9a-z]+)")
_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice", "DeviceTaintRule"})
_KIND_SUFFIXES = ("", "List", "Spec", "Status", "s", "Interface", "Lister", "Informer", "ApplyConfiguration")


def _extra(root: tree_sitter.Node, src: SourceText, code: CodeFile) -> None:
    imports: dict[str, tuple[str, tree_sitter.Node]] = {}  # alias -> (version, the path literal)
    used: dict[str, set[str]] = {}
    know = knowledge()
    for node in _walk(root):
        if node.type == "import_spec":
            path = node.child_by_field_name("path")
            if path is None:
                continue
            value = decode_string(GO, src, path).value
            match = _IMPORT.fullmatch(value)
            if match:
                alias = node.child_by_field_name("name")
                name = src.slice(alias) if alias is not None else value.rsplit("/", 1)[-1]
                imports[name] = (match[1], path)
        elif node.type in ("qualified_type", "selector_expression"):
            qualifier = node.child_by_field_name("package") or node.child_by_field_name("operand")
            member = node.child_by_field_name("name") or node.child_by_field_name("field")
            if qualifier is not None and member is not None:
                text = src.slice(member)
                for kind in _KINDS:
                    if text.startswith(kind) and text[len(kind) :] in _KIND_SUFFIXES:
                        used.setdefault(src.slice(qualifier), set()).add(kind)
        elif node.type in ("const_spec", "var_spec"):
            typ = node.child_by_field_name("type")
            values = node.child_by_field_name("value")
            if typ is None or values is None or not src.slice(typ).endswith("ResourceName"):
                continue
            for value_node in values.named_children:
                literal = unwrap(GO, value_node)
                if literal is None or literal.type not in GO.strings:
                    continue
                name = decode_string(GO, src, literal).value
                if know.is_accelerator_resource(name):
                    code.resource_uses.append(
                        ResourceUse(
                            name, None, src.at(literal), f"a {src.slice(typ)} constant", literal.start_byte, literal.end_byte
                        )
                    )
    for package, (version, path_node) in imports.items():
        kinds = tuple(sorted(used.get(package, set())))
        code.versions.append(VersionUse(version, kinds, src.at(path_node), f"import {src.slice(path_node)}"))


GO = Grammar(
    name="Go",
    language=tree_sitter.Language(tree_sitter_go.language()),
    strings=frozenset({"interpreted_string_literal", "raw_string_literal"}),
    escapes=frozenset({"escape_sequence"}),
    substitutions=frozenset(),
    entries=frozenset({"keyed_element"}),
    calls=frozenset({"call_expression"}),
    numbers=frozenset({"int_literal", "float_literal"}),
    wrappers=frozenset({"literal_element", "parenthesized_expression"}),
    extra=_extra,
)
