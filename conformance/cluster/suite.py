"""The cluster suite's engine: configuration, capability detection, node access, the context, the runner.

A check is ``check(ctx: ClusterContext) -> None`` registered with :func:`cluster_check` into
:data:`draguard.harness.core.registry.CHECKS` as ``conformance.<profile>.<name>`` with its rule, source
and the fake-driver mutants it is aimed at. It passes, fails (:class:`~..checks.CheckFailed`, with
evidence) or skips (:class:`~..checks.Skip`, with the reason), through the engine the sanity suite
uses (:func:`draguard.conformance.checks.run_entry`).

Checks drive the driver the way users do: pods with claims on the driver's nodes, through the real
scheduler and kubelet. What the API shows (allocation, reservedFor, deallocation, eviction) is always
checked; what only the node knows (the driver prepared the claim, released its devices, leaked
nothing) needs :class:`NodeAccess` and is skipped with the reason otherwise. Every object a check
creates carries the run label and is deleted when the check ends, whatever the outcome.

Two things any driver exposes are judged for every check where the suite can see them: its gRPC calls
and answers, where the interposer records them (:mod:`.calls`; the ``conformance.driver-calls.*``
checks report the breaches, or are not applicable with the reason), and the node's CDI folder
(``ClusterConfig.cdi_dir``): a claim's answered CDI device IDs resolve while its pod runs, and no CDI
spec naming the claim is left once it is unprepared. After each check's cleanup the suite waits for
the driver to go quiet and sweeps the CDI folder for the check's claims, so one check's leftovers fail
that check, never the next.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from draguard.harness import cdi as cdi_specs
from draguard.harness.cluster.kind.nodefiles import SANDBOX_IMAGE
from draguard.harness.cluster.preflight import allocatable
from draguard.harness.core.errors import DefinitionError, HarnessError, UsageError
from draguard.harness.core.registry import CHECKS, Entry
from draguard.harness.devices.truth import DeviceTruth
from draguard.harness.driver.fault_control import clear_faults, set_faults
from draguard.harness.driver.state import DeviceState, read_checkpoint
from draguard.harness.kube import RUN_LABEL, ApiError, Kube, Obj
from draguard.harness.result import CheckResult, Evidence, RunResult

from ..checks import NODE_PLACEHOLDER, CheckFailed, Skip, run_entry, run_restart_command
from .calls import CallJudge, CallRecord, RecordFile, Window

__all__ = [
    "PROFILES",
    "ClusterConfig",
    "NodeAccess",
    "FakeDriverAccess",
    "CommandAccess",
    "KubeletRestart",
    "ClusterContext",
    "cluster_check",
    "cluster_checks",
    "checks_table",
    "detect",
    "open_context",
    "run_check",
    "run_conformance",
]

log = logging.getLogger("draguard.conformance")

PREFIX = "conformance."
PROFILES = ("core", "topology", "sharing", "gang", "chaos", "driver-calls")
PAUSE_IMAGE = SANDBOX_IMAGE
"""The checks' pods run the release's sandbox image (kubeadm's pause tag): kubeadm-built nodes, kind's included,
hold it already, so the pods start on a cluster that cannot pull images."""


@dataclass(frozen=True)
class ClusterConfig:
    """What the suite is pointed at, and its bounds."""

    kubeconfig: Path
    driver: str
    device_class: str
    context: str | None = None
    nodes: str | None = None
    """Label selector of the nodes to use [default: every node the driver publishes devices for]."""
    profiles: tuple[str, ...] = PROFILES
    select: tuple[str, ...] = ()
    """Check id globs to run (all of the chosen profiles when empty)."""
    wait_timeout: float = 60.0
    """How long a pod may take to run, to go, a claim to be deallocated."""
    namespace: str | None = None
    """An existing namespace to run the checks' pods and claims in (kept, and so is everything in it the
    suite did not create); by default a namespace of the suite's own, deleted at the end."""
    check_timeout: float = 300.0
    reuse_count: int = 3
    prepare_delay: float = 50.0
    """How long the eviction-during-prepare check holds a prepare inside the driver: longer than the
    kubelet's DRA call timeout (45 s, pkg/kubelet/cm/dra/plugin), so the kubelet gives up on it."""
    cdi_dir: str | None = None
    """The nodes' CDI spec folder as this machine sees it, ``{node}`` replaced by the node's name
    [default: not read: the CDI parts of the checks are not judged]."""
    calls: Path | None = None
    """The gRPC interposer's record of the driver's calls (``draguard proxy --record FILE``), when the
    interposer sits in front of the driver; ``run_conformance(calls=...)`` hands an in-memory one."""
    no_calls: str = ("no gRPC interposer sits in front of the driver: the cluster's node agents call its sockets "
                     "directly (a remote cluster, a DaemonSet driver); where draguard's node agents call it through "
                     "`draguard proxy`, give its record with --calls")
    """Why the driver's calls are not judged when there is no record (the driver-calls checks say it)."""
    settle: float = 20.0
    """How long after a check's cleanup the suite waits for the driver to go quiet and for its CDI specs
    of the check's claims to go."""
    concurrent_pods: int = 3
    """How many pods the concurrent-prepare check starts at once on one node (fewer where fewer devices)."""


