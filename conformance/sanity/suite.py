"""The sanity suite's engine: configuration, the check decorator, the context checks use, and the runner.

A check is a function ``check(ctx: SanityContext) -> None`` registered with :func:`sanity_check`
into :data:`draguard.harness.core.registry.CHECKS` under a stable dotted id (``sanity.<area>.<name>``),
with its one-line rule, where the rule comes from, and the fake-driver mutants it is aimed at.
A check passes by returning, fails by raising :class:`CheckFailed` (through :func:`expect`, so every
failure has the same shape: what was expected, what the driver did, the objects and devices
involved), and skips by raising :class:`Skip` with the reason (a capability the driver lacks, a
hook the suite was not given). Anything else it raises is an ``error`` of that check, never a crash.
A check whose hooks (``needs``) cannot be done is skipped before it starts, with the reason; a check
for a capability the driver's ``--capabilities`` file does not declare is ``not-applicable``.

:class:`SanityContext` is what checks get: the plugin client (as the kubelet calls the driver),
the Kube client, a fresh namespace, the node's published devices, and :meth:`SanityContext.claim`,
which creates a real ResourceClaim in the API server and writes its allocation the way the
scheduler does. Every claim a check creates is unprepared and deleted when the check ends
(csi-sanity's ``Resources``), whatever the outcome.

:func:`run_sanity` runs the selected checks one after the other, each in a worker thread bounded by
``check_timeout``; every gRPC call has its own deadline, and a call that ran out of it is named as
the cause in the check's result. After each check the suite asks the driver whether it still
answers: a driver left down fails that check alone, and the suite restarts it (``restart`` hook)
or stops, naming the cause in ``environment["stopped"]`` (the checks not run are listed there,
never reported as failures of their own). It returns a :class:`RunResult` whose ``checks`` hold
one :class:`CheckResult` per check run. Talks to the driver's sockets (through
:class:`~draguard.harness.grpcapi.plugin.PluginClient`) and the API server.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from draguard.harness.core.errors import DefinitionError, HarnessError, UsageError
from draguard.harness.core.registry import CHECKS, Entry
from draguard.harness.devices.truth import HardwareFaultKind
from draguard.harness.grpcapi.plugin import (
    ClaimRef,
    ClaimResult,
    PluginCallError,
    PluginClient,
    PluginInfo,
    choose_version,
)
from draguard.harness.kube import RUN_LABEL, ApiError, Kube, Obj
from draguard.harness.proxy import CallRecorder, FaultSet, PluginProxy
from draguard.harness.result import CheckResult, Evidence, RunResult

from ..checks import CheckFailed, Skip, expect, run_entry
from .capabilities import CAPABILITIES, Capabilities

__all__ = [
    "SanityConfig",
    "DriverHooks",
    "SanityContext",
    "Skip",
    "CheckFailed",
    "sanity_check",
    "expect",
    "sanity_checks",
    "run_check",
    "run_sanity",
    "open_context",
    "require_sockets",
    "require_node",
]

log = logging.getLogger("draguard.sanity")

PREFIX = "sanity."
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
"""The namespace label without which the API server refuses claims asking for admin access (KEP-5018,
kubernetes/enhancements keps/sig-auth/5018-dra-adminaccess); the suite's own namespace carries it."""
SANITY_CLASS = "draguard-sanity"
"""DeviceClass name written into the claims' requests (the scheduler is bypassed, so it need not exist)."""
OTHER_DRIVER = "other.sanity.draguard.dev"
OTHER_NODE = "draguard-sanity-elsewhere"


@dataclass(frozen=True)
class SanityConfig:
    """What the suite is pointed at, and its bounds."""

    registration_socket: Path
    kubeconfig: Path
    driver: str
    plugin_socket: Path | None = None
    """The DRA socket; by default the endpoint the registration names."""
    node: str | None = None
    """The node the driver serves; by default the one node its ResourceSlices name."""
    cdi_dir: Path | None = None
    """Where the driver writes CDI specs; the CDI checks skip without it."""
    context: str | None = None
    call_timeout: float = 10.0
    check_timeout: float = 90.0
    blocking_bound: float = 2.0
    """The longest a call may wait while another call of the driver is slow (concurrency check)."""
    idempotent_count: int = 10
    """How many times each prepare and unprepare check makes each of its calls, comparing the answers
    (csi-sanity's ``IdempotentCount``)."""
    capabilities: Capabilities | None = None
    """What the driver declares it supports (``--capabilities``); None: everything, runtime skips only."""
    namespace: str | None = None
    """An existing namespace to create the claims in (kept at the end); by default one of the suite's own."""
    select: tuple[str, ...] = ()
    """Check id globs to run (all when empty)."""
    trace: Path | None = None
    """Route the suite's calls through the interposer and record each one to this JSON-lines file."""


