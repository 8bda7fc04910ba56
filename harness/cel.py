"""CEL device selectors, compiled and evaluated the way Kubernetes DRA does it.

A DeviceClass or a device request selects devices with CEL expressions over one variable,
``device``, with the fields ``driver`` (string), ``attributes`` (domain -> name -> value),
``capacity`` (domain -> name -> quantity) and ``allowMultipleAllocations`` (bool); see
k8s.io/dynamic-resource-allocation/cel. This module is a thin layer over ``cel-expr-python``
(which wraps the official cel-cpp) and adds what that engine lacks: the Kubernetes ``quantity`` and
``semver`` libraries, and the DRA rules for attributes (a bare attribute name belongs to the
driver's domain; an unknown domain reads as an empty map).

Users: the fake driver and the invariants (which devices a selector matches), and the guardrail
linter (does an expression compile, which attributes does it read).

How it works: each expression is compiled twice. A *checking* environment declares the Kubernetes
types (``device.capacity[...][...]`` is a Quantity, ``quantity()`` returns one, ``>=`` on two
quantities is a type error) and reports the errors the API server would report. cel-expr-python
cannot carry a Python object of an abstract CEL type at run time, so a second, unchecked
*runtime* environment represents quantities and versions as tagged one-key maps and implements
their functions in Python.

Known gaps: only the Kubernetes CEL libraries that DRA selectors use are provided (quantity,
semver, strings, math, optional values, ``cel.bind``, regex ``find``/``findAll``); ``url()``,
``ip()``, ``cidr()``, ``format()`` and the lists library do not compile here. The cost limit is not
enforced. :attr:`Selector.attribute_refs` reads the expression's text (best effort).
"""

from __future__ import annotations

import ast
import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]
from cel_expr_python.ext import (  # type: ignore[import-untyped]
    ext_bindings,
    ext_encoders,
    ext_math,
    ext_optional,
    ext_strings,
)

from draguard.harness.core.errors import UsageError

__all__ = [
    "CelError",
    "CelEvaluationError",
    "Selector",
    "compile_selector",
    "parse_quantity",
    "format_quantity",
    "Semver",
    "parse_semver",
]


