"""CDI (Container Device Interface): the one place draguard writes, parses and resolves CDI specs.

A CDI spec is a JSON (or YAML) file in a spec directory (``/etc/cdi``, ``/var/run/cdi`` on a real
node; ``<root>/<node>/cdi`` for draguard's fake nodes) that names a ``kind`` (``vendor/class``) and
its ``devices``, each with ``containerEdits`` (``env``, ``deviceNodes``, ``mounts``, ``hooks``,
``additionalGids``, ``intelRdt``), plus spec-level ``containerEdits`` applied once when any of its
devices is requested. A container runtime is handed fully qualified device IDs
``vendor/class=name`` (the kubelet passes the CDI IDs that NodePrepareResources returned) and
resolves them against the specs on disk; an ID that no spec defines fails the container.

No maintained Python CDI library exists on PyPI, so the rules are implemented here from the
upstream specification (cncf-tags/container-device-interface ``SPEC.md``, spec 0.8.0) and its
reference library (``pkg/parser/parser.go`` for names, ``pkg/cdi/version.go`` for the minimum
version each feature needs, ``pkg/cdi/cache.go`` for directory priority and conflicts):

- a kind is ``<vendor>/<class>``: vendor and class start with a letter, end with a letter or digit,
  and contain letters, digits, ``_``, ``-``, ``.``; a device name starts and ends with a letter or
  digit and may also contain ``:``;
- ``cdiVersion`` is a released spec version; features need a minimum version: ``type`` of a mount
  0.4.0; ``hostPath`` of a device node and device names starting with a digit 0.5.0; annotations and
  dots in the class 0.6.0; ``intelRdt`` and ``additionalGids`` 0.7.0;
- a spec must define at least one device, device names are unique in a spec;
- directories given later have higher priority; the same device defined twice at one priority is a
  conflict, and resolving it is an error.

Users: the fake driver writes one spec per prepared claim (:func:`claim_spec`, :func:`write_spec`);
the fake node agent resolves every ID before it starts a container (:class:`Registry`); the
conformance suite checks returned IDs (:func:`check_ids`).
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ruamel.yaml import YAML

from draguard.harness.core import jsonfast
from draguard.harness.core.errors import HarnessError

from .core.fsio import atomic_write

__all__ = [
    "CDI_VERSION",
    "SPEC_VERSIONS",
    "CdiError",
    "UnresolvableDevices",
    "QualifiedName",
    "parse_qualified_name",
    "qualified_name",
    "parse_kind",
    "DeviceNode",
    "Mount",
    "Hook",
    "ContainerEdits",
    "Spec",
    "parse_spec",
    "load_spec",
    "minimum_version",
    "Registry",
    "check_ids",
    "spec_path",
    "write_spec",
    "remove_spec",
    "ClaimDevice",
    "claim_spec",
    "claim_device_id",
]

CDI_VERSION = "0.6.0"
"""The version draguard writes: device names that start with a digit (claim UIDs) need 0.5.0."""
SPEC_VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0")
"""Released spec versions a runtime accepts (0.1.0 and 0.2.0 had another format; the reference
library's earliest supported version is 0.3.0)."""
SPEC_EXTENSIONS = (".json", ".yaml")
"""Files the reference library's cache reads from a spec directory."""

_VENDOR_OR_CLASS = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_DEVICE_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
_HOOK_NAMES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")


class CdiError(HarnessError):
    """A CDI spec or device name breaks the specification."""


class UnresolvableDevices(CdiError):
    """Some requested CDI device IDs resolve to no device (what a runtime reports at container creation)."""

    def __init__(self, ids: Sequence[str], reasons: Sequence[str]) -> None:
        self.ids = tuple(ids)
        self.reasons = tuple(reasons)
        super().__init__(f"unresolvable CDI devices {', '.join(ids)}" + (f" ({'; '.join(reasons)})" if reasons else ""))


# -- names ----------------------------------------------------------------------------------------


class QualifiedName(NamedTuple):
    vendor: str
    class_: str
    name: str

    @property
    def kind(self) -> str:
        return f"{self.vendor}/{self.class_}"

    def __str__(self) -> str:
        return f"{self.vendor}/{self.class_}={self.name}"


def parse_kind(kind: str) -> tuple[str, str]:
    """``vendor/class`` -> (vendor, class); CdiError naming the rule otherwise."""
    vendor, sep, class_ = kind.partition("/")
    if not sep or not vendor or not class_:
        raise CdiError(f"kind {kind!r}: must be <vendor>/<class>")
    if not _VENDOR_OR_CLASS.match(vendor):
        raise CdiError(f"kind {kind!r}: vendor {vendor!r} must start with a letter, end with a letter or digit "
                       "and contain only letters, digits, '_', '-', '.'")  # fmt: skip
    if not _VENDOR_OR_CLASS.match(class_):
        raise CdiError(f"kind {kind!r}: class {class_!r} must start with a letter, end with a letter or digit "
                       "and contain only letters, digits, '_', '-', '.'")  # fmt: skip
    return vendor, class_


def _check_device_name(name: str, where: str) -> None:
    if not isinstance(name, str) or not _DEVICE_NAME.match(name):
        raise CdiError(f"{where}: device name {name!r} must start and end with a letter or digit and contain only "
                       "letters, digits, '_', '-', '.', ':'")  # fmt: skip


def parse_qualified_name(device: str) -> QualifiedName:
    """``vendor/class=name`` -> its parts; CdiError for an unqualified or malformed ID."""
    head, sep, name = device.partition("=")
    if not sep or not head or not name or device.startswith("/"):
        raise CdiError(f"CDI device {device!r}: not a qualified name <vendor>/<class>=<name>")
    vendor, class_ = parse_kind(head)
    _check_device_name(name, f"CDI device {device!r}")
    return QualifiedName(vendor, class_, name)


def qualified_name(kind: str, name: str) -> str:
    vendor, class_ = parse_kind(kind)
    _check_device_name(name, kind)
    return f"{vendor}/{class_}={name}"


# -- container edits --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceNode:
    path: str
    host_path: str = ""
    type: str = ""
    permissions: str = ""

    @property
    def source(self) -> str:
        """The node on the host (``hostPath``, or ``path`` when not given)."""
        return self.host_path or self.path


@dataclass(frozen=True)
class Mount:
    host_path: str
    container_path: str
    type: str = ""
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hook:
    hook_name: str
    path: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContainerEdits:
    """Edits to a container's OCI spec; :meth:`merge` appends in order, as a runtime applies them."""

    env: tuple[str, ...] = ()
    device_nodes: tuple[DeviceNode, ...] = ()
    mounts: tuple[Mount, ...] = ()
    hooks: tuple[Hook, ...] = ()
    additional_gids: tuple[int, ...] = ()
    intel_rdt: Mapping[str, Any] | None = None

    def merge(self, other: ContainerEdits) -> ContainerEdits:
        return ContainerEdits(
            self.env + other.env,
            self.device_nodes + other.device_nodes,
            self.mounts + other.mounts,
            self.hooks + other.hooks,
            self.additional_gids + tuple(g for g in other.additional_gids if g not in self.additional_gids),
            other.intel_rdt if other.intel_rdt is not None else self.intel_rdt,
        )

    @property
    def empty(self) -> bool:
        return not (self.env or self.device_nodes or self.mounts or self.hooks or self.additional_gids or self.intel_rdt)

    def environment(self) -> dict[str, str]:
        """``env`` as a mapping (a later entry wins, as in an OCI process environment)."""
        out: dict[str, str] = {}
        for entry in self.env:
            k, _, v = entry.partition("=")
            out[k] = v
        return out


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise CdiError(f"{where}: must be a list")
    return value


def _parse_edits(raw: Any, where: str) -> ContainerEdits:
    if raw is None:
        return ContainerEdits()
    if not isinstance(raw, Mapping):
        raise CdiError(f"{where}: containerEdits must be an object")
    env = []
    for i, e in enumerate(_list(raw.get("env"), f"{where}.env")):
        if not isinstance(e, str) or "=" not in e or e.startswith("="):
            raise CdiError(f"{where}.env[{i}]: {e!r} is not NAME=VALUE")
        env.append(e)
    nodes = []
    for i, d in enumerate(_list(raw.get("deviceNodes"), f"{where}.deviceNodes")):
        if not isinstance(d, Mapping) or not isinstance(d.get("path"), str) or not d["path"]:
            raise CdiError(f"{where}.deviceNodes[{i}]: 'path' is required")
        perms = str(d.get("permissions") or "")
        if perms.strip("rwm"):
            raise CdiError(f"{where}.deviceNodes[{i}]: permissions {perms!r} may only contain r, w and m")
        nodes.append(DeviceNode(d["path"], str(d.get("hostPath") or ""), str(d.get("type") or ""), perms))
    mounts = []
    for i, m in enumerate(_list(raw.get("mounts"), f"{where}.mounts")):
        if not isinstance(m, Mapping) or not m.get("hostPath") or not m.get("containerPath"):
            raise CdiError(f"{where}.mounts[{i}]: 'hostPath' and 'containerPath' are required")
        mounts.append(Mount(str(m["hostPath"]), str(m["containerPath"]), str(m.get("type") or ""),
                            tuple(str(o) for o in _list(m.get("options"), f"{where}.mounts[{i}].options"))))  # fmt: skip
    hooks = []
    for i, h in enumerate(_list(raw.get("hooks"), f"{where}.hooks")):
        if not isinstance(h, Mapping) or h.get("hookName") not in _HOOK_NAMES:
            raise CdiError(f"{where}.hooks[{i}]: hookName must be one of {', '.join(_HOOK_NAMES)}")
        if not isinstance(h.get("path"), str) or not h["path"].startswith("/"):
            raise CdiError(f"{where}.hooks[{i}]: 'path' must be absolute")
        hooks.append(Hook(h["hookName"], h["path"], tuple(str(a) for a in _list(h.get("args"), f"{where}.hooks[{i}].args"))))
    gids = []
    for g in _list(raw.get("additionalGids"), f"{where}.additionalGids"):
        if not isinstance(g, int) or g < 0 or g >= 2**32:
            raise CdiError(f"{where}.additionalGids: {g!r} is not a uint32")
        if g:  # the spec: a value of 0 is ignored
            gids.append(g)
    rdt = raw.get("intelRdt")
    if rdt is not None and not isinstance(rdt, Mapping):
        raise CdiError(f"{where}.intelRdt: must be an object")
    return ContainerEdits(tuple(env), tuple(nodes), tuple(mounts), tuple(hooks), tuple(gids), rdt)


# -- specs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """A parsed, valid CDI spec."""

    version: str
    kind: str
    devices: Mapping[str, ContainerEdits]
    edits: ContainerEdits = ContainerEdits()
    annotations: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def qualified(self, name: str) -> str:
        return f"{self.kind}={name}"


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def minimum_version(raw: Mapping[str, Any]) -> str:
    """The lowest spec version whose features ``raw`` uses (``pkg/cdi/version.go`` upstream)."""
    devices = [d for d in raw.get("devices") or [] if isinstance(d, Mapping)]
    edits = [raw.get("containerEdits") or {}] + [d.get("containerEdits") or {} for d in devices]
    edits = [e for e in edits if isinstance(e, Mapping)]
    _, _, class_ = str(raw.get("kind", "")).partition("/")
    if any(e.get("intelRdt") is not None or e.get("additionalGids") for e in edits):
        return "0.7.0"
    if raw.get("annotations") or any(d.get("annotations") for d in devices) or "." in class_:
        return "0.6.0"
    if any(str(d.get("name", "x"))[:1].isdigit() for d in devices) or any(
        isinstance(n, Mapping) and n.get("hostPath") for e in edits for n in e.get("deviceNodes") or []
    ):
        return "0.5.0"
    if any(isinstance(m, Mapping) and m.get("type") for e in edits for m in e.get("mounts") or []):
        return "0.4.0"
    return "0.3.0"


def parse_spec(raw: Any, source: str = "<spec>") -> Spec:
    """Validate a spec document (already decoded from JSON/YAML); CdiError names the first problem."""
    if not isinstance(raw, Mapping):
        raise CdiError(f"{source}: a CDI spec must be an object")
    version = raw.get("cdiVersion")
    if not isinstance(version, str) or version not in SPEC_VERSIONS:
        raise CdiError(f"{source}: cdiVersion {version!r} is not a released CDI spec version ({', '.join(SPEC_VERSIONS)})")
    kind = raw.get("kind")
    if not isinstance(kind, str):
        raise CdiError(f"{source}: 'kind' is required")
    try:
        parse_kind(kind)
    except CdiError as exc:
        raise CdiError(f"{source}: {exc}") from None
    needed = minimum_version(raw)
    if _version_key(version) < _version_key(needed):
        raise CdiError(f"{source}: the spec uses features of CDI {needed} but declares cdiVersion {version}")
    devices_raw = raw.get("devices")
    if not isinstance(devices_raw, list) or not devices_raw:
        raise CdiError(f"{source}: 'devices' must list at least one device")
    devices: dict[str, ContainerEdits] = {}
    for i, d in enumerate(devices_raw):
        where = f"{source}: devices[{i}]"
        if not isinstance(d, Mapping):
            raise CdiError(f"{where}: must be an object")
        name = d.get("name")
        if not isinstance(name, str):
            raise CdiError(f"{where}: 'name' is required")
        _check_device_name(name, where)
        if name in devices:
            raise CdiError(f"{where}: device {name!r} is defined twice")
        devices[name] = _parse_edits(d.get("containerEdits"), f"{where}.containerEdits")
    edits = _parse_edits(raw.get("containerEdits"), f"{source}: containerEdits")
    annotations = raw.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        raise CdiError(f"{source}: annotations must be an object")
    return Spec(version, kind, devices, edits, {str(k): str(v) for k, v in annotations.items()}, source)


def load_spec(path: Path) -> Spec:
    """Read and validate one spec file (``.json`` or ``.yaml``)."""
    return _parse_text(path, _read_text(path))


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise CdiError(f"{path}: cannot read CDI spec: {exc.strerror or exc}") from exc


def _parse_text(path: Path, text: str) -> Spec:
    try:
        if path.suffix == ".yaml":
            raw = YAML(typ="safe").load(text)
        else:
            raw = jsonfast.loads(text)
    except Exception as exc:  # JSON or YAML syntax: one message either way
        raise CdiError(f"{path}: not valid {path.suffix[1:].upper()}: {str(exc).splitlines()[0]}") from exc
    return parse_spec(raw, str(path))


class Registry:
    """The specs of some directories, as a runtime's CDI cache sees them (read fresh by :meth:`refresh`).

    ``dirs`` in increasing priority: a device defined in a later directory replaces an earlier one;
    defined twice in one directory, it is a conflict and does not resolve.
    """

    def __init__(self, dirs: Sequence[Path], parsed: dict[Path, tuple[str, Spec]] | None = None) -> None:
        self.dirs = [Path(d) for d in dirs]
        self.devices: dict[str, tuple[Spec, ContainerEdits]] = {}
        self.errors: dict[str, str] = {}
        """Spec file -> why it was ignored."""
        self.conflicts: dict[str, list[str]] = {}
        """Qualified device -> the spec files that define it at the same priority."""
        self._parsed: dict[Path, tuple[str, Spec]] = {} if parsed is None else parsed
        """Valid specs with the text each was parsed from, which registries over the same directories
        may share: a file whose text is the same is not parsed and validated again (a fake node reads its
        CDI directory before every container start). Entries only ever map a text to its own parse, so
        a registry reading it while another refreshes sees at worst a miss."""
        self.refresh()

    def _load(self, path: Path) -> Spec:
        text = _read_text(path)
        before = self._parsed.get(path)
        if before is not None and before[0] == text:
            return before[1]
        spec = _parse_text(path, text)
        self._parsed[path] = (text, spec)
        return spec

    def refresh(self) -> Registry:
        """Read the directories again, as they are now."""
        devices: dict[str, tuple[Spec, ContainerEdits]] = {}
        errors: dict[str, str] = {}
        conflicts: dict[str, list[str]] = {}
        listed: set[Path] = set()
        for d in self.dirs:
            level: dict[str, tuple[Spec, ContainerEdits]] = {}
            sources: dict[str, list[str]] = {}
            try:
                paths = sorted(p for p in d.iterdir() if p.suffix in SPEC_EXTENSIONS and not p.name.startswith("."))
            except FileNotFoundError:
                continue
            listed.update(paths)
            for p in paths:
                try:
                    spec = self._load(p)
                except CdiError as exc:
                    if p.exists():  # a spec removed while we listed is simply gone
                        errors[str(p)] = str(exc)
                    continue
                for name, edits in spec.devices.items():
                    q = spec.qualified(name)
                    level[q] = (spec, edits)
                    sources.setdefault(q, []).append(str(p))
            for q, files in sources.items():
                if len(files) > 1:
                    conflicts[q] = files
                else:
                    conflicts.pop(q, None)  # a higher priority directory settles it
                devices[q] = level[q]
        for path in list(self._parsed):  # specs removed since: their parse is not kept
            if path not in listed and path.parent in self.dirs:
                self._parsed.pop(path, None)
        self.devices, self.errors, self.conflicts = devices, errors, conflicts
        return self

    def resolve(self, ids: Iterable[str]) -> ContainerEdits:
        """The merged edits of ``ids``: each spec's own edits once, then each device's, in request order.

        Raises :class:`UnresolvableDevices` listing every ID that is malformed, unknown or in conflict.
        """
        bad: list[str] = []
        reasons: list[str] = []
        edits = ContainerEdits()
        applied: set[int] = set()
        for cid in ids:
            try:
                parse_qualified_name(cid)
            except CdiError as exc:
                bad.append(cid)
                reasons.append(str(exc))
                continue
            if cid in self.conflicts:
                bad.append(cid)
                reasons.append(f"{cid} is defined by {len(self.conflicts[cid])} specs: {', '.join(self.conflicts[cid])}")
                continue
            found = self.devices.get(cid)
            if found is None:
                bad.append(cid)
                continue
            spec, device_edits = found
            if id(spec) not in applied:
                applied.add(id(spec))
                edits = edits.merge(spec.edits)
            edits = edits.merge(device_edits)
        if bad:
            raise UnresolvableDevices(bad, reasons)
        return edits


def resolvable(cdi_dir: Path) -> frozenset[str]:
    """The qualified device names that the specs in ``cdi_dir`` resolve: each defined once there (a
    missing folder resolves none)."""
    registry = Registry([cdi_dir])
    return frozenset(q for q in registry.devices if q not in registry.conflicts)


def check_ids(cdi_dir: Path, ids: Sequence[str]) -> list[str]:
    """Problems resolving ``ids`` against the specs in ``cdi_dir``, one sentence each; empty if all resolve.

    An ID also fails when the device it names carries no container edits at all (nothing would
    reach the container).
    """
    registry = Registry([cdi_dir])
    problems = [f"{cdi_dir / Path(f).name}: not a valid CDI spec: {e}" for f, e in sorted(registry.errors.items())]
    for cid in ids:
        try:
            registry.resolve([cid])
        except UnresolvableDevices as exc:
            problems.append(f"CDI device {cid} is in no spec under {cdi_dir}"
                            + (f" ({'; '.join(exc.reasons)})" if exc.reasons else ""))  # fmt: skip
            continue
        if registry.devices[cid][1].empty:
            problems.append(f"CDI device {cid} has no container edits")
    return problems


# -- writing --------------------------------------------------------------------------------------


def spec_path(cdi_dir: Path, vendor: str, name: str) -> Path:
    """``<dir>/<vendor>-<name>.json``: one file per producer and owner (the reference producer's naming)."""
    return cdi_dir / f"{vendor}-{name}.json"


def write_spec(path: Path, spec: Mapping[str, Any], crash: Any = None) -> Path:
    """Validate ``spec`` and replace ``path`` with it atomically (a runtime never reads half a file).

    Not synced to disk: the reference library's producer writes a temporary file and renames it, no
    fsync (``pkg/cdi/producer/save.go`` ``Save``), the DRA test driver uses ``os.WriteFile``, and on a
    real node the spec directory ``/var/run/cdi`` is a tmpfs that a power loss empties anyway.
    """
    parse_spec(spec, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, _encode(spec), crash=crash, point="cdi", sync="none")
    return path


def write_raw(path: Path, spec: Mapping[str, Any]) -> Path:
    """Write ``spec`` without validating it: only for a producer that is meant to be wrong (a mutant)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, _encode(spec), point="cdi", sync="none")
    return path


def _encode(spec: Mapping[str, Any]) -> bytes:
    """Compact JSON (an indented spec cost four times more): see :mod:`.jsonfast`."""
    return jsonfast.dumps(spec)


def remove_spec(path: Path) -> bool:
    """Remove a spec file; False if there was none (idempotent)."""
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


# -- the claim specs of draguard's fake driver -------------------------------------------------------

CLAIM_CLASS = "gpu"


@dataclass(frozen=True)
class ClaimDevice:
    """One prepared device of a claim, as its CDI device describes it."""

    device: str
    uuid: str
    request: str
    dev_path: str = ""
    """The device node on the host (the fake node's device file); empty: no device node."""


def claim_device_id(driver: str, claim_uid: str, device: str) -> str:
    """``<driver>/gpu=<claimUID>-<device>``: the ID NodePrepareResources returns for a device of a claim."""
    return f"{driver}/{CLAIM_CLASS}={claim_uid}-{device}"


def _env_name(s: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", s.upper())


DEVICE_MAJOR = 195
"""The character-device major number NVIDIA's GPUs use (``/dev/nvidia<minor>``)."""


def _minor(device: str) -> int:
    """A stable minor number per device: its trailing index (``gpu-3`` -> 3), else a hash below 256."""
    digits = re.search(r"(\d+)$", device)
    return int(digits.group(1)) % 256 if digits else zlib.crc32(device.encode()) % 256


def claim_spec(driver: str, claim_uid: str, devices: Sequence[ClaimDevice]) -> dict[str, Any]:
    """The spec of one claim: kind ``<driver>/gpu``, one device per prepared device.

    Each device's edits give the container its device node (``/dev/draguard/<device>`` from the
    node's device file) and environment variables naming it, as NVIDIA's driver sets
    ``NVIDIA_VISIBLE_DEVICES``; the spec-level edits name the driver and the claim.
    """
    out: dict[str, Any] = {
        "cdiVersion": CDI_VERSION,
        "kind": f"{driver}/{CLAIM_CLASS}",
        "containerEdits": {"env": [f"DRA_RESOURCE_DRIVER_NAME={driver}", f"DRAGUARD_CLAIM_UID={claim_uid}"]},
        "devices": [],
    }
    for i, d in enumerate(devices):
        key = _env_name(d.device)
        edits: dict[str, Any] = {
            "env": [
                f"DRAGUARD_DEVICE_{i}={d.device}",
                f"DRAGUARD_DEVICE_{key}_UUID={d.uuid}",
                f"DRAGUARD_DEVICE_{key}_REQUEST={d.request}",
            ]
        }
        if d.dev_path:
            # The fake node's device file is a plain file, not a device node: the spec states the node
            # fully (a character device with NVIDIA's major number and a minor per device), so that a
            # real CDI library (containerd's, the hollow kubelet's) does not need to stat the host path.
            edits["deviceNodes"] = [{"path": f"/dev/draguard/{d.device}", "hostPath": d.dev_path, "type": "c",
                                     "major": DEVICE_MAJOR, "minor": _minor(d.device), "permissions": "rw"}]
        out["devices"].append({"name": f"{claim_uid}-{d.device}", "containerEdits": edits})
    return out