class NodeAccess(Protocol):
    """What the suite may see and do on the driver's nodes beyond the API; a missing method skips.

    ``prepared``/``held``/``leaks`` read the driver's own record of a node (the node-side truth);
    the others are hooks of the driver. Methods raise :class:`NotImplementedError` when they are
    not available for this driver.
    """

    def prepared(self, node: str) -> set[str]:
        """UIDs of the claims the driver on ``node`` has prepared (completely or partly)."""

    def held(self, node: str) -> dict[str, str]:
        """Device name → claim UID of every device the driver on ``node`` does not consider free."""

    def leaks(self, node: str) -> list[str]:
        """The driver's own record on ``node`` contradicts itself (a device lost), one sentence each."""

    def restart(self, node: str) -> None:
        """Restart the driver on ``node``; return once it was asked to start again."""

    def restart_kubelet(self, node: str) -> None:
        """Restart the node agent (the kubelet) of ``node`` while its pods run; return once it was asked
        to start again. It prepares the claims of the running pods again, as a restarted kubelet does."""

    def fail_release(self, node: str, device: str) -> None:
        """Make the next release (reset) of ``device`` fail once."""

    def hold_release(self, node: str, device: str) -> None:
        """Make every release (reset) of ``device`` fail until :meth:`clear`."""

    def slow_prepare(self, node: str, claim_uid: str, seconds: float) -> None:
        """Make the next prepare of the claim take ``seconds`` longer, inside the driver."""

    def clear(self, node: str) -> None:
        """Undo every fault set through these hooks."""


class FakeDriverAccess:
    """Node access to draguard's fake driver: its checkpoint and fault file under ``root``.

    ``processes`` (node → :class:`~draguard.harness.driver.process.FakeDriverProcess`) or
    ``restart_command`` (``{node}`` is replaced) enable ``restart``.
    """

    def __init__(self, root: str | Path, driver: str, processes: Mapping[str, Any] | None = None,
                 restart_command: str | None = None) -> None:
        self.root = Path(root)
        self.driver = driver
        self.processes = dict(processes or {})
        self.command = CommandAccess(restart_command) if restart_command else None

    def _checkpoint(self, node: str) -> Any:
        return read_checkpoint(self.root, node, self.driver)

    def prepared(self, node: str) -> set[str]:
        return set(self._checkpoint(node).claims)

    def held(self, node: str) -> dict[str, str]:
        cp = self._checkpoint(node)
        return {n: (r.claim or "") for n, r in cp.devices.items() if r.state is not DeviceState.FREE}

    def leaks(self, node: str) -> list[str]:
        """Lost devices in the driver's books, and a device the hardware (the fake node's device truth)
        reports as failed in its last reset while the driver holds it for no claim: nobody will retry
        that reset, so the device is lost to the node whatever the books say."""
        cp = self._checkpoint(node)
        out = list(cp.leaks())
        truth = DeviceTruth(self.root, node)
        if truth.exists:
            held = {n for n, r in cp.devices.items() if r.state is not DeviceState.FREE}
            out += [f"device {n}: its last reset failed ({r.reset_error or 'no message'}) and the driver holds it "
                    "for no claim (device truth)" for n, r in sorted(truth.read().devices.items())
                    if r.reset == "failed" and n not in held]
        return out

    def restart(self, node: str) -> None:
        if node in self.processes:
            self.processes[node].restart()
        elif self.command is not None:
            self.command.restart(node)
        else:
            raise NotImplementedError("no process handle or --restart-command for the fake driver")

    def _set(self, node: str, **faults: Any) -> None:
        set_faults(self.root, node, self.driver, **faults)

    def fail_release(self, node: str, device: str) -> None:
        self._set(node, reset_fail={"count": 1, "devices": [device]})

    def hold_release(self, node: str, device: str) -> None:
        self._set(node, reset_fail={"forever": True, "devices": [device]})

    def slow_prepare(self, node: str, claim_uid: str, seconds: float) -> None:
        self._set(node, prepare_hang={"seconds": seconds, "claims": [claim_uid], "count": 1})

    def clear(self, node: str) -> None:
        clear_faults(self.root, node, self.driver)


class CommandAccess:
    """Node access for any driver: only ``restart``, by a shell command (``{node}`` is replaced)."""

    def __init__(self, restart_command: str, timeout: float = 120.0) -> None:
        self.restart_command = restart_command
        self.timeout = timeout

    def restart(self, node: str) -> None:
        run_restart_command(self.restart_command, node, self.timeout)


class KubeletRestart:
    """``access`` (any node access, or None) with ``restart_kubelet`` by a shell command (``{node}`` is
    replaced): ``--kubelet-restart-command``."""

    def __init__(self, access: Any, command: str, timeout: float = 120.0) -> None:
        self.access = access
        self.command = command
        self.timeout = timeout

    def restart_kubelet(self, node: str) -> None:
        run_restart_command(self.command, node, self.timeout)

    def __getattr__(self, name: str) -> Any:
        if name == "access":
            raise AttributeError(name)
        return getattr(self.access, name)