class CelError(UsageError):
    """A CEL expression does not compile (syntax or type error), or cannot be evaluated."""

    def __init__(self, message: str, expression: str = "", line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.expression = expression
        self.line = line
        """1-based line of the problem inside the expression (0 when unknown)."""
        self.column = column
        """1-based column of the problem inside the expression (0 when unknown)."""


class CelEvaluationError(CelError):
    """Evaluating a selector on a device failed (a missing attribute, a bad version string, ...).

    The scheduler treats such an error as a failed allocation, not as a non-matching device.
    """


# --- Kubernetes quantities ---------------------------------------------------------------------

_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


@functools.lru_cache(maxsize=4096)
def parse_quantity(text: str) -> Fraction:
    """The exact value of a Kubernetes quantity (``80Gi``, ``1.5``, ``100m``, ``2e3``).

    Raises ValueError for anything ``resource.ParseQuantity`` would reject.
    """
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (examples: 80Gi, 500m, 1.5, 2e3)")
    number = Fraction(match["num"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * Fraction(1024 ** _BINARY[suffix])
    exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
    return number * Fraction(10**exponent) if exponent >= 0 else number / Fraction(10**-exponent)


def format_quantity(value: Fraction) -> str:
    """A canonical quantity string for ``value``: an integer, else milli or nano units."""
    for scale, suffix in ((1, ""), (1000, "m"), (10**9, "n")):
        scaled = value * scale
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{math.ceil(value * 10**9)}n"  # Kubernetes rounds up below nano precision


# --- semantic versions -----------------------------------------------------------------------

_SEMVER = re.compile(
    r"^(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


@dataclass(frozen=True, order=False)
class Semver:
    """A semantic version (semver.org 2.0), ordered by precedence; build metadata is ignored."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()

    def _key(self) -> tuple[Any, ...]:
        # A version without a pre-release ranks above the same version with one; numeric
        # identifiers rank below alphanumeric ones.
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 1 if not self.pre else 0, pre)

    def compare(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __str__(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return core + ("-" + ".".join(self.pre) if self.pre else "")


@functools.lru_cache(maxsize=1024)
def parse_semver(text: str) -> Semver:
    """Parse ``MAJOR.MINOR.PATCH[-pre][+build]``; raises ValueError otherwise."""
    match = _SEMVER.match(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH)")
    pre = tuple(match["pre"].split(".")) if match["pre"] else ()
    if any(p.isdigit() and len(p) > 1 and p.startswith("0") for p in pre):
        raise ValueError(f"{text!r}: numeric pre-release identifiers must not have leading zeros")
    return Semver(int(match["major"]), int(match["minor"]), int(match["patch"]), pre)


# --- environments ------------------------------------------------------------------------------

_Q_TAG = "__draguard_quantity__"
_V_TAG = "__draguard_semver__"


def _q(value: Fraction) -> dict[str, str]:
    return {_Q_TAG: format_quantity(value)}


def _qv(obj: Any) -> Fraction:
    if isinstance(obj, dict) and _Q_TAG in obj:
        return parse_quantity(obj[_Q_TAG])
    if isinstance(obj, int) and not isinstance(obj, bool):
        return Fraction(obj)
    raise ValueError(f"expected a quantity, got {obj!r}")


def _vv(obj: Any) -> Semver:
    if isinstance(obj, dict) and _V_TAG in obj:
        return parse_semver(obj[_V_TAG])
    raise ValueError(f"expected a semver, got {obj!r}")


def _tagged_compare(a: Any, b: Any) -> int:
    if isinstance(a, dict) and _V_TAG in a:
        return _vv(a).compare(_vv(b))
    x, y = _qv(a), _qv(b)
    return (x > y) - (x < y)


def _quantity_fn(text: str) -> dict[str, str]:
    return _q(parse_quantity(text))


def _semver_fn(text: str) -> dict[str, str]:
    return {_V_TAG: str(parse_semver(text))}


def _is(parse: Callable[[str], Any]) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True

    return check


def _as_integer(a: Any) -> int:
    value = _qv(a)
    if value.denominator != 1 or not -(2**63) <= value.numerator < 2**63:
        raise ValueError(f"quantity {format_quantity(value)} is not an int64")
    return value.numerator


def _find(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str) -> list[str]:
    return [m.group(0) for m in re.finditer(pattern, text)]


T = cel.Type
_QT = T.AbstractType("kubernetes.Quantity")
_VT = T.AbstractType("kubernetes.Semver")

# What the API server declares: (function, overload id, member?, parameters, result).
_CHECKED: list[tuple[str, str, bool, list[Any], Any]] = [
    ("quantity", "quantity_string", False, [T.STRING], _QT),
    ("isQuantity", "is_quantity_string", False, [T.STRING], T.BOOL),
    ("semver", "semver_string", False, [T.STRING], _VT),
    ("isSemver", "is_semver_string", False, [T.STRING], T.BOOL),
    ("compareTo", "quantity_compareTo", True, [_QT, _QT], T.INT),
    ("compareTo", "semver_compareTo", True, [_VT, _VT], T.INT),
    ("isLessThan", "quantity_isLessThan", True, [_QT, _QT], T.BOOL),
    ("isLessThan", "semver_isLessThan", True, [_VT, _VT], T.BOOL),
    ("isGreaterThan", "quantity_isGreaterThan", True, [_QT, _QT], T.BOOL),
    ("isGreaterThan", "semver_isGreaterThan", True, [_VT, _VT], T.BOOL),
    ("add", "quantity_add", True, [_QT, _QT], _QT),
    ("add", "quantity_add_int", True, [_QT, T.INT], _QT),
    ("sub", "quantity_sub", True, [_QT, _QT], _QT),
    ("sub", "quantity_sub_int", True, [_QT, T.INT], _QT),
    ("sign", "quantity_sign", True, [_QT], T.INT),
    ("isInteger", "quantity_isInteger", True, [_QT], T.BOOL),
    ("asInteger", "quantity_asInteger", True, [_QT], T.INT),
    ("asApproximateFloat", "quantity_asApproximateFloat", True, [_QT], T.DOUBLE),
    ("major", "semver_major", True, [_VT], T.INT),
    ("minor", "semver_minor", True, [_VT], T.INT),
    ("patch", "semver_patch", True, [_VT], T.INT),
    ("find", "string_find", True, [T.STRING, T.STRING], T.STRING),
    ("findAll", "string_findAll", True, [T.STRING, T.STRING], T.List(T.STRING)),
]

# What runs: quantities and versions are both tagged maps here, so one overload per function
# serves both and the implementation dispatches on the tag.
_RUNTIME: list[tuple[str, bool, list[Any], Any, Callable[..., Any]]] = [
    ("quantity", False, [T.STRING], T.MAP, _quantity_fn),
    ("isQuantity", False, [T.STRING], T.BOOL, _is(parse_quantity)),
    ("semver", False, [T.STRING], T.MAP, _semver_fn),
    ("isSemver", False, [T.STRING], T.BOOL, _is(parse_semver)),
    ("compareTo", True, [T.MAP, T.MAP], T.INT, _tagged_compare),
    ("isLessThan", True, [T.MAP, T.MAP], T.BOOL, lambda a, b: _tagged_compare(a, b) < 0),
    ("isGreaterThan", True, [T.MAP, T.MAP], T.BOOL, lambda a, b: _tagged_compare(a, b) > 0),
    ("add", True, [T.MAP, T.MAP], T.MAP, lambda a, b: _q(_qv(a) + _qv(b))),
    ("add", True, [T.MAP, T.INT], T.MAP, lambda a, b: _q(_qv(a) + b)),
    ("sub", True, [T.MAP, T.MAP], T.MAP, lambda a, b: _q(_qv(a) - _qv(b))),
    ("sub", True, [T.MAP, T.INT], T.MAP, lambda a, b: _q(_qv(a) - b)),
    ("sign", True, [T.MAP], T.INT, lambda a: (_qv(a) > 0) - (_qv(a) < 0)),
    ("isInteger", True, [T.MAP], T.BOOL, lambda a: _qv(a).denominator == 1),
    ("asInteger", True, [T.MAP], T.INT, _as_integer),
    ("asApproximateFloat", True, [T.MAP], T.DOUBLE, lambda a: float(_qv(a))),
    ("major", True, [T.MAP], T.INT, lambda a: _vv(a).major),
    ("minor", True, [T.MAP], T.INT, lambda a: _vv(a).minor),
    ("patch", True, [T.MAP], T.INT, lambda a: _vv(a).patch),
    ("find", True, [T.STRING, T.STRING], T.STRING, _find),
    ("findAll", True, [T.STRING, T.STRING], T.List(T.STRING), _find_all),
]


def _decls(checked: bool) -> list[Any]:
    by_name: dict[str, list[Any]] = {}
    if checked:
        for name, oid, member, params, result in _CHECKED:
            by_name.setdefault(name, []).append(
                cel.Overload(oid, return_type=result, parameters=params, is_member=member)
            )
    else:
        for i, (name, member, params, result, impl) in enumerate(_RUNTIME):
            by_name.setdefault(name, []).append(
                cel.Overload(f"{name}_rt{i}", return_type=result, parameters=params, is_member=member, impl=impl)
            )
    return [cel.FunctionDecl(name, overloads) for name, overloads in by_name.items()]


def _extensions() -> list[Any]:
    return [
        ext_bindings.ExtBindings(),
        ext_optional.ExtOptional(),
        ext_strings.ExtStrings(),
        ext_math.ExtMath(),
        ext_encoders.ExtEncoders(),
    ]


@functools.cache
def _check_env() -> Any:
    # Dotted variable names make `device.foo` an undeclared reference, as with the
    # kubernetes.DRADevice object type the API server declares.
    return cel.NewEnv(
        variables={
            "device.driver": T.STRING,
            "device.attributes": T.Map(T.STRING, T.Map(T.STRING, T.DYN)),
            "device.capacity": T.Map(T.STRING, T.Map(T.STRING, _QT)),
            "device.allowMultipleAllocations": T.BOOL,
        },
        extensions=_extensions(),
        functions=_decls(checked=True),
    )


@functools.cache
def _run_env() -> Any:
    return cel.NewEnv(variables={"device": T.DYN}, extensions=_extensions(), functions=_decls(checked=False))


# --- reading the expression's text ---------------------------------------------------------

_TOKEN = re.compile(
    r"""(?P<ws>\s+|//[^\n]*)
      | (?P<str>[rRbB]{0,2}(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<num>\d[\w.]*)
      | (?P<op>\.\?|==|!=|<=|>=|&&|\|\||[^\s])""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str

    @property
    def value(self) -> str:
        """The string a string literal stands for."""
        raw = self.text.lstrip("rRbB")
        try:
            return str(ast.literal_eval(raw))
        except (ValueError, SyntaxError):
            return raw.strip("'\"")


def _tokens(expression: str) -> list[_Tok]:
    out = []
    for match in _TOKEN.finditer(expression):
        kind = match.lastgroup or "op"
        if kind != "ws":
            out.append(_Tok(kind, match.group()))
    return out


@dataclass(frozen=True)
class _Refs:
    attributes: frozenset[tuple[str, str]]
    capacity: frozenset[tuple[str, str]]
    domains: frozenset[str]
    drivers: frozenset[str]


def _is_op(tok: _Tok | None, text: str) -> bool:
    return tok is not None and tok.kind == "op" and tok.text == text


def _scan(expression: str) -> _Refs:
    toks = _tokens(expression)

    def at(i: int) -> _Tok | None:
        return toks[i] if 0 <= i < len(toks) else None

    def text(i: int) -> str:
        tok = at(i)
        return tok.text if tok is not None else ""

    refs: dict[str, set[tuple[str, str]]] = {"attributes": set(), "capacity": set()}
    domains: set[str] = set()
    drivers: set[str] = set()
    aliases: dict[str, tuple[str, str]] = {}  # cel.bind variable -> (attributes|capacity, domain)

    def domain_map_at(i: int) -> tuple[str, str, int] | None:
        """`device . attributes [ "domain" ]` starting at i: (field, domain, index after `]`)."""
        a, b, c, d, e, f = (at(i + k) for k in range(6))
        if (
            a and a.kind == "ident" and a.text == "device" and _is_op(b, ".")
            and c and c.kind == "ident" and c.text in refs
            and _is_op(d, "[") and e and e.kind == "str" and _is_op(f, "]")
        ):
            return c.text, e.value, i + 6
        return None

    def member_after(j: int) -> str | None:
        """The attribute name read right after a domain map ending before j."""
        a, b, c = at(j), at(j + 1), at(j + 2)
        if (_is_op(a, ".") or _is_op(a, ".?")) and b and b.kind == "ident" and not _is_op(c, "("):
            return b.text
        if _is_op(a, "[") and b and b.kind == "str" and _is_op(c, "]"):
            return b.value
        return None

    for i, tok in enumerate(toks):
        found = domain_map_at(i)
        if found:
            kind, domain, j = found
            domains.add(domain)
            name = member_after(j)
            if name is not None:
                refs[kind].add((domain, name))
            prev3 = [at(i - k) for k in (4, 3, 2, 1)]
            # cel.bind(alias, device.attributes["domain"], ...)
            if (
                prev3[0] and prev3[0].text == "bind" and _is_op(prev3[1], "(")
                and prev3[2] and prev3[2].kind == "ident" and _is_op(prev3[3], ",")
            ):
                aliases[prev3[2].text] = (kind, domain)
            continue
        # alias.name, where alias is bound to a domain map and this is not the binding itself
        binding = _is_op(at(i - 1), "(") and text(i - 2) == "bind"
        if tok.kind == "ident" and tok.text in aliases and not _is_op(at(i - 1), ".") and not binding:
            kind, domain = aliases[tok.text]
            name = member_after(i + 1)
            if name is not None:
                refs[kind].add((domain, name))
        # device.driver == "x", "x" == device.driver, device.driver in ["x", "y"]
        if tok.kind == "ident" and tok.text == "device" and _is_op(at(i + 1), ".") and text(i + 2) == "driver":
            nxt, lit = at(i + 3), at(i + 4)
            if _is_op(nxt, "==") and lit is not None and lit.kind == "str":
                drivers.add(lit.value)
            elif text(i + 3) == "in" and _is_op(lit, "["):
                k = i + 5
                while (item := at(k)) is not None and not _is_op(item, "]"):
                    if item.kind == "str":
                        drivers.add(item.value)
                    k += 1
            before = at(i - 2)
            if _is_op(at(i - 1), "==") and before is not None and before.kind == "str":
                drivers.add(before.value)
    return _Refs(frozenset(refs["attributes"]), frozenset(refs["capacity"]), frozenset(domains), frozenset(drivers))


# --- selectors -----------------------------------------------------------------------------

_POSITION = re.compile(r"<input>:(\d+):(\d+):\s*")


def _compile_error(expression: str, exc: Exception) -> CelError:
    text = str(exc)
    first = text.splitlines()[0] if text else "does not compile"
    first = re.sub(r"^[A-Z_]+:\s*", "", first)  # absl status code
    first = re.sub(r"^ERROR:\s*", "", first)
    line = column = 0
    match = _POSITION.search(first)
    if match:
        line, column = int(match[1]), int(match[2])
        first = first[match.end():]
    first = re.sub(r"\s*\[[A-Z_]+\]$", "", first).strip()
    where = f"{line}:{column}: " if line else ""
    return CelError(f"{where}{first}", expression, line, column)


@dataclass(frozen=True)
class Selector:
    """A compiled, type-checked DRA device selector."""

    expression: str
    _program: Any = field(repr=False, compare=False)
    _refs: _Refs = field(repr=False, compare=False)

    @property
    def attribute_refs(self) -> frozenset[tuple[str, str]]:
        """``(domain, name)`` of each ``device.attributes["domain"].name`` the text reads (best effort)."""
        return self._refs.attributes

    @property
    def capacity_refs(self) -> frozenset[tuple[str, str]]:
        """``(domain, name)`` of each ``device.capacity["domain"].name`` the text reads (best effort)."""
        return self._refs.capacity

    @property
    def domains(self) -> frozenset[str]:
        """Every domain indexed with a literal, for attributes or capacity."""
        return self._refs.domains

    @property
    def drivers(self) -> frozenset[str]:
        """Driver names the expression compares ``device.driver`` with (``==`` or ``in [...]``)."""
        return self._refs.drivers

    def evaluate(self, device: Mapping[str, Any], driver: str) -> bool:
        """Whether ``device`` (a v1 ResourceSlice device dict) of ``driver`` matches.

        Raises :class:`CelEvaluationError` where the scheduler would fail the allocation: a missing
        attribute, an unparsable version or quantity, a non-boolean result.
        """
        data = {"device": self._device_value(device, driver)}
        result = self._program.eval(data=data)
        kind = result.type()
        if kind == T.ERROR:
            message = re.sub(r"^[A-Z_]+:\s*", "", str(result))  # absl status code
            raise CelEvaluationError(f"{self.expression!r}: {message}", self.expression)
        value = result.value()
        if not isinstance(value, bool):
            raise CelEvaluationError(
                f"{self.expression!r}: must evaluate to bool, not {kind.name().lower()}", self.expression
            )
        return value

    def _device_value(self, device: Mapping[str, Any], driver: str) -> dict[str, Any]:
        attributes: dict[str, dict[str, Any]] = {d: {} for d in self._refs.domains}
        capacity: dict[str, dict[str, Any]] = {d: {} for d in self._refs.domains}
        for qualified, attr in (device.get("attributes") or {}).items():
            domain, name = _split(qualified, driver)
            attributes.setdefault(domain, {})[name] = self._attribute_value(qualified, attr)
        for qualified, cap in (device.get("capacity") or {}).items():
            domain, name = _split(qualified, driver)
            raw = cap.get("value") if isinstance(cap, Mapping) else cap
            try:
                capacity.setdefault(domain, {})[name] = _q(parse_quantity(str(raw)))
            except ValueError as exc:
                raise CelEvaluationError(f"capacity {qualified}: {exc}", self.expression) from exc
        return {
            "driver": driver,
            "attributes": attributes,
            "capacity": capacity,
            "allowMultipleAllocations": bool(device.get("allowMultipleAllocations", False)),
        }

    def _attribute_value(self, qualified: str, attr: Any) -> Any:
        if not isinstance(attr, Mapping):
            raise CelEvaluationError(f"attribute {qualified}: expected a one-key map, got {attr!r}", self.expression)
        try:
            for key in ("int", "bool", "string"):
                if key in attr:
                    return attr[key]
            if "version" in attr:
                return {_V_TAG: str(parse_semver(attr["version"]))}
            for key in ("ints", "bools", "strings"):
                if key in attr:
                    return list(attr[key])
            if "versions" in attr:
                return [{_V_TAG: str(parse_semver(v))} for v in attr["versions"]]
        except ValueError as exc:
            raise CelEvaluationError(f"attribute {qualified}: {exc}", self.expression) from exc
        raise CelEvaluationError(f"attribute {qualified}: unsupported attribute value {dict(attr)!r}", self.expression)


def _split(qualified: str, driver: str) -> tuple[str, str]:
    domain, sep, name = qualified.rpartition("/")
    return (domain, name) if sep else (driver, qualified)


@functools.lru_cache(maxsize=1024)
def compile_selector(expr: str) -> Selector:
    """Compile and type-check a DRA selector; raises :class:`CelError` as the API server would reject it."""
    if not isinstance(expr, str) or not expr.strip():
        raise CelError("the expression is empty", str(expr))
    try:
        checked = _check_env().compile(expr)
    except RuntimeError as exc:
        raise _compile_error(expr, exc) from exc
    result = checked.return_type()
    if result not in (T.BOOL, T.DYN):
        raise CelError(f"must evaluate to bool, not {result.name().lower()}", expr)
    try:
        program = _run_env().compile(expr, disable_check=True)
    except RuntimeError as exc:  # the checked compile succeeded, so this is an engine gap
        raise _compile_error(expr, exc) from exc
    return Selector(expr, program, _scan(expr))
