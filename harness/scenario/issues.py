"""Problems found in a scenario before they get a file position: :class:`Issue`, and pydantic errors
turned into issues whose messages say what was expected.

``Issue.path`` is the data path in the YAML document (``("spec", "workloads", 1, "replicas")``);
the loader maps it to ``file:line:column`` through the positions it kept while parsing, and
renders it as ``spec.workloads[1].replicas``. Pydantic's ``loc`` also holds union-branch tags and
``[key]`` markers that are not in the data; :func:`from_validation_error` drops them by walking the
``loc`` against the data itself.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from draguard.harness.scenario.format import PATTERN_WORDS

__all__ = ["Issue", "Path", "render_path", "from_validation_error"]

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem at ``path``; ``on_key`` places it on the mapping key rather than on its value."""

    path: Path
    message: str
    on_key: bool = False


def render_path(path: Path) -> str:
    """``("spec", "workloads", 1, "name")`` -> ``spec.workloads[1].name``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _pattern_words(pattern: str) -> str:
    return PATTERN_WORDS.get(pattern, f"a string matching {pattern!r}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_word(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"string {_short(value)}"
    return f"{type(value).__name__} {_short(value)}"


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete types an annotation may hold: Optional/Union/Annotated peeled off."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                out += _unwrap(arg)
        return out
    return [annotation]


def _field_of(model: type[BaseModel], key: str) -> FieldInfo | None:
    for name, info in model.model_fields.items():
        if (info.alias or name) == key:
            return info
    return None


def _walk(model: type[BaseModel] | None, path: Path) -> tuple[type[BaseModel] | None, FieldInfo | None]:
    """The model class that holds the last element of ``path``, and that field's info (if a field)."""
    candidates: list[Any] = [model] if model is not None else []
    container: type[BaseModel] | None = None
    info: FieldInfo | None = None
    for part in path:
        nxt: list[Any] = []
        container, info = None, None
        for candidate in candidates:
            for typ in _unwrap(candidate):
                origin = typing.get_origin(typ)
                if isinstance(typ, type) and issubclass(typ, BaseModel) and isinstance(part, str):
                    field = _field_of(typ, part)
                    if field is not None:
                        container, info = typ, field
                        nxt.append(field.annotation)
                elif origin is list and isinstance(part, int):
                    nxt.append(typing.get_args(typ)[0])
                elif origin is dict and isinstance(part, str):
                    nxt.append(typing.get_args(typ)[1])
        candidates = nxt
        if not candidates:
            return None, None
    return container, info


def _container_model(model: type[BaseModel] | None, path: Path) -> type[BaseModel] | None:
    """The model class whose instance sits at ``path``."""
    if not path:
        return model
    _, info = _walk(model, path)
    if info is None:
        # The last element may be a list index or dict key: walk to the element type.
        container, info = _walk(model, path[:-1])
        if info is None:
            return None
        annotation: Any = info.annotation
        for typ in _unwrap(annotation):
            if typing.get_origin(typ) in (list, dict):
                annotation = typing.get_args(typ)[-1]
                break
    else:
        annotation = info.annotation
    for typ in _unwrap(annotation):
        if isinstance(typ, type) and issubclass(typ, BaseModel):
            return typ
    return None


def _description(info: FieldInfo | None) -> str:
    if info is None or not info.description:
        return ""
    text = info.description.strip().split("\n")[0].rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _resolve(loc: Sequence[str | int], data: Any) -> tuple[Path, bool]:
    """Drop loc elements that are not in the data; return the data path and whether it ends on a key."""
    path: list[str | int] = []
    node = data
    on_key = False
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if part == "[key]":
            on_key = True
            continue
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif last and isinstance(node, dict) and isinstance(part, str):
            path.append(part)  # a missing key
        # else: a union-branch tag or validator name; not in the data
    return tuple(path), on_key


def _message(error: Any, model: type[BaseModel] | None, path: Path) -> tuple[str, bool]:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    msg: str = error["msg"]
    got = f", got {_type_word(value)}"
    if kind == "missing":
        _, info = _walk(model, path)
        what = _description(info)
        return f"missing required key {path[-1]!r}" + (f" ({what})" if what else ""), False
    if kind == "extra_forbidden":
        container = _container_model(model, path[:-1])
        if container is None:
            return f"unknown key {path[-1]!r}", True
        allowed = [info.alias or name for name, info in container.model_fields.items()]
        close = difflib.get_close_matches(str(path[-1]), allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"unknown key {path[-1]!r}; {hint}expected one of: {', '.join(allowed)}", True
    if kind == "string_pattern_mismatch":
        return f"expected {_pattern_words(ctx.get('pattern', ''))}{got}", False
    if kind == "value_error":
        text = msg.removeprefix("Value error, ")
        return text, False
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": "≥", "greater_than": ">", "less_than_equal": "≤", "less_than": "<"}[kind]
        limit = next(iter(ctx.values()), "?")
        return f"expected a number {sign} {limit}{got}", False
    if kind in ("too_short", "too_long"):
        word = "mapping with" if isinstance(value, dict) else "list of"
        most, limit = ("most", ctx.get("max_length")) if kind == "too_long" else ("least", ctx.get("min_length"))
        actual = len(value) if isinstance(value, (dict, list)) else ctx.get("actual_length")
        return f"expected a {word} at {most} {limit} {'entry' if limit == 1 else 'entries'}, got {actual}", False
    if kind == "model_type" or kind == "dict_type":
        return f"expected a mapping{got}", False
    if kind == "list_type":
        return f"expected a list{got}", False
    if kind == "literal_error":
        return f"expected {ctx.get('expected', msg.removeprefix('Input should be '))}{got}", False
    if msg.startswith("Input should be "):
        return "expected " + msg.removeprefix("Input should be ") + got, False
    return msg[:1].lower() + msg[1:], False


def _merge(messages: list[str]) -> str:
    """Union branches fail separately at one path: "expected an int, got x" + "expected 'a', got x"."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    suffixes = {m.rpartition(", got ")[2] for m in unique}
    if all(m.startswith("expected ") and ", got " in m for m in unique) and len(suffixes) == 1:
        wants = [m.removeprefix("expected ").rpartition(", got ")[0] for m in unique]
        return f"expected {' or '.join(wants)}, got {suffixes.pop()}"
    return "; ".join(unique)


def from_validation_error(
    exc: ValidationError, data: Any, model: type[BaseModel] | None, prefix: Path = ()
) -> list[Issue]:
    """Issues for every error of ``exc`` (raised validating ``data`` against ``model``), under ``prefix``."""
    grouped: dict[tuple[Path, bool], list[str]] = {}
    for error in exc.errors(include_url=False):
        path, on_key = _resolve(error["loc"], data)
        message, message_on_key = _message(error, model, path)
        grouped.setdefault((path, on_key or message_on_key), []).append(message)
    return [Issue(prefix + path, _merge(messages), on_key) for (path, on_key), messages in grouped.items()]