CheckFn = Callable[["ClusterContext"], None]


def cluster_check(check_id: str, *, rule: str, source: str, aimed_at: Sequence[str] = (),
                  needs: Sequence[str] = (), allocates: bool = True,
                  driver_calls: bool = False) -> Callable[[CheckFn], CheckFn]:
    """Register a cluster check ``conformance.<profile>.<name>`` with its rule and source.

    ``aimed_at`` names the fake-driver mutants it exists to catch (a test asserts each fails it);
    ``needs`` names what it needs beyond the API (:class:`NodeAccess` methods, capabilities).
    A check that ``allocates`` devices is skipped before it starts, with the cause, when the
    DeviceClass selects no published device on the chosen nodes (it would wait for pods that cannot run).
    A ``driver_calls`` check reports on the interposer's record: not applicable, with the reason, without one.
    """
    parts = check_id.split(".")
    if len(parts) != 3 or parts[0] != "conformance" or parts[1] not in PROFILES:
        raise DefinitionError(f"conformance check id {check_id!r} must be conformance.<{'|'.join(PROFILES)}>.<name>")
    if not source.strip():
        raise DefinitionError(f"conformance check {check_id!r}: say where its rule comes from (source=...)")
    return CHECKS.register(check_id, summary=rule, source=source, aimed_at=tuple(aimed_at), needs=tuple(needs),
                           profile=parts[1], allocates=allocates, driver_calls=driver_calls)


def cluster_checks(profiles: Sequence[str] = PROFILES, select: Sequence[str] = ()) -> list[Entry[Any]]:
    """The registered cluster checks of ``profiles``, in profile order, filtered by id globs (the package
    registers them: importing this module imports the package first)."""
    unknown = [p for p in profiles if p not in PROFILES]
    if unknown:
        raise UsageError(f"unknown profile {', '.join(map(repr, unknown))}; known: {', '.join(PROFILES)}")
    entries = [e for e in CHECKS.entries() if e.name.startswith(PREFIX) and e.meta.get("profile") in profiles]
    if select:
        entries = [e for e in entries if any(fnmatch.fnmatchcase(e.name, pat) for pat in select)]
    order = {p: i for i, p in enumerate(PROFILES)}
    return sorted(entries, key=lambda e: (order[str(e.meta["profile"])], e.name))


# -- capabilities ---------------------------------------------------------------------------------
def _served(kube: Kube, group: str) -> list[str]:
    try:
        doc = kube.request("GET", f"/apis/{group}")
    except (ApiError, HarnessError):
        return []
    return [v.get("version", "") for v in doc.get("versions") or []]


def _resources(kube: Kube, group_version: str) -> set[str]:
    try:
        doc = kube.request("GET", f"/apis/{group_version}")
    except (ApiError, HarnessError):
        return set()
    return {r.get("name", "") for r in doc.get("resources") or []}


def detect(kube: Kube, config: ClusterConfig) -> dict[str, Any]:
    """What the cluster serves and the driver publishes; the checks decide from this whether they apply."""
    caps: dict[str, Any] = {}
    try:
        caps["kubernetes"] = kube.server_version().get("gitVersion")
    except (ApiError, HarnessError) as exc:
        caps["kubernetes"] = None
        caps["error"] = f"cannot read the server version: {exc}"
    caps["resourceVersions"] = _served(kube, "resource.k8s.io")
    caps["resourceV1"] = "v1" in caps["resourceVersions"]
    caps["deviceTaintRules"] = "devicetaintrules" in _resources(kube, "resource.k8s.io/v1")
    gates = kube.feature_gates()
    caps["featureGates"] = {k: v for k, v in sorted(gates.items()) if k.startswith("DRA") or k == "DynamicResourceAllocation"}
    caps["featureGatesObservable"] = bool(gates)
    return caps


