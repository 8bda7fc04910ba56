"""The sanity suite's engine: configuration, the check decorator, the context checks use, and the runner.

A check is a function ``check(ctx: SanityContext) -> None`` registered with :func:`sanity_check`
into :data:`draguard.harness.core.registry.CHECKS` under a stable dotted id (``sanity.<area>.<name>``),
with its one-line rule, where the rule comes from, and the fake-driver mutants it is aimed at.
A check passes by returning, fails by raising :class:`CheckFailed` (through :func:`expect`, so every
failure has the same shape: what was expected, what the driver did, the objects and devices
involved), and skips by raising :class:`Skip` with the reason (a capability the driver lacks, a
hook the suite was not given). Anything else it raises is an ``error`` of that check, never a crash.

:class:`SanityContext` is what checks get: the plugin client (as the kubelet calls the driver),
the Kube client, a fresh namespace, the node's published devices, and :meth:`SanityContext.claim`,
which creates a real ResourceClaim in the API server and writes its allocation the way the
scheduler does. Every claim a check creates is unprepared and deleted when the check ends
(csi-sanity's ``Resources``), whatever the outcome.

:func:`run_sanity` runs the selected checks one after the other, each in a worker thread bounded by
``check_timeout``; every gRPC call has its own deadline. It returns a :class:`RunResult` whose
``checks`` hold one :class:`CheckResult` per check. Talks to the driver's sockets (through
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
from draguard.harness.grpcapi.plugin import (
    ClaimRef,
    ClaimResult,
    PluginCallError,
    PluginClient,
    PluginInfo,
    choose_version,
)
from draguard.harness.kube import RUN_LABEL, ApiError, Kube, Obj
from draguard.harness.core.registry import CHECKS, Entry
from draguard.harness.result import CheckResult, RunResult

from ..checks import CheckFailed, Skip, expect, run_entry

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
]

log = logging.getLogger("draguard.sanity")

PREFIX = "sanity."
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
    idempotent_count: int = 3
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
) -> Callable[[CheckFn], CheckFn]:
    """Register a sanity check: stable id ``sanity.<area>.<name>``, one-line rule, its source.

    ``aimed_at`` names the fake-driver mutants whose bug this check exists to catch (the mutant ×
    check table asserts that each of them fails it); ``needs`` names the :class:`DriverHooks`
    methods it uses (listed in the docs; a missing one makes it skip).
    """
    if not check_id.startswith(PREFIX):
        raise DefinitionError(f"sanity check id {check_id!r} must start with {PREFIX!r}")
    if not source.strip():
        raise DefinitionError(f"sanity check {check_id!r}: say where its rule comes from (source=...)")
    area = check_id.split(".")[1]
    return CHECKS.register(check_id, summary=rule, source=source, aimed_at=tuple(aimed_at), needs=tuple(needs), area=area)


def sanity_checks(select: Sequence[str] = ()) -> list[Entry[Any]]:
    """The registered sanity checks, in area order, filtered by id globs."""
    from . import AREAS  # the area modules register on import

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
                c = PluginClient(dra, reg, version, self.config.call_timeout, self.config.driver)
                self._clients[version] = c
            return c

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
        """Prepare ``claim`` alone and require success (the setup step of many checks)."""
        result = self.prepare(claim).get(claim.uid)
        expect(result is not None, f"NodePrepareResources answered no entry for {claim}", [str(claim)])
        assert result is not None
        expect(not result.error, f"prepare of {claim} failed: {result.error}", [str(claim)])
        return result

    def unprepared_ok(self, claim: ClaimRef) -> None:
        answer = self.unprepare(claim)
        expect(answer.get(claim.uid) == "", f"unprepare of {claim} answered {answer!r}", [str(claim)])

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
    ) -> ClaimRef:
        """A ResourceClaim allocated ``devices`` (pool, device) of ``driver`` on ``node``, as the scheduler writes it."""
        if self.kube is None or self.namespace is None:
            raise HarnessError(f"cannot create ResourceClaims: {self.setup_error}")
        with self._lock:
            self._seq += 1
            seq = self._seq
        name = name or f"sanity-{seq}"
        driver = driver or self.config.driver
        node = node or self.node or ""
        obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": self.namespace, "labels": {RUN_LABEL: self.run_id}},
            "spec": {"devices": {"requests": [
                {"name": "req", "exactly": {"deviceClassName": SANITY_CLASS, "count": max(1, len(devices))}}
            ]}},
        }
        try:
            created = self.kube.create(obj)
            created["status"] = {
                "allocation": {
                    "devices": {"results": [
                        {"request": "req", "driver": driver, "pool": pool, "device": dev} for pool, dev in devices
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

    def hook(self, name: str) -> Callable[..., Any]:
        """The hook ``name``, or skip the check saying which hook it needs.

        Hooks run on one thread that lives as long as the suite: a driver process a ``restart``
        hook starts may be tied to the thread that started it (``PR_SET_PDEATHSIG`` fires when
        that *thread* ends), and each check runs on a thread of its own.
        """
        fn = getattr(self.hooks, name, None) if self.hooks is not None else None
        if fn is None:
            raise Skip(f"needs the {name!r} hook (the suite cannot do this to an arbitrary driver); "
                       f"{'no hooks were given' if self.hooks is None else 'the given hooks lack it'}")

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
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                self.client().get_info(timeout=2)
                self.client().prepare([], timeout=2)
                return
            except PluginCallError as exc:
                last = str(exc)
            time.sleep(0.2)
        raise CheckFailed(f"the driver did not answer again within {timeout:.0f}s of its restart: {last}")

    def close(self) -> None:
        self._hook_thread.shutdown(wait=False)
        for c in self._clients.values():
            c.close()
        if self.kube is not None and self.namespace is not None:
            try:
                self.kube.delete("Namespace", self.namespace)
            except (ApiError, HarnessError) as exc:
                log.warning("cannot delete namespace %s: %s", self.namespace, exc)


def _node_of(config: SanityConfig, slices: list[Obj]) -> tuple[str | None, str]:
    if config.node:
        return config.node, ""
    nodes = sorted({s.get("spec", {}).get("nodeName") for s in slices if s.get("spec", {}).get("nodeName")})
    if len(nodes) == 1:
        return nodes[0], ""
    if not nodes:
        return None, f"the driver {config.driver} publishes no node-local ResourceSlice; give --node"
    return None, f"the driver {config.driver} publishes slices for several nodes ({', '.join(nodes)}); give --node"


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
        node, why = _node_of(config, slices_all)
        slices = node_slices(kube, config.driver, node) if node else []
        if why:
            setup_error = why
        namespace = f"draguard-sanity-{run_id}"
        kube.create_namespace(namespace, {RUN_LABEL: run_id}, wait=False)
    except (ApiError, HarnessError, UsageError, OSError) as exc:
        setup_error = f"{type(exc).__name__}: {exc}"
        namespace = None
    ctx = SanityContext(config, kube, namespace, info, info_error, node, slices, hooks, run_id, setup_error)
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
    from draguard.harness.proxy import CallRecorder, FaultSet, PluginProxy

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
    """Run one check with its timeout; whatever happens, a :class:`CheckResult` comes back."""
    return run_entry(ctx, entry, ctx.config.check_timeout, ctx.cleanup)


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
        for entry in entries:
            check = run_check(ctx, entry)
            result.checks.append(check)
            if on_result is not None:
                on_result(check)
    return result
