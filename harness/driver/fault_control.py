"""Fault control of the fake driver, switched from another process through a file.

The chaos steps (another process) call :func:`set_faults`, which replaces
``<root>/<node>/plugins/<driver>/faults.json`` atomically with a new ``generation``; the driver
re-reads the file when it changes (inode or mtime) and asks :class:`FaultControl` at each point
where a fault can strike. How often a counted fault has fired is kept in ``faults.used.json``
(owned by the driver, reset when the generation changes), so counts and one-shot crashes
survive a driver restart: a ``crash_at`` fault kills the driver once, not on every restart.
Every firing is counted, with or without a ``count`` (:func:`fired` reads it: a scenario step
whose fault never struck fails). ``set_faults(..., merge=True)`` changes only the kinds it names:
the others keep their spec, their per-kind generation and so their counts.

Faults:

    reset_fail      {count: N | forever: true, devices: [...]}   a device reset fails
    reset_slow      {seconds: S, count: N, devices: [...]}       a device reset takes S seconds longer
    prepare_fail    {claims: [...] | all, count: N}              NodePrepareResources fails per claim
    prepare_hang    {seconds: S, claims, count}                  prepare stalls after reading the claim
    unprepare_fail  {count: N, claims}                            NodeUnprepareResources fails per claim
    crash_at        {point: NAME, after: K}                      os._exit(137) the (K+1)-th time NAME is reached
    unhealthy       {devices: [...], message}                     the health stream reports them UNHEALTHY

``claims`` entries match a claim UID, name or ``namespace/name``; leaving ``claims`` or
``devices`` out means all of them; leaving ``count`` out means every time.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from draguard.harness.core.errors import UsageError
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs
from draguard.harness.core.fsio import atomic_write

__all__ = [
    "CrashPoint",
    "CRASH_POINTS",
    "ResetFail",
    "ResetSlow",
    "PrepareFail",
    "PrepareHang",
    "UnprepareFail",
    "CrashAt",
    "Unhealthy",
    "Faults",
    "FAULTS_FILE",
    "faults_path",
    "set_faults",
    "clear_faults",
    "FaultControl",
    "CRASH_EXIT_CODE",
    "fired",
]

FAULTS_FILE = "faults.json"
USED_FILE = "faults.used.json"
CRASH_EXIT_CODE = 137
"""Exit status of an injected crash: what a shell reports for a process killed by SIGKILL."""

CrashPoint = Literal[
    "prepare.begin",  # request received, nothing read yet
    "prepare.after_read",  # claim read from the API and validated
    "prepare.after_started",  # PrepareStarted written: devices reserved
    "prepare.after_cdi",  # CDI spec written, claim not yet completed
    "prepare.after_completed",  # PrepareCompleted written, response not yet sent
    "unprepare.begin",
    "unprepare.after_started",  # UnprepareStarted written: devices resetting
    "unprepare.during_reset",  # before each device reset
    "unprepare.after_reset",  # all devices reset, CDI spec not yet removed
    "unprepare.after_cdi_removed",
    "unprepare.after_forget",  # claim removed from the checkpoint, response not yet sent
    "checkpoint.mid_write",  # half of the temporary checkpoint file written
    "checkpoint.before_rename",  # temporary checkpoint complete, not yet renamed
]
CRASH_POINTS: tuple[str, ...] = get_args(CrashPoint)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResetFail(_Strict):
    count: int | None = Field(default=None, ge=1)
    forever: bool = False
    devices: list[str] | None = None

    @model_validator(mode="after")
    def _count_or_forever(self) -> ResetFail:
        if (self.count is None) == (not self.forever):
            raise ValueError("give exactly one of 'count' and 'forever: true'")
        return self


class ResetSlow(_Strict):
    seconds: float = Field(gt=0, le=600)
    count: int | None = Field(default=None, ge=1)
    devices: list[str] | None = None


class PrepareFail(_Strict):
    claims: list[str] | Literal["all"] | None = None
    count: int | None = Field(default=None, ge=1)


class PrepareHang(_Strict):
    seconds: float = Field(gt=0, le=600)
    claims: list[str] | Literal["all"] | None = None
    count: int | None = Field(default=None, ge=1)


class UnprepareFail(_Strict):
    claims: list[str] | Literal["all"] | None = None
    count: int | None = Field(default=None, ge=1)


class CrashAt(_Strict):
    point: CrashPoint
    after: int = Field(default=0, ge=0, description="times the point is passed before the crash")


class Unhealthy(_Strict):
    devices: list[str] = Field(min_length=1)
    message: str = Field(default="simulated hardware failure", max_length=1024)


class Faults(_Strict):
    """The whole content of ``faults.json``."""

    generation: str = ""
    generations: dict[str, str] = {}
    """Per fault kind: changes only when that kind is set, so a merge keeps the other kinds' counts."""
    reset_fail: ResetFail | None = None
    reset_slow: ResetSlow | None = None
    prepare_fail: PrepareFail | None = None
    prepare_hang: PrepareHang | None = None
    unprepare_fail: UnprepareFail | None = None
    crash_at: CrashAt | None = None
    unhealthy: Unhealthy | None = None