# -- the context ----------------------------------------------------------------------------------
@dataclass
class ClusterContext:
    """Everything a check may use; one per suite run."""

    config: ClusterConfig
    kube: Kube
    namespace: str
    run_id: str
    nodes: list[str]
    """The nodes to use: the driver publishes devices for them and they match the selector."""
    slices: list[Obj]
    capabilities: dict[str, Any]
    access: Any = None
    evidence: dict[str, Any] | None = None
    """When set, the claims, pods and events of each check are kept here under its id (before deletion)."""
    current: str = ""
    calls: CallJudge | None = None
    """The judge of the driver's calls, where the interposer records them (None: not judged)."""
    window: Window | None = None
    """The running check's stretch of the call record."""
    notes: list[str] = field(default_factory=list)
    """What the running check did not judge, and why (a passed check says it)."""
    _prepared_on: dict[str, str] = field(default_factory=dict)
    """uid -> node of each claim the running check saw prepared (its CDI specs are swept after it)."""
    _cdi_exempt: dict[str, str] = field(default_factory=dict)
    """uid -> why the CDI sweep leaves that claim to another check."""
    _seen: dict[str, dict[str, Obj]] = field(default_factory=dict)
    _made: list[tuple[str, str, str | None]] = field(default_factory=list)
    _seq: int = 0

    @property
    def check_timeout(self) -> float:
        return self.config.check_timeout

    # -- the driver's devices ---------------------------------------------------------------------
    def devices(self, node: str) -> list[Obj]:
        """The devices the driver publishes for ``node`` (with their pool in ``_pool``)."""
        out: list[Obj] = []
        for sl in self.slices:
            spec = sl.get("spec", {})
            if spec.get("nodeName") == node:
                out += [d | {"_pool": spec.get("pool", {}).get("name", "")} for d in spec.get("devices") or []]
        return out

    def attribute(self, pool: str, device: str, attr: str) -> Any:
        for sl in self.slices:
            spec = sl.get("spec", {})
            if spec.get("pool", {}).get("name") != pool:
                continue
            for d in spec.get("devices") or []:
                if d.get("name") == device:
                    value = (d.get("attributes") or {}).get(attr) or (d.get("attributes") or {}).get(attr.split("/")[-1])
                    return None if value is None else next(iter(value.values()), None)
        return None

    def shared_attribute(self, node: str, count: int) -> str | None:
        """A device attribute of which ``count`` devices on ``node`` share a value, qualified with the driver."""
        values: dict[tuple[str, str], int] = {}
        for d in self.devices(node):
            for name, value in (d.get("attributes") or {}).items():
                key = (name, repr(value))
                values[key] = values.get(key, 0) + 1
        names = sorted({name for (name, _), n in values.items() if n >= count})
        if not names:
            return None
        name = names[0]
        return name if "/" in name else f"{self.config.driver}/{name}"

    # -- objects --------------------------------------------------------------------------------
    def name(self, base: str) -> str:
        self._seq += 1
        return f"{base}-{self.run_id}-{self._seq}"  # the run's own: never a name someone else made

    def create(self, obj: Obj) -> Obj:
        """Create ``obj`` with the run label (in the suite's namespace when namespaced); deleted at cleanup."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("labels", {})[RUN_LABEL] = self.run_id
        namespaced = obj["kind"] not in ("DeviceTaintRule",)
        if namespaced:
            meta["namespace"] = self.namespace
        created = self.kube.create(obj)
        self._made.append((obj["kind"], meta["name"], self.namespace if namespaced else None))
        return created

    def request(self, count: int = 1, constraint: str | None = None, all_devices: bool = False,
                parameters: Obj | None = None) -> Obj:
        """A claim's spec: one request of the DeviceClass; ``parameters``: opaque configuration for the driver."""
        exactly: Obj = {"deviceClassName": self.config.device_class}
        if all_devices:
            exactly["allocationMode"] = "All"
        else:
            exactly["count"] = count
        spec: Obj = {"devices": {"requests": [{"name": "req", "exactly": exactly}]}}
        if constraint:
            spec["devices"]["constraints"] = [{"requests": ["req"], "matchAttribute": constraint}]
        if parameters is not None:
            spec["devices"]["config"] = [{"requests": ["req"], "opaque": {"driver": self.config.driver,
                                                                          "parameters": parameters}}]
        return spec

    def template(self, count: int = 1, constraint: str | None = None, all_devices: bool = False) -> str:
        name = self.name("tpl")
        self.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                     "spec": {"spec": self.request(count, constraint, all_devices)}})
        return name

    def claim(self, count: int = 1, constraint: str | None = None, parameters: Obj | None = None) -> Obj:
        return self.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                            "metadata": {"name": self.name("claim")},
                            "spec": self.request(count, constraint, parameters=parameters)})

    def pod(self, *, claim: str | None = None, template: str | None = None, containers: int = 1,
            node: str | None = None, claims: Sequence[str] = ()) -> str:
        """A pause pod using one claim (``claim`` by name or from ``template``), or each of ``claims`` (by
        name), in every container."""
        name = self.name("pod")
        refs: list[Obj] = [{"name": f"dev{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
        if not refs:
            ref: Obj = {"name": "dev"}
            if claim:
                ref["resourceClaimName"] = claim
            else:
                ref["resourceClaimTemplateName"] = template
            refs = [ref]
        spec: Obj = {
            "containers": [{"name": f"c{i}", "image": PAUSE_IMAGE,
                            "resources": {"claims": [{"name": r["name"]} for r in refs]}} for i in range(containers)],
            "resourceClaims": refs,
            "terminationGracePeriodSeconds": 1,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                       "values": [node] if node else list(self.nodes)}]}]}}},
        }
        self.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
        return name

    def get(self, kind: str, name: str) -> Obj | None:
        return self.kube.get(kind, name, None if kind == "DeviceTaintRule" else self.namespace)

    def wait(self, condition: Callable[[], Any], what: str, timeout: float | None = None,
             evidence: Callable[[], str] | None = None) -> Any:
        """Poll ``condition`` until truthy (returned); fail the check saying ``what`` did not happen."""
        timeout = self.config.wait_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                detail = f": {evidence()}" if evidence else ""
                raise CheckFailed(f"{what} did not happen within {timeout:.0f}s{detail}")
            time.sleep(0.3)

    def pod_state(self, name: str) -> str:
        pod = self.get("Pod", name)
        if pod is None:
            return f"pod {name} is gone"
        status = pod.get("status", {})
        conds = "; ".join(f"{c.get('type')}={c.get('status')} {c.get('reason') or ''} {c.get('message') or ''}".strip()
                          for c in status.get("conditions") or [])
        events = [f"{e.get('reason')}: {e.get('message')}" for e in self.kube.items("Event", self.namespace)
                  if e.get("involvedObject", {}).get("name") == name][-3:]
        return (f"pod {name} phase {status.get('phase')} on node {pod.get('spec', {}).get('nodeName')}; "
                f"conditions: {conds or 'none'}; events: {' | '.join(events) or 'none'}")

    def wait_running(self, name: str) -> Obj:
        """Wait until pod ``name`` runs; fail with its conditions and events otherwise."""
        def running() -> Obj | None:
            pod = self.get("Pod", name)
            return pod if pod and pod.get("status", {}).get("phase") == "Running" else None

        pod: Obj = self.wait(running, f"pod {name} running", evidence=lambda: self.pod_state(name))
        return pod

    def claims_of(self, pod: Obj) -> list[Obj]:
        """The ResourceClaims a pod uses (generated ones from its status)."""
        names = [s.get("resourceClaimName") for s in pod.get("status", {}).get("resourceClaimStatuses") or []]
        names += [c.get("resourceClaimName") for c in pod.get("spec", {}).get("resourceClaims") or []]
        out = []
        for n in dict.fromkeys(n for n in names if n):
            obj = self.get("ResourceClaim", n)
            if obj is not None:
                out.append(obj)
        return out

    def remember(self, kind: str, *objs: Obj) -> None:
        """Keep ``objs`` as they are now for the evidence (they may be deleted before the check ends)."""
        for obj in objs:
            self._seen.setdefault(kind, {})[obj.get("metadata", {}).get("uid", "")] = obj
            if kind == "ResourceClaim" and self.window is not None:
                self.window.claims[obj.get("metadata", {}).get("uid", "")] = obj

    @staticmethod
    def allocated(claim: Obj) -> list[tuple[str, str, str]]:
        """(driver, pool, device) of each device allocated to ``claim``."""
        results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
        return [(r.get("driver", ""), r.get("pool", ""), r.get("device", "")) for r in results]

    @staticmethod
    def ref(obj: Obj) -> str:
        m = obj.get("metadata", {})
        return f"{obj.get('kind', 'object')} {m.get('namespace', '')}/{m.get('name')} uid={m.get('uid')}"

    def delete_pod(self, name: str, force: bool = False) -> None:
        self.kube.delete("Pod", name, self.namespace, grace_seconds=0 if force else None)

    def wait_gone(self, kind: str, name: str, timeout: float | None = None) -> None:
        self.wait(lambda: self.get(kind, name) is None, f"{kind} {name} to be gone", timeout)

    def wait_deallocated(self, name: str) -> None:
        """Wait until claim ``name`` is neither reserved nor allocated (or gone)."""
        def free() -> bool:
            claim = self.get("ResourceClaim", name)
            return claim is None or not (claim.get("status") or {}).get("allocation")

        self.wait(free, f"claim {name} to be deallocated",
                  evidence=lambda: f"status {(self.get('ResourceClaim', name) or {}).get('status')}")

    # -- the node-side truth ----------------------------------------------------------------------
    def node_access(self, what: str) -> Any:
        """The node access with the driver's node-side record, or skip saying which part of the check needs it."""
        if not self.has_truth():
            raise Skip(f"{what} is only observable on the node; give node access (--fake-driver-root for "
                       "draguard's fake driver) to check it")
        return self.access

    def has_truth(self) -> bool:
        return self.access is not None and callable(getattr(self.access, "prepared", None))

    def hook(self, name: str) -> Callable[..., None]:
        fn = getattr(self.access, name, None) if self.access is not None else None
        if fn is None:
            raise Skip(f"needs the {name!r} hook (the suite cannot do this to an arbitrary driver); "
                       f"{'no node access was given' if self.access is None else 'the node access lacks it'}")

        def call(*args: Any) -> None:
            try:
                fn(*args)
            except NotImplementedError as exc:
                raise Skip(f"the {name!r} hook is not available for this driver: {exc}") from exc

        return call

    def expect_prepared(self, node: str, uid: str, what: str) -> None:
        """The driver on ``node`` holds claim ``uid`` prepared (its own record, with node access), and the
        CDI device IDs it answered for it resolve in the node's CDI folder (with the call record and the folder)."""
        self._prepared_on[uid] = node
        if self.calls is not None and self.window is not None:
            self.calls.judge(self.window)  # while the claim is prepared: prepared-devices-allocated sees it
            folder = self.cdi_dir(node)
            ids = self.calls.answered_ids(self.window, node, uid) if folder is not None else None
            if folder is not None and ids:
                problems = cdi_specs.check_ids(folder, ids)
                if problems:
                    message = (f"{what}: the driver on {node} answered claim {uid} with CDI device(s) {', '.join(ids)}, "
                               f"which do not resolve in the node's CDI folder {folder}: {'; '.join(problems)}")
                    raise CheckFailed(message, [Evidence(message, (uid,))])
        if not self.has_truth():
            return
        prepared = self.access.prepared(node)
        if uid not in prepared:
            raise CheckFailed(f"{what}: the driver on {node} has not prepared claim {uid} (prepared: {sorted(prepared)})",
                              [Evidence(f"{what}: claim {uid} not prepared on {node}", (uid,))])

    # -- the node's CDI folder ------------------------------------------------------------------------
    def cdi_dir(self, node: str) -> Path | None:
        """The node's CDI spec folder as this machine sees it (None: not given)."""
        if not self.config.cdi_dir:
            return None
        return Path(self.config.cdi_dir.replace(NODE_PLACEHOLDER, node))

    def cdi_left(self, node: str, uids: Sequence[str]) -> dict[str, list[str]]:
        """uid -> the CDI spec files in ``node``'s folder that name it (file name or content), for each of
        ``uids`` that has any; empty without a folder."""
        folder = self.cdi_dir(node)
        if folder is None:
            return {}
        out: dict[str, list[str]] = {}
        for path in sorted(folder.glob("*")) if folder.is_dir() else ():
            if path.suffix not in (".json", ".yaml", ".yml") or not path.is_file():
                continue
            try:
                text = path.read_text()
            except OSError:
                continue
            for uid in uids:
                if uid in path.name or uid in text:
                    out.setdefault(uid, []).append(path.name)
        return out

    def wait_cdi_gone(self, node: str, uids: Sequence[str], what: str, timeout: float | None = None) -> None:
        """Wait until no CDI spec in ``node``'s folder names any of ``uids`` (claims the check left to
        another are not waited for); fail naming the files left."""
        uids = [u for u in uids if u not in self._cdi_exempt]
        if self.cdi_dir(node) is None or not uids:
            return
        left: dict[str, list[str]] = {}

        def gone() -> bool:
            left.clear()
            left.update(self.cdi_left(node, uids))
            return not left

        deadline = time.monotonic() + (self.config.settle if timeout is None else timeout)
        while not gone() and time.monotonic() < deadline:
            time.sleep(0.3)
        if left:
            evidence = [Evidence(f"{what}: CDI spec(s) {', '.join(names)} of claim {uid} left in {self.cdi_dir(node)} "
                                 f"on {node} after it was unprepared", (uid,)) for uid, names in left.items()]
            raise CheckFailed(f"{what}: the driver on {node} left the CDI spec(s) of claim(s) it unprepared: "
                              + "; ".join(f"{uid}: {', '.join(names)}" for uid, names in left.items()), evidence)

    def exempt_cdi(self, uid: str, why: str) -> None:
        """Leave claim ``uid``'s CDI specs out of this check's sweep, saying which check judges them instead."""
        self._cdi_exempt[uid] = why

    def expect_released(self, node: str, uids: Sequence[str], what: str) -> None:
        """Wait until the driver on ``node`` holds none of ``uids`` and its record has no leak (with node
        access), and no CDI spec of its folder names them (where it is given)."""
        self.wait_cdi_gone(node, uids, what)
        if not self.has_truth():
            return

        def released() -> bool:
            prepared = self.access.prepared(node)
            held = self.access.held(node)
            return not (set(uids) & prepared) and not (set(uids) & set(held.values()))

        def state() -> str:
            return (f"prepared {sorted(self.access.prepared(node))}, held {self.access.held(node)}, "
                    f"leaks {self.access.leaks(node)}")

        self.wait(released, f"{what}: the driver on {node} releasing claim(s) {', '.join(uids)}", evidence=state)
        leaks = self.access.leaks(node)
        if leaks:
            raise CheckFailed(f"{what}: the driver on {node} lost devices: {'; '.join(leaks)}",
                              [Evidence(leak) for leak in leaks])

    # -- cleanup ------------------------------------------------------------------------------------
    def cleanup(self) -> list[str]:
        """Delete what the check created (pods first, at once); problems are returned, never raised."""
        made, self._made = self._made, []
        problems: list[str] = []
        seen, self._seen = self._seen, {}
        if self.evidence is not None:
            try:
                ours = {name for _, name, _ in made}
                for kind in ("ResourceClaim", "Pod", "Event"):
                    for obj in self.kube.items(kind, self.namespace):
                        # Only what this run made (the namespace may be shared: --namespace).
                        mine = ((obj["metadata"].get("labels") or {}).get(RUN_LABEL) == self.run_id if kind != "Event"
                                else (obj.get("involvedObject") or {}).get("name") in ours | _names_seen(seen))
                        if mine:
                            seen.setdefault(kind, {})[obj["metadata"]["uid"]] = obj
            except (ApiError, HarnessError) as exc:
                problems.append(f"collecting evidence: {exc}")
            self.evidence[self.current] = {kind: list(objs.values()) for kind, objs in seen.items()}
        if self.access is not None and callable(getattr(self.access, "clear", None)):
            for node in self.nodes:
                try:
                    self.access.clear(node)
                except Exception as exc:  # a hook of the driver: report, go on
                    problems.append(f"clearing faults on {node}: {exc}")
        order = {"Pod": 0, "DeviceTaintRule": 1, "ResourceClaim": 2, "ResourceClaimTemplate": 3}
        for kind, name, ns in sorted(made, key=lambda m: order.get(m[0], 9)):
            try:
                self.kube.delete(kind, name, ns, grace_seconds=0 if kind == "Pod" else None)
            except (ApiError, HarnessError) as exc:
                problems.append(f"delete {kind} {name}: {exc}")
        deadline = time.monotonic() + self.config.wait_timeout
        pods = [name for kind, name, _ in made if kind == "Pod"]
        while pods and time.monotonic() < deadline:
            pods = [p for p in pods if self.kube.get("Pod", p, self.namespace) is not None]
            time.sleep(0.3)
        problems += [f"pod {p} still there after {self.config.wait_timeout:.0f}s" for p in pods]
        return problems