class DriverHooks(Protocol):
    """What the suite may do to the driver beyond its sockets; every method is optional.

    A hook that is missing (or raises :class:`NotImplementedError`) makes the checks that need it
    skip with the reason. The fake driver provides all of them (:class:`~.hooks.FakeDriverHooks`);
    ``--restart-command`` provides ``restart`` for any driver (:class:`~.hooks.CommandHooks`).
    """

    def restart(self) -> None:
        """Restart the driver process; return once it was asked to start again."""

    def slow_prepare(self, claim: ClaimRef, seconds: float) -> None:
        """Make the driver's next prepare of ``claim`` take ``seconds`` longer, inside the driver."""

    def slow_release(self, device: str, seconds: float) -> None:
        """Make the next release (reset) of ``device`` take ``seconds`` longer, inside the driver."""

    def fail_release(self, device: str) -> None:
        """Make the next release (reset) of ``device`` fail once."""

    def crash_in_prepare(self) -> None:
        """Make the driver die in its next prepare, after it recorded that it started."""

    def make_unhealthy(self, device: str, message: str) -> None:
        """Make ``device`` unhealthy in the hardware (what the health stream must then report)."""

    def raise_hardware_fault(self, device: str, kind: HardwareFaultKind, xid: int | None = None) -> None:
        """Make the hardware itself raise ``kind`` (``fallen-off-bus``, ``ecc``, ``xid`` with ``xid``) on ``device``."""

    def repair_hardware(self, device: str) -> None:
        """Repair ``device`` in the hardware: healthy, no Xid, no ECC error."""

    def restart_with_corrupt_checkpoint(self) -> None:
        """Stop the driver, damage the file it keeps its prepared claims in, start it again."""

    def device_sharing(self, device: str) -> str | None:
        """The sharing set up on ``device`` in the hardware (``TimeSlicing``, ``MPS``), or None."""

    def device_reset_state(self, device: str) -> str | None:
        """The hardware's reset state of ``device`` (``clean`` once reset since its last use)."""

    def clear(self) -> None:
        """Undo every fault set through these hooks."""


CheckFn = Callable[["SanityContext"], None]


def sanity_check(
    check_id: str,
    *,
    rule: str,
    source: str,
    aimed_at: Sequence[str] = (),
    needs: Sequence[str] = (),
    needs_all: bool = True,
    capability: str | None = None,
) -> Callable[[CheckFn], CheckFn]:
    """Register a sanity check: stable id ``sanity.<area>.<name>``, one-line rule, its source.

    ``aimed_at`` names the fake-driver mutants whose bug this check exists to catch (the mutant ×
    check table asserts that each of them fails it); ``needs`` names the :class:`DriverHooks`
    methods it uses (listed in the docs): the check is skipped before it starts when one of them
    cannot be done (with ``needs_all=False``: when none of them can). ``capability`` names what the
    driver must declare for the check to apply (:data:`~.capabilities.CAPABILITIES`).
    """
    if not check_id.startswith(PREFIX):
        raise DefinitionError(f"sanity check id {check_id!r} must start with {PREFIX!r}")
    if not source.strip():
        raise DefinitionError(f"sanity check {check_id!r}: say where its rule comes from (source=...)")

    if capability is not None and capability not in CAPABILITIES:
        raise DefinitionError(f"sanity check {check_id!r}: unknown capability {capability!r}; "
                              f"known: {', '.join(CAPABILITIES)}")
    area = check_id.split(".")[1]
    return CHECKS.register(check_id, summary=rule, source=source, aimed_at=tuple(aimed_at), needs=tuple(needs),
                           needs_all=needs_all, capability=capability, area=area)