def faults_path(root: str | Path, node: str, driver: str = DEFAULT_DRIVER) -> Path:
    return NodeDirs(Path(root), node).plugin_dir(driver) / FAULTS_FILE


_KINDS = ("reset_fail", "prepare_fail", "prepare_hang", "unprepare_fail", "crash_at", "unhealthy")


def set_faults(
    root: str | Path,
    node: str,
    driver: str = DEFAULT_DRIVER,
    faults: Faults | Mapping[str, Any] | None = None,
    merge: bool = False,
    **kinds: Any,
) -> Faults:
    """Replace the faults of one node's driver (all of them: a fault left out is switched off), or
    with ``merge=True`` only the kinds given (a kind given as None is switched off).

    ``set_faults(root, "node-1", reset_fail={"count": 2})`` or ``set_faults(root, node, faults=...)``.
    """
    data: dict[str, Any] = {}
    generations: dict[str, str] = {}
    path = faults_path(root, node, driver)
    if merge and path.exists():
        try:
            current = Faults.model_validate_json(path.read_bytes())
        except (OSError, ValidationError):
            current = Faults()
        data = current.model_dump(exclude_none=True, exclude={"generation", "generations"})
        generations = dict(current.generations)
        for k in kinds:
            data.pop(k, None)
    if isinstance(faults, Faults):
        data.update(faults.model_dump(exclude_none=True, exclude={"generation", "generations"}))
    elif faults is not None:
        data.update(dict(faults))
    data.update({k: v for k, v in kinds.items() if v is not None})
    data["generation"] = uuid.uuid4().hex
    renewed = set(kinds) if merge else set(_KINDS)
    data["generations"] = {k: (uuid.uuid4().hex if k in renewed else generations.get(k, "")) for k in _KINDS
                           if k in data}
    try:
        model = Faults.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise UsageError(f"faults for node {node}: {where}: {first['msg']}") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, model.model_dump_json(exclude_none=True, indent=1).encode(), point="faults")
    return model


def clear_faults(root: str | Path, node: str, driver: str = DEFAULT_DRIVER) -> None:
    set_faults(root, node, driver)


def fired(root: str | Path, node: str, driver: str, kind: str) -> int:
    """How often fault ``kind`` fired on a node's driver since it was last set (0 before the driver saw it)."""
    plugin = faults_path(root, node, driver).parent
    try:
        current = Faults.model_validate_json((plugin / FAULTS_FILE).read_bytes())
        raw = json.loads((plugin / USED_FILE).read_bytes())
    except (OSError, ValueError, ValidationError):
        return 0
    generation = current.generations.get(kind)
    same = raw.get("generation") == current.generation or (
        generation and (raw.get("generations") or {}).get(kind) == generation)
    key = "crash_at.fired" if kind == "crash_at" else kind
    return int((raw.get("used") or {}).get(key, 0)) if same else 0


def _matches(selector: list[str] | str | None, *names: str) -> bool:
    if selector is None or selector == "all":
        return True
    return any(n in selector for n in names if n)