def _names_seen(seen: Mapping[str, Mapping[str, Obj]]) -> set[str]:
    """Names of the pods and claims kept for the evidence so far (events name their object)."""
    return {o["metadata"]["name"] for kind in ("Pod", "ResourceClaim") for o in (seen.get(kind) or {}).values()}


def run_check(ctx: ClusterContext, entry: Entry[Any]) -> CheckResult:
    """Run one cluster check with its timeout; whatever happens, a :class:`CheckResult` comes back.

    After its cleanup the check's calls are judged (:mod:`.calls`) once the driver went quiet, and the
    CDI folder is swept for its claims: a spec left fails the check that left it."""
    nothing = ctx.capabilities.get("nothingAllocatable")
    if nothing and entry.meta.get("allocates", True):
        return CheckResult(entry.name, entry.summary, str(entry.meta.get("source", "")), "skipped",
                           f"nothing can be allocated: {nothing}")
    if entry.meta.get("driver_calls") and ctx.calls is None:
        return CheckResult(entry.name, entry.summary, str(entry.meta.get("source", "")), "not-applicable",
                           f"the driver's calls are not judged: {ctx.config.no_calls}")
    ctx.notes, ctx._prepared_on, ctx._cdi_exempt = [], {}, {}
    ctx.window = ctx.calls.open(entry.name) if ctx.calls is not None and entry.meta.get("allocates", True) else None
    result = run_entry(ctx, entry, ctx.config.check_timeout, ctx.cleanup)
    if result.status == "error" and "did not end within" in result.reason:
        ctx.window = None
        return result  # its thread still runs: nothing it did is settled
    _after(ctx, result)
    ctx.window = None
    return result