def sanity_checks(select: Sequence[str] = ()) -> list[Entry[Any]]:
    """The registered sanity checks, in area order, filtered by id globs."""
    from . import AREAS  # here, a cycle: the package imports this module, then its area modules

    order = {area: i for i, area in enumerate(AREAS)}
    entries = [e for e in CHECKS.entries() if e.name.startswith(PREFIX)]
    if select:
        entries = [e for e in entries if any(fnmatch.fnmatchcase(e.name, pat) for pat in select)]
    return sorted(entries, key=lambda e: (order.get(str(e.meta.get("area")), 99), e.name))


# -- the context --------------------------------------------------------------------------------


@dataclass
class _Made:
    ref: ClaimRef
    prepared: bool = False


DEADLINE = "DEADLINE_EXCEEDED"


@dataclass
class _NoticingClient(PluginClient):
    """A plugin client that tells the suite about every call that ran out of its deadline."""

    on_timeout: Callable[[PluginCallError, float], None] | None = None

    def _noticed(self, exc: PluginCallError, timeout: float | None, default: float) -> PluginCallError:
        if exc.code == DEADLINE and self.on_timeout is not None:
            self.on_timeout(exc, timeout or default)
        return exc

    def get_info(self, timeout: float | None = None) -> PluginInfo:
        try:
            return super().get_info(timeout)
        except PluginCallError as exc:
            raise self._noticed(exc, timeout, self.timeout) from exc.__cause__

    def prepare(self, claims: Sequence[ClaimRef], timeout: float | None = None) -> dict[str, ClaimResult]:
        try:
            return super().prepare(claims, timeout)
        except PluginCallError as exc:
            raise self._noticed(exc, timeout, self.timeout) from exc.__cause__

    def unprepare(self, claims: Sequence[ClaimRef], timeout: float | None = None) -> dict[str, str]:
        try:
            return super().unprepare(claims, timeout)
        except PluginCallError as exc:
            raise self._noticed(exc, timeout, self.timeout) from exc.__cause__


