"""The language-neutral walk over a tree-sitter syntax tree: string literals with their positions,
key/value entries, calls and quantities, and from them the facts the rules read.

Each language module describes its grammar with a :class:`Grammar` (which node types are strings,
escapes, substitutions, key/value entries, calls, numbers) and may add findings of its own (Go import
paths, typed constants). The walk itself is shared:

- a string key that names an accelerator extended resource inside a resource list (the value of a
  ``limits``/``requests`` field or keyword, or a Go ``ResourceList`` literal), or the argument of a
  ``ResourceName(...)`` conversion, is a :class:`~.model.ResourceUse`;
- the object that holds a ``resourceClaims`` field is a pod spec built in code;
- a string that is exactly ``resource.k8s.io/<version>`` is a :class:`~.model.VersionUse`, with the
  kind its sibling ``kind`` field names;
- a string that holds ``apiVersion:`` and ``kind:`` is parsed as YAML/JSON, with positions mapped back
  through the literal (escapes and substitutions included).

Users: the language modules. Talks to: tree-sitter, the YAML loader.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction

import tree_sitter

from draguard.harness.cel import parse_quantity

from ..knowledge import knowledge
from ..document import Document, LintInputError, Location, NotChecked, TextOrigin, parse_text
from .model import CodeFile, PodSpecInCode, ResourceUse, VersionUse

__all__ = ["Grammar", "SourceText", "analyse", "blank_template_actions"]

RESOURCE_FIELDS = frozenset({"limits", "requests", "Limits", "Requests"})
CLAIM_FIELDS = frozenset({"resourceClaims", "ResourceClaims", "resource_claims"})
KIND_FIELDS = frozenset({"kind", "Kind"})
QUANTITY_CALLS = {
    # k8s.io/apimachinery/pkg/api/resource (quantity.go): MustParse, ParseQuantity, NewQuantity;
    # cdk8s (k8s.Quantity.fromNumber/fromString); Pulumi and the Python client take plain strings.
    "MustParse": Fraction(1),
    "ParseQuantity": Fraction(1),
    "NewQuantity": Fraction(1),
    "NewMilliQuantity": Fraction(1, 1000),
    "fromNumber": Fraction(1),
    "fromString": Fraction(1),
    "Quantity": Fraction(1),
}
_DRA_VERSION = re.compile(r"resource\.k8s\.io/(v[0-9a-z]+)")
# The generated kubernetes clients (Python `kubernetes`, TypeScript `@kubernetes/client-node`) name a
# version's models and API class after it: V1beta1ResourceClaim, ResourceV1beta1Api.
_CLIENT_TYPE = re.compile(
    r"V(1(?:alpha|beta)\d+)(ResourceClaim|ResourceClaimTemplate|DeviceClass|ResourceSlice|DeviceTaintRule)"
    r"|ResourceV(1(?:alpha|beta)\d+)Api"
)
_MANIFEST = re.compile(r"""(?:^|[\s{,])["']?apiVersion["']?\s*:""")
_KIND = re.compile(r"""(?:^|[\s{,])["']?kind["']?\s*:""")
_DELIMITERS = frozenset({'"', "'", "`", "string_start", "string_end"})
_ACTION = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)


@dataclass(frozen=True)
class Grammar:
    """The node types of one language's grammar that the walk needs."""

    name: str
    language: tree_sitter.Language
    strings: frozenset[str]
    escapes: frozenset[str]
    substitutions: frozenset[str]
    entries: frozenset[str]
    """Key/value pairs: object or dict entries, Go keyed elements, Python keyword arguments."""
    calls: frozenset[str]
    numbers: frozenset[str]
    wrappers: frozenset[str] = frozenset()
    """Nodes that only wrap an expression (Go literal_element, parentheses, casts)."""
    raw_string: Callable[[tree_sitter.Node], bool] = lambda node: False
    """Whether a string literal's escapes are literal text (Python r"...")."""
    names: frozenset[str] = frozenset()
    """Identifier node types that may name a Kubernetes client type (``V1beta1ResourceClaim``)."""
    is_doc: Callable[[tree_sitter.Node], bool] = lambda node: False
    """Whether a string literal is documentation (a Python docstring): not searched for manifests."""
    extra: Callable[[tree_sitter.Node, SourceText, CodeFile], None] | None = None
    """Language-specific findings, run after the shared walk."""


class SourceText:
    """A source file's bytes and text, and the conversion from tree-sitter byte offsets to 1-based line:column."""

    def __init__(self, data: bytes, display: str) -> None:
        self.data = data
        self.display = display
        self.text = data.decode("utf-8")
        if len(self.text) == len(data):
            self._char_of: list[int] | None = None
        else:
            self._char_of = []
            for i, ch in enumerate(self.text):
                self._char_of.extend([i] * len(ch.encode("utf-8")))
            self._char_of.append(len(self.text))
        self._line_starts = [0] + [i + 1 for i, ch in enumerate(self.text) if ch == "\n"]

    def char(self, byte: int) -> int:
        return byte if self._char_of is None else self._char_of[byte]

    def point(self, byte: int) -> tuple[int, int]:
        """0-based (line, character column) of a byte offset."""
        index = self.char(byte)
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= index:
                lo = mid
            else:
                hi = mid - 1
        return lo, index - self._line_starts[lo]

    def at(self, node: tree_sitter.Node | int) -> Location:
        byte = node if isinstance(node, int) else node.start_byte
        line, column = self.point(byte)
        return Location(self.display, line + 1, column + 1)

    def slice(self, node: tree_sitter.Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8")


def first_error(root: tree_sitter.Node) -> tree_sitter.Node | None:
    """The first ERROR or MISSING node in document order, if the parse failed anywhere."""
    if not root.has_error:
        return None
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            return node
        stack.extend(child for child in reversed(node.children) if child.has_error or child.is_missing)
    return root


def _walk(root: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    cursor = root.walk()
    while True:
        node = cursor.node
        if node is not None:
            yield node
        if cursor.goto_first_child() or cursor.goto_next_sibling():
            continue
        while True:
            if not cursor.goto_parent():
                return
            if cursor.goto_next_sibling():
                break


# --- string literals ---------------------------------------------------------------------------


@dataclass
class StringValue:
    """A decoded string literal and the file position of each of its characters (and of its end)."""

    node: tree_sitter.Node
    value: str
    points: list[tuple[int, int]] = field(default_factory=list)

    def origin(self) -> TextOrigin:
        return TextOrigin(self.value, self.points)


def _decode_escape(text: str) -> str:
    try:
        return codecs.decode(text, "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return text  # an escape Python does not know (JS \u{...}): keep it as written


def decode_string(grammar: Grammar, src: SourceText, node: tree_sitter.Node) -> StringValue:
    """The value of a string literal: the text between its delimiters, escapes decoded, each
    substitution (``${x}``, ``{x}``) replaced by its :func:`placeholder`."""
    children = node.children
    if len(children) >= 2 and children[0].type in _DELIMITERS and children[-1].type in _DELIMITERS:
        start, end = children[0].end_byte, children[-1].start_byte
    else:  # a string with no delimiter tokens
        start, end = node.start_byte, node.end_byte
    raw = grammar.raw_string(node)
    specials: list[tree_sitter.Node] = []
    for inner in _walk(node):
        if inner.start_byte < start or inner.end_byte > end or inner is node:
            continue
        if inner.type in grammar.substitutions or (not raw and inner.type in grammar.escapes):
            if not any(s.start_byte <= inner.start_byte and inner.end_byte <= s.end_byte for s in specials):
                specials.append(inner)
    specials.sort(key=lambda n: n.start_byte)
    out = StringValue(node, "")
    parts: list[str] = []
    pos = start

    def add_raw(a: int, b: int) -> None:
        if a >= b:
            return
        text = src.data[a:b].decode("utf-8")
        parts.append(text)
        line, col = src.point(a)
        for ch in text:
            out.points.append((line, col))
            if ch == "\n":
                line, col = line + 1, 0
            else:
                col += 1

    for special in specials:
        add_raw(pos, special.start_byte)
        if special.type in grammar.substitutions:
            # the substitution as written, made one YAML-safe word (``${name}`` -> ``__name_``), each
            # character at its own place
            text = src.slice(special)
            piece = placeholder(text)
            line, col = src.point(special.start_byte)
            for ch in text:
                out.points.append((line, col))
                line, col = (line + 1, 0) if ch == "\n" else (line, col + 1)
        else:
            if special.type == "escape_interpolation":  # Python f"{{": a literal brace
                piece = src.slice(special)[:1]
            else:
                piece = _decode_escape(src.slice(special))
            out.points.extend([src.point(special.start_byte)] * len(piece))
        parts.append(piece)
        pos = special.end_byte
    add_raw(pos, end)
    out.points.append(src.point(end))  # the end of the text: the closing delimiter
    out.value = "".join(parts)
    return out


_UNSAFE = re.compile(r"[^A-Za-z0-9._]")


def placeholder(text: str) -> str:
    """``text`` (a substitution, a template action) as one word of the same length that YAML reads as
    a plain scalar: ``{{ .Name }}`` -> ``___.Name___``."""
    return _UNSAFE.sub("_", text)


def blank_template_actions(text: str) -> str:
    """Go-template and Jinja actions (``{{ .Name }}``, ``{% if %}``) turned into YAML that parses,
    keeping every other character where it was: an action alone on its line, and every ``{% %}`` or
    ``{# #}``, becomes blanks; an expression inside a line becomes its :func:`placeholder`."""

    def replace(match: re.Match[str]) -> str:
        body = match.group(0)
        line_start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        line_end = len(text) if line_end < 0 else line_end
        alone = not (text[line_start : match.start()].strip() or text[match.end() : line_end].strip())
        if alone or body.startswith(("{%", "{#")) or "\n" in body:
            return "".join("\n" if ch == "\n" else " " for ch in body)
        return placeholder(body)

    return _ACTION.sub(replace, text)


# --- entries, calls, quantities ----------------------------------------------------------------


def unwrap(grammar: Grammar, node: tree_sitter.Node | None) -> tree_sitter.Node | None:
    """The expression inside wrappers (Go literal_element, parentheses, ``*``/``&``, casts)."""
    while node is not None:
        if node.type in grammar.wrappers and node.named_child_count >= 1:
            node = node.named_children[0]
        elif node.type == "unary_expression" and node.child_by_field_name("operator") is not None:
            op = node.child_by_field_name("operator")
            if op is None or op.type not in ("*", "&"):
                return node
            node = node.child_by_field_name("operand")
        else:
            return node
    return None


def entry_key(grammar: Grammar, src: SourceText, entry: tree_sitter.Node) -> tuple[str, tree_sitter.Node] | None:
    """The key of a key/value entry as text (an identifier's name or a string's value), and its node."""
    key = entry.child_by_field_name("key") or entry.child_by_field_name("name")
    key = unwrap(grammar, key)
    if key is None:
        return None
    if key.type in grammar.strings:
        return decode_string(grammar, src, key).value, key
    if key.type in ("identifier", "property_identifier", "field_identifier", "type_identifier"):
        return src.slice(key), key
    return None


def entry_value(grammar: Grammar, entry: tree_sitter.Node) -> tree_sitter.Node | None:
    return unwrap(grammar, entry.child_by_field_name("value"))


def holding_entry(grammar: Grammar, node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The entry whose value ``node`` is (through wrappers and a Go composite literal's body)."""
    current = node
    parent = current.parent
    while parent is not None and (
        parent.type in grammar.wrappers or parent.type == "composite_literal" or parent.type == "unary_expression"
    ):
        current, parent = parent, parent.parent
    if parent is not None and parent.type in grammar.entries:
        value = parent.child_by_field_name("value")
        if value is not None and value.start_byte <= current.start_byte and current.end_byte <= value.end_byte:
            return parent
    return None


def callee_name(grammar: Grammar, src: SourceText, call: tree_sitter.Node) -> tuple[str, str] | None:
    """The last name of a call's callee (``MustParse`` of ``resource.MustParse``) and the callee as written."""
    callee = call.child_by_field_name("function") or call.child_by_field_name("constructor")
    if callee is None:
        return None
    for name in ("field", "property", "attribute"):
        part = callee.child_by_field_name(name)
        if part is not None:
            return src.slice(part), src.slice(callee)
    if callee.type in ("identifier", "type_identifier"):
        return src.slice(callee), src.slice(callee)
    return None


def arguments(call: tree_sitter.Node) -> list[tree_sitter.Node]:
    args = call.child_by_field_name("arguments")
    if args is None:
        return []
    return [a for a in args.named_children if a.type not in ("keyword_argument", "comment")]


def amount(grammar: Grammar, src: SourceText, node: tree_sitter.Node | None) -> Fraction | None:
    """The quantity an expression states, when it is a literal or a quantity constructor of one."""
    node = unwrap(grammar, node)
    if node is None:
        return None
    if node.type in grammar.numbers:
        try:
            return Fraction(src.slice(node).replace("_", ""))
        except ValueError:
            return None
    if node.type in grammar.strings:
        try:
            return parse_quantity(decode_string(grammar, src, node).value)
        except ValueError:
            return None
    if node.type in grammar.calls:
        name = callee_name(grammar, src, node)
        args = arguments(node)
        if name and name[0] in QUANTITY_CALLS and args:
            inner = amount(grammar, src, args[0])
            return None if inner is None else inner * QUANTITY_CALLS[name[0]]
    return None


def _container_type(node: tree_sitter.Node, src: SourceText) -> str:
    """A Go composite literal's type as written (``corev1.ResourceList``); empty otherwise."""
    parent = node.parent
    if parent is not None and parent.type == "composite_literal":
        typ = parent.child_by_field_name("type")
        return src.slice(typ) if typ is not None else ""
    return ""


def _is_resource_list(grammar: Grammar, src: SourceText, container: tree_sitter.Node) -> str | None:
    """How ``container`` (an object, dict or literal body) is a list of resource quantities, if it is."""
    if _container_type(container, src).endswith("ResourceList"):
        return f"a {_container_type(container, src)} entry"
    holder = holding_entry(grammar, container)
    if holder is not None:
        key = entry_key(grammar, src, holder)
        if key is not None and key[0] in RESOURCE_FIELDS:
            return f"a {key[0]} entry"
    return None


# --- the walk ----------------------------------------------------------------------------------


def analyse(grammar: Grammar, src: SourceText, root: tree_sitter.Node) -> CodeFile:
    """The facts of one parsed file."""
    know = knowledge()
    code = CodeFile(src.display, grammar.name)
    claim_holders: list[tuple[tree_sitter.Node, tree_sitter.Node]] = []
    seen_types: set[str] = set()
    for node in _walk(root):
        if node.type in grammar.entries:
            key = entry_key(grammar, src, node)
            if key is None:
                continue
            name, key_node = key
            container = node.parent
            if container is None:
                continue
            if name in CLAIM_FIELDS:
                claim_holders.append((container, key_node))
            elif key_node.type in grammar.strings and know.is_accelerator_resource(name):
                how = _is_resource_list(grammar, src, container)
                if how is not None:
                    code.resource_uses.append(
                        ResourceUse(
                            name,
                            amount(grammar, src, node.child_by_field_name("value")),
                            src.at(key_node),
                            how,
                            key_node.start_byte,
                            key_node.end_byte,
                        )
                    )
        elif node.type in grammar.calls:
            _resource_name_call(grammar, src, node, code)
        elif node.type in grammar.strings and not grammar.is_doc(node):
            _string(grammar, src, node, code)
        elif node.type in grammar.names:
            _client_type(src, node, code, seen_types)
    if grammar.extra is not None:
        grammar.extra(root, src, code)
    for container, key_node in claim_holders:
        inside = tuple(u for u in code.resource_uses if container.start_byte <= u.start < container.end_byte)
        if inside:
            code.pod_specs.append(PodSpecInCode(src.at(key_node), inside))
    code.resource_uses.sort(key=lambda u: u.start)
    return code


def _resource_name_call(grammar: Grammar, src: SourceText, call: tree_sitter.Node, code: CodeFile) -> None:
    """``corev1.ResourceName("nvidia.com/gpu")``: a resource name by type, wherever it is used."""
    name = callee_name(grammar, src, call)
    args = arguments(call)
    if name is None or name[0] != "ResourceName" or len(args) != 1:
        return
    arg = unwrap(grammar, args[0])
    if arg is None or arg.type not in grammar.strings:
        return
    value = decode_string(grammar, src, arg).value
    if not knowledge().is_accelerator_resource(value):
        return
    holder = holding_entry(grammar, call)
    quantity = None
    if holder is None and call.parent is not None and call.parent.type in grammar.wrappers:
        entry = call.parent.parent
        if entry is not None and entry.type in grammar.entries and entry.child_by_field_name("key") == call.parent:
            quantity = amount(grammar, src, entry.child_by_field_name("value"))
    code.resource_uses.append(
        ResourceUse(value, quantity, src.at(arg), f"{name[1]}(...)", call.start_byte, call.end_byte)
    )


def _client_type(src: SourceText, node: tree_sitter.Node, code: CodeFile, seen: set[str]) -> None:
    """A generated client type named after a resource.k8s.io version, at its first use in the file."""
    name = src.slice(node)
    match = _CLIENT_TYPE.fullmatch(name)
    if match is None or name in seen:
        return
    seen.add(name)
    version = "v" + (match[1] or match[3])
    kinds = (match[2],) if match[2] else ()
    code.versions.append(VersionUse(version, kinds, src.at(node), f"the client type {name}"))


def _sibling_kind(grammar: Grammar, src: SourceText, string: tree_sitter.Node) -> str | None:
    entry = holding_entry(grammar, string)
    container = entry.parent if entry is not None else None
    if container is None:
        return None
    for sibling in container.named_children:
        if sibling.type not in grammar.entries or sibling == entry:
            continue
        key = entry_key(grammar, src, sibling)
        value = entry_value(grammar, sibling)
        if key is not None and key[0] in KIND_FIELDS and value is not None and value.type in grammar.strings:
            return decode_string(grammar, src, value).value
    return None


def _string(grammar: Grammar, src: SourceText, node: tree_sitter.Node, code: CodeFile) -> None:
    value = decode_string(grammar, src, node)
    match = _DRA_VERSION.fullmatch(value.value.strip())
    if match:
        kind = _sibling_kind(grammar, src, node)
        code.versions.append(VersionUse(match[1], (kind,) if kind else (), src.at(node), "a group/version string"))
        return
    if _MANIFEST.search(value.value) and _KIND.search(value.value):
        embedded(value.value, value.origin(), src.at(node), code, f"{grammar.name} string")


def embedded(text: str, origin: TextOrigin | None, at: Location, code: CodeFile, what: str) -> None:
    """Lint the manifests in ``text`` (a string literal's value or a template file) as documents of the file."""
    text = blank_template_actions(text)
    try:
        docs = parse_text(text, code.file, origin=origin)
    except LintInputError as exc:
        cause = exc.__cause__
        mark = getattr(cause, "problem_mark", None)
        problem = getattr(cause, "problem", None) or str(cause).splitlines()[0] if cause else exc.problems[0]
        if mark is None:
            where = at
        elif origin is None:
            where = Location(code.file, mark.line + 1, mark.column + 1)
        else:
            where = origin.place(code.file, mark.line, mark.column)
        code.not_checked.append(NotChecked(str(at), f"the YAML/JSON in this {what} does not parse at {where}: {problem}"))
        return
    for doc in docs:
        if isinstance(doc.obj.get("apiVersion"), str) and isinstance(doc.obj.get("kind"), str):
            code.documents.append(Document(doc.file, len(code.documents), doc.obj, 0, origin))