def _after(ctx: ClusterContext, result: CheckResult) -> None:
    """Settle the check's calls, judge them, and sweep the CDI folder for its claims; a spec left fails
    the check (a passed one becomes failed; a failed one gets the evidence)."""
    window = ctx.window
    claims = dict(ctx._prepared_on)
    if ctx.calls is not None and window is not None:
        ctx.calls.settle(window, ctx.config.settle)
        ctx.calls.judge(window)
        for node, uid in ctx.calls.claims_called(window):
            claims.setdefault(uid, node)
    by_node: dict[str, list[str]] = {}
    for uid, node in claims.items():
        by_node.setdefault(node, []).append(uid)
    for node, uids in sorted(by_node.items()):
        try:
            ctx.wait_cdi_gone(node, uids, "after the check's cleanup", timeout=ctx.config.settle)
        except CheckFailed as exc:
            if result.status == "passed":
                result.status, result.reason = "failed", str(exc)
            result.evidence += exc.evidence
    for uid, why in ctx._cdi_exempt.items():
        ctx.notes.append(f"the CDI specs of claim {uid} are not judged here: {why}")
    if result.status == "passed" and ctx.notes:
        result.reason = "; ".join(ctx.notes)


def nothing_allocatable(kube: Kube, config: ClusterConfig, nodes: Sequence[str]) -> str:
    """Why no claim of the suite can be allocated ("" when one can): the pre-flight of every check
    that creates claims (no DeviceClass, no device it selects, none on the chosen nodes)."""
    found = allocatable(kube, config.device_class)
    if found.problem:
        return found.problem
    if not nodes:
        return (f"{config.driver} publishes no device in a node-local ResourceSlice"
                + (f" on nodes matching {config.nodes}" if config.nodes else ""))
    return ""


