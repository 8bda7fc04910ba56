"""Load scenario files: YAML -> positions + plain data -> strict validation -> frozen :class:`~.types.Scenario`.

The edge of the scenario format. It talks to ruamel.yaml (round-trip mode, which keeps the line
and column of every key and item), to the pydantic models of ``format.py``, to the cross-field checks
of ``checks.py`` and to the registries of fault kinds and invariants. Every problem of a file is
collected and raised together as one :class:`~draguard.harness.core.errors.ScenarioError`, each
:class:`~draguard.harness.core.errors.Problem` with ``file:line:column`` (1-based), the field path
(``spec.workloads[1].claims[0].requests[0].count``) and what was expected. A missing file, an empty
file, a document that is not a mapping, or a folder without scenarios is a plain
:class:`~draguard.harness.core.errors.UsageError` naming the path.

Fault kinds are whatever :data:`~draguard.harness.core.registry.FAULTS` holds when a file is loaded:
the CLI imports ``draguard.chaos`` first. Invariants register when ``draguard.harness.invariants``
is imported, which this module does.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.error import MarkedYAMLError, YAMLError

import draguard.harness.invariants  # noqa: F401  (registers the invariants)
from draguard.harness.core.errors import Problem, ScenarioError, UsageError
from draguard.harness.core.registry import FAULTS, INVARIANTS, Registry
from draguard.harness.scenario.checks import check_document
from draguard.harness.scenario.convert import to_scenario
from draguard.harness.scenario.issues import Issue, Path as DataPath, from_validation_error, render_path
from draguard.harness.scenario.format import ScenarioDocument
from draguard.harness.scenario.types import API_VERSION, KIND, Scenario

__all__ = ["SUFFIXES", "discover", "load_scenario", "load_scenarios", "parse_scenario", "problems_of"]

SUFFIXES = (".yaml", ".yml")
_MAX_NODES = 100_000  # alias bombs ("billion laughs") expand past this
_LONG_NUMBER = re.compile(r"(?<![0-9])[0-9]{4301,}")  # past sys.get_int_max_str_digits()'s default
_EXPECTED_DOC = "expected a Scenario document (apiVersion: draguard.dev/v1alpha1, kind: Scenario, metadata, spec)"

# (key line, key column, value line, value column), 1-based.
_Position = tuple[int, int, int, int]


class _Plain:
    """Turns ruamel's round-trip tree into plain dicts/lists/scalars and remembers where each path sits."""

    def __init__(self) -> None:
        self.positions: dict[DataPath, _Position] = {(): (1, 1, 1, 1)}
        self.issues: list[Issue] = []
        self._count = 0
        self._active: set[int] = set()

    def convert(self, node: Any, path: DataPath) -> Any:
        self._count += 1
        if self._count > _MAX_NODES:
            raise _TooLarge
        if isinstance(node, (CommentedMap, CommentedSeq)):
            if id(node) in self._active:
                self.issues.append(Issue(path, "a YAML alias refers to its own ancestor (recursive data)"))
                return None
            self._active.add(id(node))
            try:
                return self._map(node, path) if isinstance(node, CommentedMap) else self._seq(node, path)
            finally:
                self._active.discard(id(node))
        if isinstance(node, TaggedScalar):
            self.issues.append(Issue(path, f"unsupported YAML tag {str(node.tag)!r}; write a plain value"))
            return None
        if isinstance(node, bool) or node is None:
            return node
        if isinstance(node, int):
            return int(node)
        if isinstance(node, float):
            return float(node)
        if isinstance(node, str):
            return str(node)
        if isinstance(node, (datetime.date, datetime.datetime)):
            return node  # kept: strict string fields reject it with a clear type
        self.issues.append(Issue(path, f"unsupported YAML value of type {type(node).__name__}"))
        return None

    def _map(self, node: CommentedMap, path: DataPath) -> dict[str, Any]:
        base_line, base_col = node.lc.line + 1, node.lc.col + 1
        out: dict[str, Any] = {}
        for key, value in node.items():
            try:
                kl, kc = node.lc.key(key)
                kl, kc = kl + 1, kc + 1
            except (KeyError, TypeError, AttributeError):  # merged (<<) keys have no own position
                kl, kc = base_line, base_col
            if not isinstance(key, str) or isinstance(key, bool):
                self.positions.setdefault(path + (f"<{key!r}>",), (kl, kc, kl, kc))
                self.issues.append(Issue(path + (f"<{key!r}>",), f"expected a string key, got {key!r}", on_key=True))
                continue
            key = str(key)
            child = path + (key,)
            vl, vc = kl, kc
            if value is not None:
                try:
                    vl, vc = node.lc.value(key)
                    vl, vc = vl + 1, vc + 1
                except (KeyError, TypeError, AttributeError):
                    pass
            self.positions[child] = (kl, kc, vl, vc)
            out[key] = self.convert(value, child)
        return out

    def _seq(self, node: CommentedSeq, path: DataPath) -> list[Any]:
        out: list[Any] = []
        for i, value in enumerate(node):
            try:
                line, col = node.lc.item(i)
                line, col = line + 1, col + 1
            except (KeyError, TypeError, AttributeError, IndexError):
                line, col = node.lc.line + 1, node.lc.col + 1
            self.positions[path + (i,)] = (line, col, line, col)
            out.append(self.convert(value, path + (i,)))
        return out


class _TooLarge(Exception):
    pass