class FaultControl:
    """The driver's side: reads ``faults.json`` when it changes and decides whether a fault fires."""

    def __init__(self, plugin_dir: Path, log: logging.Logger | None = None) -> None:
        self.path = plugin_dir / FAULTS_FILE
        self.used_path = plugin_dir / USED_FILE
        self.log = log or logging.getLogger(__name__)
        self._lock = threading.RLock()
        self._stamp: tuple[int, int, int] | None = None
        self._faults = Faults()
        self._used: dict[str, int] = {}
        self._used_generation = ""

    # -- reading ------------------------------------------------------------------------------
    def current(self) -> Faults:
        with self._lock:
            try:
                st = os.stat(self.path)
                stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
            except FileNotFoundError:
                stamp = None
            if stamp == self._stamp:
                return self._faults
            self._stamp = stamp
            if stamp is None:
                self._faults = Faults()
            else:
                try:
                    self._faults = Faults.model_validate_json(self.path.read_bytes())
                except (OSError, ValidationError) as exc:
                    # A hand-edited file: keep the faults we had; set_faults() never writes one.
                    self.log.error("%s: ignored, not a valid faults file: %s", self.path, exc)
                    return self._faults
            self._load_used()
            self.log.info("faults now: %s", self._faults.model_dump_json(exclude_none=True))
            return self._faults

    def _load_used(self) -> None:
        gen = self._faults.generation
        kinds = self._faults.generations
        try:
            raw = json.loads(self.used_path.read_bytes())
            used = {k: int(v) for k, v in raw["used"].items()}
            if raw.get("generation") == gen:
                self._used, self._used_generation = used, gen
                return
            # A merge changed other kinds only: the counts of kinds whose generation stayed carry on.
            before = raw.get("generations") or {}
            self._used = {k: v for k, v in used.items()
                          if kinds.get(k.split(".")[0]) and before.get(k.split(".")[0]) == kinds.get(k.split(".")[0])}
            self._used_generation = gen
            return
        except (OSError, ValueError, KeyError, AttributeError):
            pass
        self._used, self._used_generation = {}, gen

    def _bump(self, key: str) -> int:
        self._used[key] = self._used.get(key, 0) + 1
        body = json.dumps({"generation": self._used_generation, "generations": self._faults.generations,
                           "used": self._used}).encode()
        atomic_write(self.used_path, body, point="faults-used")
        return self._used[key]

    def _take(self, key: str, count: int | None) -> bool:
        """Fire a fault: True while fewer than ``count`` have fired (always when no count); every firing is counted."""
        if count is not None and self._used.get(key, 0) >= count:
            return False
        self._bump(key)
        return True

    # -- questions the driver asks --------------------------------------------------------------
    def crash(self, point: str) -> None:
        """Exit at once (as ``kill -9`` would) if a ``crash_at`` fault names ``point``."""
        with self._lock:
            spec = self.current().crash_at
            if spec is None or spec.point != point or self._used.get("crash_at.fired"):
                return
            if self._bump("crash_at.hits") <= spec.after:
                return
            self._bump("crash_at.fired")
            self.log.warning("injected crash at %s", point)
            for handler in logging.getLogger().handlers:
                handler.flush()
            self.exit()

    def exit(self) -> None:
        """End the driver at a crash point: the whole process (a driver host ends one node instead)."""
        os._exit(CRASH_EXIT_CODE)

    def reset_fails(self, device: str) -> bool:
        with self._lock:
            spec = self.current().reset_fail
            if spec is None or not _matches(spec.devices, device):
                return False
            return self._take("reset_fail", None if spec.forever else spec.count)

    def reset_slow(self, device: str) -> float:
        """Extra seconds the reset of ``device`` takes (0 when no slow-reset fault applies)."""
        with self._lock:
            spec = self.current().reset_slow
            if spec is None or not _matches(spec.devices, device):
                return 0.0
            return spec.seconds if self._take("reset_slow", spec.count) else 0.0

    def prepare_fails(self, uid: str, namespace: str, name: str) -> bool:
        with self._lock:
            spec = self.current().prepare_fail
            if spec is None or not _matches(spec.claims, uid, name, f"{namespace}/{name}"):
                return False
            return self._take("prepare_fail", spec.count)

    def prepare_hang(self, uid: str, namespace: str, name: str) -> float:
        with self._lock:
            spec = self.current().prepare_hang
            if spec is None or not _matches(spec.claims, uid, name, f"{namespace}/{name}"):
                return 0.0
            return spec.seconds if self._take("prepare_hang", spec.count) else 0.0

    def unprepare_fails(self, uid: str, namespace: str, name: str) -> bool:
        with self._lock:
            spec = self.current().unprepare_fail
            if spec is None or not _matches(spec.claims, uid, name, f"{namespace}/{name}"):
                return False
            return self._take("unprepare_fail", spec.count)

    def unhealthy(self) -> dict[str, str]:
        """Devices the faults declare unhealthy, with the message to report."""
        spec = self.current().unhealthy
        return {d: spec.message for d in spec.devices} if spec else {}