def _nodes(kube: Kube, config: ClusterConfig, slices: list[Obj]) -> list[str]:
    with_devices = {s["spec"]["nodeName"] for s in slices if s.get("spec", {}).get("nodeName") and s["spec"].get("devices")}
    if config.nodes:
        matching = {n["metadata"]["name"] for n in kube.items("Node", label_selector=config.nodes)}
        return sorted(with_devices & matching)
    return sorted(with_devices)


@contextlib.contextmanager
def open_context(config: ClusterConfig, access: Any = None) -> Iterator[ClusterContext]:
    """Detect capabilities, find the nodes, make the run's namespace; delete it at the end.

    Raises :class:`~draguard.harness.core.errors.HarnessError` (exit 2) when the cluster cannot be used
    at all: unreachable, or no ResourceClaim API.
    """
    kube = Kube.from_kubeconfig(config.kubeconfig, config.context)
    caps = detect(kube, config)
    if caps.get("error"):
        raise HarnessError(f"{config.kubeconfig}: {caps['error']}")
    slices: list[Obj] = []
    try:
        slices, _ = kube.list("ResourceSlice", field_selector=f"spec.driver={config.driver}")
    except (ApiError, HarnessError) as exc:
        caps["slicesError"] = str(exc)
    nodes = _nodes(kube, config, slices)
    caps["nodes"] = nodes
    caps["publishedDevices"] = {n: sum(len(s["spec"].get("devices") or []) for s in slices
                                       if s["spec"].get("nodeName") == n) for n in nodes}
    caps["attributes"] = sorted({a for s in slices for d in s["spec"].get("devices") or [] for a in d.get("attributes") or {}})
    try:
        caps["deviceClass"] = kube.get("DeviceClass", config.device_class) is not None
    except (ApiError, HarnessError):
        caps["deviceClass"] = None
    try:
        caps["nothingAllocatable"] = nothing_allocatable(kube, config, nodes) or None
    except UsageError as exc:
        caps["nothingAllocatable"] = str(exc)
    run_id = uuid.uuid4().hex[:8]
    own = not config.namespace
    namespace = config.namespace or f"draguard-conformance-{run_id}"
    if own:
        kube.create_namespace(namespace, {RUN_LABEL: run_id}, wait=False)
    elif kube.get("Namespace", namespace) is None:
        raise UsageError(f"--namespace {namespace}: no such namespace in the cluster")
    ctx = ClusterContext(config, kube, namespace, run_id, nodes, slices, caps, access)
    try:
        if own:
            kube.wait_namespace_ready(namespace)
        yield ctx
    finally:
        if own:
            try:
                kube.delete("Namespace", namespace)
            except (ApiError, HarnessError) as exc:
                log.warning("cannot delete namespace %s: %s", namespace, exc)


