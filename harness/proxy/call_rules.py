"""Fault rules of the gRPC interposer, read from a YAML or JSON file that may change at runtime.

A file holds a list of rules (or ``{"faults": [...]}``); the first rule that matches a call applies::

    faults:
      - method: NodePrepareResources     # short method name, or "*" (default)
        claim: "gang-2-*"                # glob on claim name, UID or namespace/name (optional)
        node: "node-*"                   # glob on the node (optional); driver: likewise
        action: error                    # error | claim-error | delay | hang | duplicate | stale-retry
        code: UNAVAILABLE                # gRPC status for "error" (default UNAVAILABLE)
        message: "injected"
        seconds: 2                       # delay length, or how long after a call its stale copy is replayed
        after: 0                         # let the first N matching calls pass
        count: 1                         # apply at most N times (default: always)

Actions: ``error`` fails the whole call with a gRPC status; ``claim-error`` withholds the matching
claims from the plugin and answers an error for each of them; ``delay`` waits, then forwards;
``hang`` never answers (the caller's deadline ends the call); ``duplicate`` forwards the call twice
and answers the second result; ``stale-retry`` forwards normally and replays the same request
``seconds`` later, as a late retry would. The file is re-read when its modification time changes; a
broken edit is reported and the previous rules stay. Used by :mod:`.interposer`; reads only the file.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import threading
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import grpc
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from draguard.harness.core.errors import UsageError
from draguard.harness.grpcapi.plugin import ClaimRef

__all__ = ["Action", "FaultRule", "FaultSet", "claim_matches", "load_rules"]

log = logging.getLogger("draguard.proxy")


class Action(str, Enum):
    ERROR = "error"
    CLAIM_ERROR = "claim-error"
    DELAY = "delay"
    HANG = "hang"
    DUPLICATE = "duplicate"
    STALE_RETRY = "stale-retry"


def claim_matches(claim: ClaimRef, pattern: str) -> bool:
    """Whether a glob names the claim by name, UID or ``namespace/name``."""
    return any(fnmatch.fnmatchcase(v, pattern) for v in (claim.name, claim.uid, f"{claim.namespace}/{claim.name}"))


class FaultRule(BaseModel):
    """One fault: which calls it matches and what it does to them."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    action: Action
    method: str = "*"
    node: str | None = None
    driver: str | None = None
    claim: str | None = None
    code: str = "UNAVAILABLE"
    message: str = "injected by draguard proxy"
    seconds: float = Field(default=1.0, ge=0)
    after: int = Field(default=0, ge=0)
    count: int | None = Field(default=None, ge=1)

    @field_validator("code")
    @classmethod
    def _known_code(cls, value: str) -> str:
        name = value.upper()
        if name not in grpc.StatusCode.__members__ or name == "OK":
            raise ValueError(f"unknown gRPC status code {value!r}; e.g. UNAVAILABLE, INTERNAL, DEADLINE_EXCEEDED")
        return name

    @property
    def status_code(self) -> grpc.StatusCode:
        return grpc.StatusCode[self.code]

    def selects(self, node: str, driver: str, method: str, claims: Sequence[ClaimRef]) -> bool:
        if self.method not in ("*", method) and not fnmatch.fnmatchcase(method, self.method):
            return False
        if self.node is not None and not fnmatch.fnmatchcase(node, self.node):
            return False
        if self.driver is not None and not fnmatch.fnmatchcase(driver, self.driver):
            return False
        if self.claim is not None and not any(claim_matches(c, self.claim) for c in claims):
            return False
        return True

    def claims_hit(self, claims: Sequence[ClaimRef]) -> list[ClaimRef]:
        """The claims this rule is about (all of them when it names none)."""
        if self.claim is None:
            return list(claims)
        return [c for c in claims if claim_matches(c, self.claim)]


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    faults: list[FaultRule] = []


def load_rules(path: Path) -> list[FaultRule]:
    """Parse a fault file; UsageError names the file and what is wrong."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read fault file: {exc.strerror or exc}") from exc
    try:
        data: Any = json.loads(text) if path.suffix == ".json" else YAML(typ="safe").load(text)
    except (ValueError, YAMLError) as exc:
        raise UsageError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from exc
    if data is None:
        return []
    if isinstance(data, list):
        data = {"faults": data}
    try:
        return _File.model_validate(data).faults
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors(include_url=False)
        )
        raise UsageError(f"{path}: invalid fault file: {problems}") from exc


class FaultSet:
    """The rules in force, re-read from ``path`` when it changes; counts how often each rule fired."""

    def __init__(self, path: Path | None = None, rules: Sequence[FaultRule] = ()) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = list(rules)
        self._seen: list[int] = [0] * len(self._rules)
        self._applied: list[int] = [0] * len(self._rules)
        self._off: list[bool] = [False] * len(self._rules)
        self._stamp: tuple[int, int] | None = None
        if path is not None:
            self._reload(strict=True)

    def set_rules(self, rules: Sequence[FaultRule]) -> None:
        with self._lock:
            self._rules = list(rules)
            self._seen = [0] * len(self._rules)
            self._applied = [0] * len(self._rules)
            self._off = [False] * len(self._rules)

    def add(self, rule: FaultRule) -> int:
        """Add one rule in process (a scenario step), keeping the others' counts; returns its index."""
        with self._lock:
            self._rules.append(rule)
            self._seen.append(0)
            self._applied.append(0)
            self._off.append(False)
            return len(self._rules) - 1

    def drop(self, index: int) -> None:
        """Switch off the rule added as ``index``; its count stays readable."""
        with self._lock:
            self._off[index] = True

    @property
    def rules(self) -> list[FaultRule]:
        self._reload(strict=False)
        with self._lock:
            return list(self._rules)

    def _reload(self, strict: bool) -> None:
        if self.path is None:
            return
        try:
            st = os.stat(self.path)
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp == self._stamp and not strict:
            return
        self._stamp = stamp
        if stamp is None:
            self.set_rules([])
            return
        try:
            rules = load_rules(self.path)
        except UsageError as exc:
            if strict:
                raise
            log.error("%s (keeping the previous rules)", exc)
            return
        self.set_rules(rules)
        log.info("fault rules loaded from %s: %d rule(s)", self.path, len(rules))

    def applied(self) -> list[int]:
        """How many calls each rule in force was applied to, in rule order."""
        self._reload(strict=False)
        with self._lock:
            return list(self._applied)

    def match(self, node: str, driver: str, method: str, claims: Sequence[ClaimRef]) -> FaultRule | None:
        """The rule to apply to this call, if any (counting it as applied)."""
        self._reload(strict=False)
        with self._lock:
            for i, rule in enumerate(self._rules):
                if self._off[i] or not rule.selects(node, driver, method, claims):
                    continue
                self._seen[i] += 1
                if self._seen[i] <= rule.after:
                    continue
                if rule.count is not None and self._applied[i] >= rule.count:
                    continue
                self._applied[i] += 1
                return rule
        return None
