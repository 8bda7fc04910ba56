"""The gRPC interposer: a transparent proxy between fake nodes and any DRA plugin's sockets.

A real plugin runs with its directories under ``--plugin-root`` (``<plugin-root>/<node>/plugins_registry/
<driver>-reg.sock``, ``.../plugins/<driver>/dra.sock``). For each registration socket found there,
a :class:`PluginProxy` serves the same socket name under ``--node-root`` (where the fake nodes look)
plus its own DRA socket ``<node-root>/<node>/plugins/<driver>/dra.sock``. ``GetInfo`` is forwarded
and its ``endpoint`` rewritten to that socket, so every later DRA call passes through the proxy.

Calls are forwarded as raw bytes (a ``GenericRpcHandler``), so any service and version works;
DRA requests are decoded only to name their claims in the record and to match per-claim faults, and
their answers only to record the per-claim errors and the devices each claim was prepared with.
Every call is recorded by :class:`~.recorder.CallRecorder`; :class:`~.faults.FaultSet` decides what
to inject. Talks to plugins and to whoever dials its sockets; never to the API server.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from draguard.harness.core.errors import UsageError
from draguard.harness.grpcapi import dra_v1_pb2, pluginregistration_pb2
from draguard.harness.grpcapi.plugin import (
    DRA_VERSIONS,
    PREPARE,
    REGISTRATION_SERVICE,
    REGISTRATION_TIMEOUT,
    UNPREPARE,
    WATCH,
    ClaimRef,
    socket_target,
)
from draguard.harness.core.paths import NodeDirs
from draguard.harness.core.process import claim_socket_path, release_socket_paths

from draguard.harness.proxy.call_rules import Action, FaultRule, FaultSet
from .recorder import CallRecorder

__all__ = ["Interposer", "PluginProxy"]

log = logging.getLogger("draguard.proxy")

DRA_SERVICES = tuple(v.full_service for v in DRA_VERSIONS.values())
_DROP_METADATA = ("user-agent", "grpc-")


class PluginProxy:
    """Proxies one plugin instance (one registration socket) of one node."""

    def __init__(
        self,
        node: str,
        real_registration: Path,
        node_root: Path,
        faults: FaultSet,
        recorder: CallRecorder,
    ) -> None:
        self.node = node
        self.real_registration = real_registration
        stem = real_registration.name[: -len("-reg.sock")]
        self.driver = stem  # until GetInfo names it
        dirs = NodeDirs(node_root, node)
        self.dirs = dirs
        self.registration_socket = dirs.registry / real_registration.name
        self.dra_socket = dirs.plugin_dir(stem) / "dra.sock"
        self.faults = faults
        self.recorder = recorder
        self.real_endpoint: str | None = None
        self._server: grpc.Server | None = None
        self._reg_channel: grpc.Channel | None = None
        self._dra_channel: grpc.Channel | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._timers: list[threading.Timer] = []
        self._owned: list[Path] = []

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> PluginProxy:
        self.dirs.registry.mkdir(parents=True, exist_ok=True)
        self.dra_socket.parent.mkdir(parents=True, exist_ok=True)
        claim_socket_path(self.dra_socket)
        claim_socket_path(self.registration_socket)
        self._owned = [self.registration_socket, self.dra_socket]
        self._reg_channel = grpc.insecure_channel(socket_target(self.real_registration))
        server = grpc.server(ThreadPoolExecutor(max_workers=16, thread_name_prefix=f"proxy-{self.node}"))
        server.add_generic_rpc_handlers((_Handler(self),))
        # DRA socket first: once the registration socket appears, a node may dial the endpoint at once.
        server.add_insecure_port(f"unix:{self.dra_socket}")
        server.add_insecure_port(f"unix:{self.registration_socket}")
        server.start()
        self._server = server
        log.info("proxying %s on %s: %s -> %s", self.driver, self.node, self.registration_socket, self.real_registration)
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            timers, self._timers = self._timers, []
        for t in timers:
            t.cancel()
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None
        for ch in (self._reg_channel, self._dra_channel):
            if ch is not None:
                ch.close()
        release_socket_paths(*self._owned)  # only ours: never a socket another process is serving
        self._owned = []

    # -- upstream ----------------------------------------------------------------------------
    def _dra(self) -> grpc.Channel:
        with self._lock:
            if self._dra_channel is None:
                endpoint = self.real_endpoint
                if endpoint is None:  # a DRA call before any GetInfo through us: ask the plugin directly
                    endpoint = self._learn_endpoint()
                self._dra_channel = grpc.insecure_channel(socket_target(endpoint))
            return self._dra_channel

    def _learn_endpoint(self) -> str:
        assert self._reg_channel is not None
        get_info: grpc.UnaryUnaryMultiCallable[bytes, bytes] = self._reg_channel.unary_unary(f"/{REGISTRATION_SERVICE}/GetInfo")
        raw = get_info(pluginregistration_pb2.InfoRequest().SerializeToString(), timeout=REGISTRATION_TIMEOUT)
        info = pluginregistration_pb2.PluginInfo.FromString(raw)
        self.driver = info.name or self.driver
        self.real_endpoint = self._absolute(info.endpoint)
        return self.real_endpoint

    def _absolute(self, endpoint: str) -> str:
        return endpoint if os.path.isabs(endpoint) else str(self.real_registration.parent / endpoint)

    def upstream(self, service: str) -> grpc.Channel:
        if service == REGISTRATION_SERVICE:
            assert self._reg_channel is not None
            return self._reg_channel
        return self._dra()

    def rewrite_info(self, raw: bytes) -> bytes:
        info = pluginregistration_pb2.PluginInfo.FromString(raw)
        endpoint = self._absolute(info.endpoint)
        with self._lock:
            if endpoint != self.real_endpoint and self._dra_channel is not None:
                self._dra_channel.close()
                self._dra_channel = None
            self.real_endpoint = endpoint
            self.driver = info.name or self.driver
        info.endpoint = str(self.dra_socket)
        return info.SerializeToString()

    # -- bookkeeping -------------------------------------------------------------------------
    def record(self, **entry: Any) -> None:
        self.recorder.write({"node": self.node, "driver": self.driver, **entry})

    def later(self, delay: float, fn: Any) -> None:
        t = threading.Timer(delay, fn)
        t.daemon = True
        with self._lock:
            self._timers = [x for x in self._timers if x.is_alive()] + [t]
        t.start()

    @property
    def stopping(self) -> threading.Event:
        return self._stopping


def _claims(method: str, raw: bytes) -> list[ClaimRef]:
    if method not in (PREPARE, UNPREPARE):
        return []
    try:
        request = dra_v1_pb2.NodePrepareResourcesRequest.FromString(raw)  # same layout for both methods
    except Exception:  # not decodable: record without claims, forward anyway
        return []
    return [ClaimRef.from_pb(c) for c in request.claims]


def _answer(method: str, raw: bytes) -> dict[str, Any]:
    """What a plugin's answer says per claim, for the record: ``claim_errors`` of a prepare or unprepare,
    and ``answers`` of a prepare (the devices of each claim it did not fail; v1beta1's ``Device`` is v1's
    without ``share_id``, so one decoding serves both). An answer that does not decode records neither."""
    try:
        if method == PREPARE:
            resp: Any = dra_v1_pb2.NodePrepareResourcesResponse.FromString(raw)
        elif method == UNPREPARE:
            resp = dra_v1_pb2.NodeUnprepareResourcesResponse.FromString(raw)
        else:
            return {"claim_errors": {}}
    except Exception:
        return {"claim_errors": {}}
    out: dict[str, Any] = {"claim_errors": {uid: r.error for uid, r in resp.claims.items() if r.error}}
    if method == PREPARE:
        out["answers"] = {
            uid: [{"pool": d.pool_name, "device": d.device_name, "requests": list(d.request_names),
                   "cdi_device_ids": list(d.cdi_device_ids)} for d in r.devices]
            for uid, r in resp.claims.items() if not r.error
        }  # fmt: skip
    return out


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        self.details = details


class _Handler(grpc.GenericRpcHandler):
    """Routes every method of every service to a raw-bytes forwarder."""

    def __init__(self, proxy: PluginProxy) -> None:
        self.proxy = proxy

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[bytes, bytes] | None:
        full = handler_call_details.method  # "/package.Service/Method"
        service, _, method = full.lstrip("/").rpartition("/")
        if method == WATCH:
            return grpc.unary_stream_rpc_method_handler(
                lambda req, ctx: self._stream(full, service, method, req, ctx)
            )
        if service == REGISTRATION_SERVICE or service in DRA_SERVICES:
            return grpc.unary_unary_rpc_method_handler(lambda req, ctx: self._unary(full, service, method, req, ctx))
        # Unknown service: stream-stream forwarding carries any call shape unchanged.
        return grpc.stream_stream_rpc_method_handler(lambda it, ctx: self._passthrough(full, service, method, it, ctx))

    # -- shapes ------------------------------------------------------------------------------
    def _unary(self, full: str, service: str, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        proxy = self.proxy
        claims = _claims(method, request)
        rule = proxy.faults.match(proxy.node, proxy.driver, method, claims)
        start = time.time()
        entry: dict[str, Any] = {
            "ts": start,
            "service": service,
            "method": method,
            "kind": "call",
            "claims": [c.as_dict() for c in claims],
            "fault": rule.action.value if rule else None,
        }
        try:
            response = self._apply(full, service, method, request, context, rule, claims)
        except _Abort as exc:
            proxy.record(**entry, duration_s=round(time.time() - start, 6), status=exc.code.name, error=exc.details,
                         claim_errors={})
            context.abort(exc.code, exc.details)
            raise AssertionError("unreachable") from None  # context.abort raises
        if method == "GetInfo":
            response = proxy.rewrite_info(response)
        proxy.record(**entry, duration_s=round(time.time() - start, 6), status="OK", error="", **_answer(method, response))
        return response

    def _apply(
        self,
        full: str,
        service: str,
        method: str,
        request: bytes,
        context: grpc.ServicerContext,
        rule: FaultRule | None,
        claims: list[ClaimRef],
    ) -> bytes:
        action = rule.action if rule else None
        if rule is not None and action is Action.ERROR:
            raise _Abort(rule.status_code, rule.message)
        if rule is not None and action is Action.DELAY:
            if self.proxy.stopping.wait(rule.seconds):
                raise _Abort(grpc.StatusCode.UNAVAILABLE, "proxy is stopping")
        if action is Action.HANG:
            while context.is_active() and not self.proxy.stopping.wait(0.1):
                pass
            raise _Abort(grpc.StatusCode.DEADLINE_EXCEEDED, "call hung by draguard proxy")
        if rule is not None and action is Action.CLAIM_ERROR and method in (PREPARE, UNPREPARE):
            return self._claim_error(full, service, method, request, context, rule, claims)
        response = self._forward(full, service, request, context)
        if action is Action.DUPLICATE:
            response = self._extra(full, service, method, request, claims, "duplicate", context)
        if rule is not None and action is Action.STALE_RETRY:
            self.proxy.later(rule.seconds, lambda: self._extra(full, service, method, request, claims, "stale-retry"))
        return response

    def _claim_error(
        self,
        full: str,
        service: str,
        method: str,
        request: bytes,
        context: grpc.ServicerContext,
        rule: FaultRule,
        claims: list[ClaimRef],
    ) -> bytes:
        hit = {c.uid for c in rule.claims_hit(claims)}
        req_type: Any = dra_v1_pb2.NodePrepareResourcesRequest if method == PREPARE else (
            dra_v1_pb2.NodeUnprepareResourcesRequest
        )
        resp_type: Any = dra_v1_pb2.NodePrepareResourcesResponse if method == PREPARE else (
            dra_v1_pb2.NodeUnprepareResourcesResponse
        )
        parsed = req_type.FromString(request)
        rest = [c for c in parsed.claims if c.uid not in hit]
        if rest:
            raw = self._forward(full, service, req_type(claims=rest).SerializeToString(), context)
            response = resp_type.FromString(raw)
        else:
            response = resp_type()
        for uid in hit:
            response.claims[uid].error = rule.message
        return bytes(response.SerializeToString())

    def _forward(self, full: str, service: str, request: bytes, context: grpc.ServicerContext | None) -> bytes:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = self.proxy.upstream(service).unary_unary(full)
        timeout = context.time_remaining() if context is not None else 45.0
        metadata = _metadata(context) if context is not None else None
        try:
            response: bytes = call(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as exc:
            raise _Abort(exc.code(), exc.details() or "") from exc
        return response

    def _extra(
        self,
        full: str,
        service: str,
        method: str,
        request: bytes,
        claims: list[ClaimRef],
        kind: str,
        context: grpc.ServicerContext | None = None,
    ) -> bytes:
        """A call the proxy makes on its own (duplicate, stale retry); recorded with its kind."""
        start = time.time()
        entry: dict[str, Any] = {
            "ts": start,
            "service": service,
            "method": method,
            "kind": kind,
            "claims": [c.as_dict() for c in claims],
            "fault": kind,
        }
        try:
            response = self._forward(full, service, request, context)
        except _Abort as exc:
            self.proxy.record(**entry, duration_s=round(time.time() - start, 6), status=exc.code.name,
                              error=exc.details, claim_errors={})
            if context is not None:
                raise
            return b""
        self.proxy.record(**entry, duration_s=round(time.time() - start, 6), status="OK", error="",
                          **_answer(method, response))
        return response

    def _stream(
        self, full: str, service: str, method: str, request: bytes, context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        proxy = self.proxy
        rule = proxy.faults.match(proxy.node, proxy.driver, method, [])
        start = time.time()
        entry: dict[str, Any] = {
            "ts": start, "service": service, "method": method, "kind": "call", "claims": [],
            "fault": rule.action.value if rule else None, "claim_errors": {},
        }
        status, error, messages = "OK", "", 0
        try:
            if rule is not None and rule.action is Action.ERROR:
                raise _Abort(rule.status_code, rule.message)
            if rule is not None and rule.action is Action.DELAY:
                proxy.stopping.wait(rule.seconds)
            if rule is not None and rule.action is Action.HANG:
                while context.is_active() and not proxy.stopping.wait(0.1):
                    pass
                raise _Abort(grpc.StatusCode.DEADLINE_EXCEEDED, "call hung by draguard proxy")
            call: grpc.UnaryStreamMultiCallable[bytes, bytes] = proxy.upstream(service).unary_stream(full)
            stream = call(request, timeout=context.time_remaining(), metadata=_metadata(context))

            def cancel() -> None:
                stream.cancel()

            context.add_callback(cancel)
            try:
                for message in stream:
                    messages += 1
                    yield message
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.CANCELLED:
                    raise _Abort(exc.code(), exc.details() or "") from exc
        except _Abort as exc:
            status, error = exc.code.name, exc.details
            proxy.record(**entry, duration_s=round(time.time() - start, 6), status=status, error=error, messages=messages)
            context.abort(exc.code, exc.details)
        proxy.record(**entry, duration_s=round(time.time() - start, 6), status=status, error=error, messages=messages)

    def _passthrough(
        self, full: str, service: str, method: str, requests: Iterator[bytes], context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        start = time.time()
        status, error = "OK", ""
        try:
            call: grpc.StreamStreamMultiCallable[bytes, bytes] = self.proxy.upstream(service).stream_stream(full)
            stream = call(requests, timeout=context.time_remaining(), metadata=_metadata(context))

            def cancel() -> None:
                stream.cancel()

            context.add_callback(cancel)
            yield from stream
        except grpc.RpcError as exc:
            status, error = exc.code().name, exc.details() or ""
            self.proxy.record(ts=start, service=service, method=method, kind="call", claims=[], fault=None,
                              duration_s=round(time.time() - start, 6), status=status, error=error, claim_errors={})
            context.abort(exc.code(), error)
        self.proxy.record(ts=start, service=service, method=method, kind="call", claims=[], fault=None,
                          duration_s=round(time.time() - start, 6), status=status, error=error, claim_errors={})


def _metadata(context: grpc.ServicerContext) -> tuple[tuple[str, str | bytes], ...]:
    return tuple(
        (k, v) for k, v in (context.invocation_metadata() or ()) if not k.startswith(_DROP_METADATA) and k[:1] != ":"
    )


class Interposer:
    """Proxies every plugin found under ``plugin_root`` to ``node_root``, following plugins as they come and go."""

    def __init__(
        self,
        plugin_root: Path,
        node_root: Path,
        faults: FaultSet | None = None,
        record: Path | None = None,
        run_label: str | None = None,
        interval: float = 0.5,
    ) -> None:
        self.plugin_root = Path(plugin_root).absolute()
        self.node_root = Path(node_root).absolute()
        if self.plugin_root.exists() and not self.plugin_root.is_dir():
            raise UsageError(f"--plugin-root {plugin_root}: not a directory")
        if self.plugin_root == self.node_root:
            raise UsageError(f"--plugin-root and --node-root are both {plugin_root}: the proxy would serve itself")
        self.faults = faults or FaultSet()
        self.recorder = CallRecorder(self.node_root, record, run_label)
        self.interval = interval
        self.proxies: dict[tuple[str, str], tuple[tuple[int, int], PluginProxy]] = {}
        self._refused: dict[tuple[str, str], tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Interposer:
        """Proxy what exists now (a taken socket path is an error), then keep following changes."""
        self.node_root.mkdir(parents=True, exist_ok=True)
        self.plugin_root.mkdir(parents=True, exist_ok=True)  # plugins may create their node folders later
        try:
            self.scan_once(strict=True)
        except BaseException:
            self.stop()
            raise
        self._thread = threading.Thread(target=self._run, name="interposer-scan", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            proxies = [p for _, p in self.proxies.values()]
            self.proxies.clear()
        for p in proxies:
            p.stop()
        self.recorder.close()

    def __enter__(self) -> Interposer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def calls_file(self, node: str) -> Path:
        return self.recorder.path_for(node)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.scan_once(strict=False)
            except Exception:  # keep following the other plugins
                log.exception("interposer scan failed")

    def scan_once(self, strict: bool = False) -> None:
        seen: dict[tuple[str, str], tuple[Path, tuple[int, int]]] = {}
        try:
            node_dirs = [d for d in os.scandir(self.plugin_root) if d.is_dir()]
        except FileNotFoundError:
            node_dirs = []
        for d in node_dirs:
            registry = Path(d.path) / "plugins_registry"
            try:
                entries = list(os.scandir(registry))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for e in entries:
                if not e.name.endswith("-reg.sock"):
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                seen[(d.name, e.name)] = (Path(e.path), (st.st_ino, st.st_ctime_ns))
        with self._lock:
            current = dict(self.proxies)
        for key, (ident, proxy) in current.items():
            if key not in seen or seen[key][1] != ident:
                proxy.stop()
                with self._lock:
                    self.proxies.pop(key, None)
                log.info("plugin %s on %s went away (or restarted)", proxy.driver, proxy.node)
        for key, (path, ident) in seen.items():
            with self._lock:
                if key in self.proxies:
                    continue
                if self._refused.get(key) == ident:
                    continue
            proxy = PluginProxy(key[0], path, self.node_root, self.faults, self.recorder)
            try:
                proxy.start()
            except UsageError as exc:
                if strict:
                    raise
                log.error("cannot proxy %s: %s", path, exc)
                with self._lock:
                    self._refused[key] = ident  # retried when the plugin's socket changes
                continue
            with self._lock:
                self.proxies[key] = (ident, proxy)