def run_conformance(config: ClusterConfig, access: Any = None,
                    on_result: Callable[[CheckResult], None] | None = None,
                    evidence: dict[str, Any] | None = None, calls: CallRecord | None = None) -> RunResult:
    """Run the chosen profiles' checks against the driver in the cluster; capabilities go into the result.

    With ``evidence`` (a dict), each check's claims, pods and events are kept there under its id,
    and the driver's ResourceSlices under ``"slices"``. ``calls``: the gRPC interposer's record, where
    it sits in front of the driver (else ``config.calls``, a file it writes): the driver's calls are
    judged check by check.
    """
    entries = cluster_checks(config.profiles, config.select)
    if calls is None and config.calls is not None:
        calls = RecordFile(config.calls)
    with open_context(config, access) as ctx:
        ctx.calls = CallJudge(calls) if calls is not None else None
        ctx.evidence = evidence
        if evidence is not None:
            evidence["slices"] = ctx.slices
        result = RunResult(run_id=f"conformance-{ctx.run_id}")
        result.environment = {"driver": config.driver, "deviceClass": config.device_class,
                              "profiles": list(config.profiles), "nodeSelector": config.nodes,
                              "nodeAccess": type(access).__name__ if access is not None else None,
                              "capabilities": ctx.capabilities,
                              "nodeSide": "checked from the driver's own record" if ctx.has_truth() else
                              "not checked: no node access; checks that are only node-side skip, the others "
                              "check what the API shows",
                              "driverCalls": "judged check by check from the gRPC interposer's record"
                              if ctx.calls is not None else f"not judged: {config.no_calls}",
                              "cdiFolder": config.cdi_dir or "not read: the CDI parts of the checks are not judged"}
        for entry in entries:
            ctx.current = entry.name
            check = run_check(ctx, entry)
            result.checks.append(check)
            if on_result is not None:
                on_result(check)
    return result


def checks_table() -> str:
    """The Markdown table of the cluster checks (id, rule, source, aimed at, needs) for docs/conformance.md."""
    rows = ["| check | rule | source | mutants aimed at | needs beyond the API |", "|---|---|---|---|---|"]
    for e in cluster_checks():
        aimed = ", ".join(f"`{m}`" for m in e.meta.get("aimed_at") or ()) or "–"
        needs = ", ".join(e.meta.get("needs") or ()) or "–"
        rows.append(f"| `{e.name}` | {e.summary} | {e.meta.get('source')} | {aimed} | {needs} |")
    return "\n".join(rows) + "\n"