def _yaml_problem(file: str, text: str, exc: YAMLError) -> Problem:
    if isinstance(exc, MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        what = " ".join(p for p in (exc.context, exc.problem) if p)
        return Problem(file, mark.line + 1, mark.column + 1, "", f"invalid YAML: {what or exc}")
    position = getattr(exc, "position", None)
    if isinstance(position, int):
        before = text[:position]
        line = before.count("\n") + 1
        column = position - (before.rfind("\n") + 1) + 1
        return Problem(file, line, column, "", f"invalid YAML: {getattr(exc, 'reason', exc)}")
    return Problem(file, 1, 1, "", f"invalid YAML: {exc}")


def problems_of(
    text: str,
    file: str = "<string>",
    *,
    faults: Registry[Any] | None = None,
    invariants: Registry[Any] | None = None,
) -> tuple[list[Problem], ScenarioDocument | None]:
    """Every problem of the scenario ``text`` (from ``file``), and the validated document if there is none.

    Raises UsageError for an empty document or one that is not a mapping.
    """
    faults = FAULTS if faults is None else faults
    invariants = INVARIANTS if invariants is None else invariants
    try:
        tree = YAML(typ="rt", pure=True).load(text)
    except YAMLError as exc:
        return [_yaml_problem(file, text, exc)], None
    except (RecursionError, ValueError, TypeError) as exc:  # ruamel bugs on odd input; not our data's shape
        long = _LONG_NUMBER.search(text)
        if isinstance(exc, ValueError) and long is not None:  # Python refuses to convert it (int_max_str_digits)
            line = text.count("\n", 0, long.start()) + 1
            column = long.start() - (text.rfind("\n", 0, long.start()) + 1) + 1
            return [Problem(file, line, column, "", f"a number of {len(long.group())} digits: every count and size "
                            "of a scenario is far smaller")], None  # fmt: skip
        return [Problem(file, 1, 1, "", f"invalid YAML: {type(exc).__name__}: {exc}")], None
    if tree is None:
        raise UsageError(f"{file}: the file is empty; {_EXPECTED_DOC}")
    if not isinstance(tree, CommentedMap):
        raise UsageError(f"{file}: the document is a {type(tree).__name__.removeprefix('Commented').lower()}, "
                         f"not a mapping; {_EXPECTED_DOC}")  # fmt: skip
    plain = _Plain()
    try:
        data = plain.convert(tree, ())
    except (_TooLarge, RecursionError):
        return [Problem(file, 1, 1, "", f"the document is too large or too deep (over {_MAX_NODES} values)")], None
    issues = list(plain.issues)
    document: ScenarioDocument | None = None
    header = _header_issues(data)
    if header:  # not a scenario at all (a Pod, a topology file): its body would only add noise
        issues += header
    else:
        try:
            document = ScenarioDocument.model_validate(data)
        except ValidationError as exc:
            issues += from_validation_error(exc, data, ScenarioDocument)
        issues += check_document(data, faults=faults, invariants=invariants)

    problems: dict[tuple[int, int, str, str], Problem] = {}
    for issue in issues:
        line, column = _locate(plain.positions, issue)
        problem = Problem(file, line, column, render_path(issue.path), issue.message)
        problems.setdefault((line, column, problem.field, problem.message), problem)
    ordered = sorted(problems.values(), key=lambda p: (p.line, p.column, p.field))
    return ordered, document if not problems else None


def _header_issues(data: dict[str, Any]) -> list[Issue]:
    issues = []
    for key, want in (("apiVersion", API_VERSION), ("kind", KIND)):
        if data.get(key) != want:
            got = f"got {data[key]!r}" if key in data else "it is missing"
            issues.append(Issue((key,), f"expected {want!r}, {got}: this is not a draguard scenario"))
    return issues


def _locate(positions: dict[DataPath, _Position], issue: Issue) -> tuple[int, int]:
    path = issue.path
    while path not in positions:
        path = path[:-1]
    kl, kc, vl, vc = positions[path]
    if path == issue.path and issue.on_key:
        return kl, kc
    return vl, vc


def parse_scenario(
    text: str,
    file: str = "<string>",
    *,
    source: Path | None = None,
    faults: Registry[Any] | None = None,
    invariants: Registry[Any] | None = None,
) -> Scenario:
    """Validate scenario ``text`` and return its frozen form; ScenarioError lists every problem."""
    problems, document = problems_of(text, file, faults=faults, invariants=invariants)
    if problems or document is None:
        raise ScenarioError(problems)
    return to_scenario(
        document,
        source=source,
        faults=FAULTS if faults is None else faults,
        invariants=INVARIANTS if invariants is None else invariants,
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, expected a scenario file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def load_scenario(
    path: str | Path, *, faults: Registry[Any] | None = None, invariants: Registry[Any] | None = None
) -> Scenario:
    """Load and validate one scenario file."""
    path = Path(path)
    return parse_scenario(_read(path), str(path), source=path, faults=faults, invariants=invariants)


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Scenario files named by ``paths``: files as given, folders walked for ``*.yaml``/``*.yml`` (sorted)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
            if not files:
                raise UsageError(f"{path}: no scenario files (*.yaml, *.yml) in this folder")
            found += files
        elif path.exists():
            found.append(path)
        else:
            raise UsageError(f"{path}: no such file or folder")
    return found


def load_scenarios(
    paths: Iterable[str | Path], *, faults: Registry[Any] | None = None, invariants: Registry[Any] | None = None
) -> list[Scenario]:
    """Load every scenario under ``paths``; one ScenarioError lists the problems of all files."""
    scenarios: list[Scenario] = []
    problems: list[Problem] = []
    for path in discover(paths):
        try:
            scenarios.append(load_scenario(path, faults=faults, invariants=invariants))
        except ScenarioError as exc:
            problems += exc.problems
    if problems:
        raise ScenarioError(problems)
    return scenarios