@dataclass
class SanityContext:
    """Everything a check may use; one per suite run."""

    config: SanityConfig
    kube: Kube | None
    namespace: str | None
    info: PluginInfo | None
    info_error: str
    node: str | None
    slices: list[Obj]
    hooks: Any = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    setup_error: str = ""
    trace_error: str = ""
    proxy_sockets: tuple[Path, Path] | None = None
    """(registration, DRA) sockets of the interposer the calls go through, when tracing."""
    own_namespace: bool = True
    """The suite made ``namespace`` (and deletes it at the end); False for ``SanityConfig.namespace``."""
    current: Entry[Any] | None = None
    """The check now running."""
    answered_at_start: bool = False
    """The driver answered GetInfo and an empty prepare before the first check (then each check is
    followed by the same question, and a driver left down is that check's failure)."""
    stopped: str = ""
    """Why the suite stopped before its last check ("" while it goes on)."""
    _timeouts: list[str] = field(default_factory=list)
    _made: list[_Made] = field(default_factory=list)
    _clients: dict[str, PluginClient] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _seq: int = 0
    _cursor: int = 0
    _hook_thread: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="sanity-hooks")
    )

    # -- the plugin ------------------------------------------------------------------------------
    @property
    def dra_socket(self) -> Path | None:
        if self.config.plugin_socket is not None:
            return self.config.plugin_socket
        if self.info is not None and self.info.endpoint:
            endpoint = Path(self.info.endpoint)
            return endpoint if endpoint.is_absolute() else self.config.registration_socket.parent / endpoint
        return None

    @property
    def version(self) -> str:
        """The DRAPlugin version the kubelet would choose (v1 when registration said nothing usable)."""
        chosen = choose_version(self.info.supported_versions) if self.info else None
        return chosen or "v1.DRAPlugin"

    def client(self, version: str | None = None) -> PluginClient:
        """A client of the driver's sockets in ``version`` (default: the kubelet's choice)."""
        version = version or self.version
        with self._lock:
            c = self._clients.get(version)
            if c is None:
                reg, dra = self.proxy_sockets or (self.config.registration_socket, self.dra_socket)
                c = _NoticingClient(dra, reg, version, self.config.call_timeout, self.config.driver,
                                    on_timeout=self._timed_out)
                self._clients[version] = c
            return c

    def _timed_out(self, exc: PluginCallError, timeout: float) -> None:
        with self._lock:
            self._timeouts.append(f"{exc.method} did not answer within {timeout:g}s")

    def take_timeouts(self) -> list[str]:
        """The calls that ran out of their deadline since the last time this was asked."""
        with self._lock:
            out, self._timeouts = self._timeouts, []
        return out

    def repeats(self) -> int:
        """How many times the running check makes each prepare or unprepare call it expects to succeed:
        ``idempotent_count`` in the prepare and unprepare areas, once elsewhere."""
        area = self.current.meta.get("area") if self.current is not None else None
        return max(1, self.config.idempotent_count) if area in ("prepare", "unprepare") else 1

    def prepare(self, *claims: ClaimRef, timeout: float | None = None) -> dict[str, ClaimResult]:
        """One NodePrepareResources call with ``claims``; remembers them for cleanup."""
        with self._lock:
            for m in self._made:
                if m.ref in claims:
                    m.prepared = True
        return self.client().prepare(list(claims), timeout=timeout)

    def unprepare(self, *claims: ClaimRef, timeout: float | None = None) -> dict[str, str]:
        return self.client().unprepare(list(claims), timeout=timeout)

    def prepared_ok(self, claim: ClaimRef) -> ClaimResult:
        """Prepare ``claim`` alone and require success (the setup step of many checks).

        In a prepare or unprepare check the call is made :meth:`repeats` times and every answer
        must be the first one (the same devices and CDI device IDs).
        """
        first: ClaimResult | None = None
        n = self.repeats()
        for i in range(n):
            result = self.prepare(claim).get(claim.uid)
            nth = f" #{i + 1} of {n}" if i else ""
            expect(result is not None, f"NodePrepareResources{nth} answered no entry for {claim}", [str(claim)])
            assert result is not None
            expect(not result.error, f"prepare{nth} of {claim} failed: {result.error}", [str(claim)])
            if first is None:
                first = result
            else:
                expect(_answer(result) == _answer(first), f"prepare{nth} of {claim} answered {_answer(result)}, "
                       f"the first answered {_answer(first)}", [str(claim)])
        assert first is not None
        return first

    def unprepared_ok(self, claim: ClaimRef) -> None:
        """Unprepare ``claim`` and require success; :meth:`repeats` times in a prepare or unprepare check."""
        n = self.repeats()
        for i in range(n):
            answer = self.unprepare(claim)
            nth = f" #{i + 1} of {n}" if i else ""
            expect(answer.get(claim.uid) == "", f"unprepare{nth} of {claim} answered {answer!r}", [str(claim)])

    # -- the node's devices --------------------------------------------------------------------
    def node_devices(self) -> list[tuple[str, str]]:
        """(pool, device) of every device the driver publishes for the node, in slice order."""
        out: list[tuple[str, str]] = []
        for sl in self.slices:
            spec = sl.get("spec", {})
            pool = spec.get("pool", {}).get("name", "")
            out += [(pool, d.get("name", "")) for d in spec.get("devices") or []]
        return out

    def devices(self, n: int) -> list[tuple[str, str]]:
        """``n`` published devices, the ones no earlier check used if there are enough; skips with fewer.

        Each check gets fresh devices while the node has them, so a device one check leaves held
        (a leak it detected) does not fail the checks after it for the same reason.
        """
        if self.kube is None or self.namespace is None:
            raise HarnessError(f"cannot create ResourceClaims: {self.setup_error}")
        have = self.node_devices()
        if len(have) < n:
            raise Skip(f"needs {n} devices of {self.config.driver} on node {self.node}; its ResourceSlices publish {len(have)}")
        with self._lock:
            if self._cursor + n > len(have):
                self._cursor = 0
            start, self._cursor = self._cursor, self._cursor + n
        return have[start:start + n]

    # -- claims ----------------------------------------------------------------------------------
    def claim(
        self,
        devices: Sequence[tuple[str, str]],
        *,
        name: str | None = None,
        driver: str | None = None,
        node: str | None = None,
        config: Sequence[Mapping[str, Any]] = (),
        admin_access: bool = False,
    ) -> ClaimRef:
        """A ResourceClaim allocated ``devices`` (pool, device) of ``driver`` on ``node``, as the scheduler writes it.

        ``admin_access``: the request asks for admin access and its results carry ``adminAccess``, as the
        scheduler allocates a device already in use to such a request; skips when the namespace lacks
        :data:`ADMIN_ACCESS_LABEL` (the API server would refuse the claim)."""
        if self.kube is None or self.namespace is None:
            raise HarnessError(f"cannot create ResourceClaims: {self.setup_error}")
        if admin_access:
            labels = ((self.kube.get("Namespace", self.namespace) or {}).get("metadata") or {}).get("labels") or {}
            if labels.get(ADMIN_ACCESS_LABEL) != "true":
                raise Skip(f"namespace {self.namespace} lacks the label {ADMIN_ACCESS_LABEL}=true, without which "
                           "the API server refuses a claim asking for admin access")
        with self._lock:
            self._seq += 1
            seq = self._seq
        name = name or f"sanity-{self.run_id}-{seq}"  # the run's own: never a name someone else made
        driver = driver or self.config.driver
        node = node or self.node or ""
        obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": self.namespace, "labels": {RUN_LABEL: self.run_id}},
            "spec": {"devices": {"requests": [
                {"name": "req", "exactly": {"deviceClassName": SANITY_CLASS, "count": max(1, len(devices)),
                                            **({"adminAccess": True} if admin_access else {})}}
            ]}},
        }
        try:
            created = self.kube.create(obj)
            created["status"] = {
                "allocation": {
                    "devices": {"results": [
                        {"request": "req", "driver": driver, "pool": pool, "device": dev,
                         **({"adminAccess": True} if admin_access else {})} for pool, dev in devices
                    ], "config": [{"source": "FromClaim", "opaque": dict(c)} for c in config]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}
                    ]}]},
                }
            }
            self.kube.replace(created, subresource="status")
        except (ApiError, HarnessError) as exc:
            raise HarnessError(f"cannot create an allocated ResourceClaim {self.namespace}/{name}: {exc}") from exc
        ref = ClaimRef(namespace=self.namespace, name=name, uid=created["metadata"]["uid"])
        with self._lock:
            self._made.append(_Made(ref))
        return ref

    def delete_claim(self, claim: ClaimRef) -> None:
        assert self.kube is not None
        self.kube.delete("ResourceClaim", claim.name, claim.namespace)

    def unknown_claim(self) -> ClaimRef:
        """A claim reference no one created (random name and UID)."""
        return ClaimRef(namespace=self.namespace or "default", name=f"never-{uuid.uuid4().hex[:8]}", uid=str(uuid.uuid4()))

    def cleanup(self) -> list[str]:
        """Unprepare and delete what the check created; problems are returned, never raised."""
        with self._lock:
            made, self._made = self._made, []
        problems: list[str] = []
        if self.hooks is not None:
            try:
                self._hook_thread.submit(self.hooks.clear).result()
            except NotImplementedError:
                pass
            except Exception as exc:
                problems.append(f"clearing hooks: {exc}")
        refs = [m.ref for m in made if m.prepared]
        if refs:
            try:
                self.client().unprepare(refs, timeout=self.config.call_timeout)
            except PluginCallError as exc:
                problems.append(f"unprepare at cleanup: {exc}")
        for m in made:
            try:
                if self.kube is not None:
                    self.kube.delete("ResourceClaim", m.ref.name, m.ref.namespace)
            except (ApiError, HarnessError) as exc:
                problems.append(f"delete {m.ref}: {exc}")
        return problems

    def hook_unavailable(self, name: str) -> str:
        """Why the hook ``name`` cannot be done ("" when it can), asked before anything is touched."""
        fn = getattr(self.hooks, name, None) if self.hooks is not None else None
        if fn is None:
            return (f"needs the {name!r} hook (the suite cannot do this to an arbitrary driver); "
                    f"{'no hooks were given' if self.hooks is None else 'the given hooks lack it'}")
        ask = getattr(self.hooks, "unavailable", None)
        why = str(ask(name)) if callable(ask) else ""
        return f"needs the {name!r} hook: {why}" if why else ""

    def hook(self, name: str) -> Callable[..., Any]:
        """The hook ``name``, or skip the check saying which hook it needs.

        Hooks run on one thread that lives as long as the suite: a driver process a ``restart``
        hook starts may be tied to the thread that started it (``PR_SET_PDEATHSIG`` fires when
        that *thread* ends), and each check runs on a thread of its own.
        """
        why = self.hook_unavailable(name)
        if why:
            raise Skip(why)
        fn = getattr(self.hooks, name)

        def on_hook_thread(*args: Any) -> Any:
            return self._hook_thread.submit(fn, *args).result()

        return on_hook_thread

    def call_hook(self, name: str, *args: Any) -> None:
        try:
            self.hook(name)(*args)
        except NotImplementedError as exc:
            raise Skip(f"the {name!r} hook is not available for this driver: {exc}") from exc

    def cdi_dir(self) -> Path:
        if self.config.cdi_dir is None:
            raise Skip("needs the driver's CDI spec directory (--cdi-dir)")
        return self.config.cdi_dir

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the driver answers GetInfo and an empty prepare again (after a restart)."""
        last = self.answers(timeout)
        if last:
            raise CheckFailed(f"the driver did not answer again within {timeout:.0f}s of its restart: {last}")

    def answers(self, within: float = 10.0) -> str:
        """"" once the driver answers GetInfo and an empty prepare (on its own sockets, untraced),
        else what the last try got after ``within`` seconds."""
        deadline = time.monotonic() + within
        last = "no DRA socket known"
        if self.dra_socket is None:
            return last
        with PluginClient(self.dra_socket, self.config.registration_socket, self.version, 2.0,
                          self.config.driver) as probe:
            while True:
                try:
                    probe.get_info(timeout=2)
                    probe.prepare([], timeout=2)
                    return ""
                except PluginCallError as exc:
                    last = str(exc)
                if time.monotonic() >= deadline:
                    return last
                time.sleep(0.2)

    def close(self) -> None:
        self._hook_thread.shutdown(wait=False)
        for c in self._clients.values():
            c.close()
        if self.kube is not None and self.namespace is not None and self.own_namespace:
            try:
                self.kube.delete("Namespace", self.namespace)
            except (ApiError, HarnessError) as exc:
                log.warning("cannot delete namespace %s: %s", self.namespace, exc)


def require_sockets(registration_socket: Path | None, plugin_socket: Path | None) -> None:
    """Pre-flight: :class:`UsageError` (exit 2) naming the flag when a socket path given has no socket there
    (nothing to call: every check would fail on it)."""
    for flag, sock in (("--registration-socket", registration_socket), ("--plugin-socket", plugin_socket)):
        if sock is not None and not sock.is_socket():
            raise UsageError(f"{flag} {sock}: {'not a socket' if sock.exists() else 'no such socket'} "
                             "(is the driver running on this node? it registers in <kubelet dir>/plugins_registry)")


def require_node(kubeconfig: Path, context: str | None, driver: str, node: str | None) -> str:
    """Pre-flight: the node whose driver the suite calls: ``node`` when given, else the one node the
    driver's ResourceSlices name. :class:`UsageError` (exit 2) when the cluster cannot be read or the
    slices name no node or several (every check that creates claims would only record that cause)."""
    if node:
        return node
    try:
        slices = node_slices(Kube.from_kubeconfig(kubeconfig, context), driver, None)
    except (ApiError, HarnessError) as exc:
        raise UsageError(f"{kubeconfig}: cannot read the driver's ResourceSlices to find its node: {exc}") from exc
    found, why = _node_of(driver, None, slices)
    if found is None:
        raise UsageError(f"--node: {why}")
    return found


def _answer(result: ClaimResult) -> list[tuple[str, str, tuple[str, ...]]]:
    """A prepare answer for one claim, comparable: (pool, device, CDI IDs) of each device."""
    return sorted((d.pool_name, d.device_name, tuple(sorted(d.cdi_device_ids))) for d in result.devices)


def _node_of(driver: str, node: str | None, slices: list[Obj]) -> tuple[str | None, str]:
    if node:
        return node, ""
    nodes = sorted({s.get("spec", {}).get("nodeName") for s in slices if s.get("spec", {}).get("nodeName")})
    if len(nodes) == 1:
        return nodes[0], ""
    if not nodes:
        return None, f"the driver {driver} publishes no node-local ResourceSlice; give --node"
    return None, f"the driver {driver} publishes slices for several nodes ({', '.join(nodes)}); give --node"


def node_slices(kube: Kube, driver: str, node: str | None) -> list[Obj]:
    """The driver's ResourceSlices for ``node`` (all of the driver's when ``node`` is None)."""
    items, _ = kube.list("ResourceSlice", field_selector=f"spec.driver={driver}")
    if node is None:
        return items
    return [s for s in items if s.get("spec", {}).get("nodeName") == node
            or s.get("spec", {}).get("pool", {}).get("name") == node]


@contextlib.contextmanager
def open_context(config: SanityConfig, hooks: Any = None) -> Iterator[SanityContext]:
    """Set the suite up (registration info, Kube, the node's slices, a namespace) and tear it down.

    Never raises for what the driver or the cluster does: a part that cannot be set up is recorded
    in ``setup_error``/``info_error`` and the checks that need it skip or error with that reason.
    """
    info: PluginInfo | None = None
    info_error = ""
    try:
        with PluginClient(registration_socket=config.registration_socket, driver=config.driver) as reg:
            info = reg.get_info(timeout=config.call_timeout)
    except PluginCallError as exc:
        info_error = str(exc)
    kube: Kube | None = None
    namespace: str | None = None
    slices: list[Obj] = []
    node = config.node
    setup_error = ""
    run_id = uuid.uuid4().hex[:8]
    try:
        kube = Kube.from_kubeconfig(config.kubeconfig, config.context)
        slices_all = node_slices(kube, config.driver, None)
        node, why = _node_of(config.driver, config.node, slices_all)
        slices = node_slices(kube, config.driver, node) if node else []
        if why:
            setup_error = why
        if config.namespace:
            if kube.get("Namespace", config.namespace) is None:
                raise UsageError(f"--namespace {config.namespace}: no such namespace in the cluster")
            namespace = config.namespace
        else:
            namespace = f"draguard-sanity-{run_id}"
            kube.create_namespace(namespace, {RUN_LABEL: run_id, ADMIN_ACCESS_LABEL: "true"}, wait=False)
    except (ApiError, HarnessError, UsageError, OSError) as exc:
        setup_error = f"{type(exc).__name__}: {exc}"
        namespace = None
    bind = getattr(hooks, "bind_node", None)
    if callable(bind):
        bind(node)  # {node} of --restart-command: the node found here when none was given
    ctx = SanityContext(config, kube, namespace, info, info_error, node, slices, hooks, run_id, setup_error,
                        own_namespace=not config.namespace)
    ctx.answered_at_start = info is not None and ctx.answers(within=0) == ""
    with contextlib.ExitStack() as stack:
        if config.trace is not None and info is not None:
            try:
                ctx.proxy_sockets = stack.enter_context(_interposed(config, node or "node", run_id))
            except (UsageError, HarnessError, OSError, RuntimeError) as exc:  # calls go direct, untraced
                ctx.trace_error = f"the interposer could not be started, calls are not traced: {exc}"
        try:
            yield ctx
        finally:
            ctx.close()


@contextlib.contextmanager
def _interposed(config: SanityConfig, node: str, run_id: str) -> Iterator[tuple[Path, Path]]:
    """The interposer in front of the driver's registration socket; its (registration, DRA) sockets."""
    assert config.trace is not None
    base = Path(tempfile.mkdtemp(prefix="dgt", dir="/tmp"))  # short: unix socket paths are limited
    recorder = CallRecorder(base, config.trace, run_id)
    proxy = PluginProxy(node, config.registration_socket, base, FaultSet(), recorder)
    try:
        proxy.start()
        yield proxy.registration_socket, proxy.dra_socket
    finally:
        proxy.stop()
        recorder.close()
        shutil.rmtree(base, ignore_errors=True)


def run_check(ctx: SanityContext, entry: Entry[Any]) -> CheckResult:
    """Run one check with its timeout; whatever happens, a :class:`CheckResult` comes back.

    Before it starts: not applicable when the driver does not declare its capability, skipped when
    a hook it needs cannot be done. After it: a call that ran out of its deadline is named as the
    cause, and a driver that no longer answers fails this check, then is restarted or stops the suite.
    """
    why = _not_startable(ctx, entry)
    if why is not None:
        return why
    ctx.current = entry
    ctx.take_timeouts()
    try:
        result = run_entry(ctx, entry, ctx.config.check_timeout, ctx.cleanup)
    finally:
        ctx.current = None
    timeouts = ctx.take_timeouts()
    if timeouts and result.status in ("failed", "error"):
        cause = (f"timed out: {'; '.join(dict.fromkeys(timeouts))} (the call deadline, --call-timeout "
                 f"{ctx.config.call_timeout:g}s)")
        result.reason = f"{cause}; so: {result.reason}"
        result.evidence.insert(0, Evidence(cause))
    if ctx.answered_at_start:
        _after(ctx, result)
    return result


def _not_startable(ctx: SanityContext, entry: Entry[Any]) -> CheckResult | None:
    def ended(status: Any, reason: str) -> CheckResult:
        return CheckResult(entry.name, entry.summary, str(entry.meta.get("source", "")), status, reason)

    if ctx.stopped:
        return ended("skipped", f"not run: {ctx.stopped}")
    capability = entry.meta.get("capability")
    caps = ctx.config.capabilities
    if capability and caps is not None and not caps.declares(str(capability)):
        return ended("not-applicable", f"the driver does not declare {caps.describe(str(capability))} "
                     f"(--capabilities {caps.source})")
    needs = [str(n) for n in entry.meta.get("needs", ())]
    if needs:
        missing = [w for w in (ctx.hook_unavailable(n) for n in needs) if w]
        if missing and (entry.meta.get("needs_all", True) or len(missing) == len(needs)):
            return ended("skipped", "; ".join(missing))
    return None


def _after(ctx: SanityContext, result: CheckResult) -> None:
    """The driver must still answer after a check; if not, the check fails and the driver is restored."""
    down = ctx.answers(within=max(10.0, ctx.config.call_timeout))
    if not down:
        return
    left = f"the driver stopped answering during this check and was left down ({down})"
    result.evidence.append(Evidence(left))
    if result.status in ("failed", "error"):
        result.reason = f"{result.reason}; {left}"
    else:
        result.status, result.reason = "failed", left
    why = ctx.hook_unavailable("restart")
    if not why:
        try:
            ctx.hook("restart")()
            back = ctx.answers(within=30.0)
        except Exception as exc:  # a hook of the driver: its failure is the cause named below
            back = f"the restart hook failed: {type(exc).__name__}: {exc}"
        if not back:
            result.evidence.append(Evidence("the suite restarted the driver (restart hook) and it answered again"))
            return
        why = f"restarting it did not bring it back: {back}"
    ctx.stopped = (f"the driver {ctx.config.driver} was left down by {result.id} ({down}) and the suite cannot "
                   f"bring it back: {why}")


def run_sanity(
    config: SanityConfig,
    hooks: Any = None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> RunResult:
    """Run the selected sanity checks against one driver; the environment goes into the result."""
    entries = sanity_checks(config.select)
    with open_context(config, hooks) as ctx:
        result = RunResult(run_id=f"sanity-{ctx.run_id}")
        result.environment = {
            "driver": config.driver,
            "node": ctx.node,
            "registrationSocket": str(config.registration_socket),
            "pluginSocket": str(ctx.dra_socket) if ctx.dra_socket else None,
            "advertised": list(ctx.info.supported_versions) if ctx.info else None,
            "draVersion": ctx.version,
            "setupError": ctx.setup_error or None,
            "registrationError": ctx.info_error or None,
            "hooks": type(hooks).__name__ if hooks is not None else None,
            "trace": str(config.trace) if ctx.proxy_sockets and config.trace else None,
            "traceError": ctx.trace_error or None,
        }
        if ctx.kube is not None:
            try:
                result.environment["kubernetes"] = ctx.kube.server_version().get("gitVersion")
            except (ApiError, HarnessError):
                pass
        result.environment["capabilities"] = (ctx.config.capabilities.as_dict() if ctx.config.capabilities
                                              else "not declared: every check applies")
        result.environment["idempotentCount"] = config.idempotent_count
        for i, entry in enumerate(entries):
            check = run_check(ctx, entry)
            result.checks.append(check)
            if on_result is not None:
                on_result(check)
            if ctx.stopped:
                result.environment["stopped"] = ctx.stopped
                result.environment["notRun"] = [e.name for e in entries[i + 1:]]
                break
    return result
