"""A small, fast client for the Kubernetes API that works on plain JSON dicts.

The official ``kubernetes`` package reads the kubeconfig (tokens, certificates, exec plugins) and
builds the urllib3 pool that watches use; calls go over kept connections of this module's own, their
answers parsed by ``httptools``, where the kubeconfig allows (:class:`_Connections`: about a third of
urllib3's client CPU per call). This module adds a
typed table of the kinds draguard touches and generic verbs (get, list, create, patch, delete,
watch) on them. Objects stay dicts: turning every watch event into a generated model costs over
ten times as much as ``json.loads`` (see shared/reference/python-stack.md), and draguard reads a
few fields of many objects.

Everything that talks to a cluster (backends, fake nodes, fake driver, runner, chaos) goes through
:class:`Kube`.
"""

from __future__ import annotations

import builtins
import http.client
import itertools
import re
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

import httptools
import urllib3
from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration

from draguard.harness.core import jsonfast
from draguard.harness.core.errors import HarnessError, UsageError

__all__ = ["Kind", "KINDS", "Kube", "ApiError", "Obj", "RUN_LABEL", "WORKLOAD_LABEL", "MEMBER_LABEL"]

Obj = dict[str, Any]

RUN_LABEL = "draguard.dev/run"
"""The label every object draguard creates carries, with the run's id as value; cleanup selects on it."""
WORKLOAD_LABEL = "draguard.dev/workload"
"""The label of a scenario's pod: the workload it is a member of."""
MEMBER_LABEL = "draguard.dev/member"
"""The label of a scenario's pod: its index in its workload."""


@dataclass(frozen=True)
class Kind:
    """Where a kind lives in the API."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


KINDS: dict[str, Kind] = {
    k.kind: k
    for k in (
        Kind("Namespace", "", "v1", "namespaces", False),
        Kind("Node", "", "v1", "nodes", False),
        Kind("Pod", "", "v1", "pods", True),
        Kind("Event", "", "v1", "events", True),
        Kind("ConfigMap", "", "v1", "configmaps", True),
        Kind("ServiceAccount", "", "v1", "serviceaccounts", True),
        Kind("Lease", "coordination.k8s.io", "v1", "leases", True),
        Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False),
        Kind("Workload", "scheduling.k8s.io", "v1beta1", "workloads", True),
        Kind("PodGroup", "scheduling.k8s.io", "v1beta1", "podgroups", True),
        Kind("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", False),
        Kind("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", False),
        Kind("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True),
        Kind("ResourceClaimTemplate", "resource.k8s.io", "v1", "resourceclaimtemplates", True),
        Kind("DeviceTaintRule", "resource.k8s.io", "v1", "devicetaintrules", False),
        Kind("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True),
        Kind("DaemonSet", "apps", "v1", "daemonsets", True),
    )
}


class ApiError(HarnessError):
    """The API server answered with an error status."""

    def __init__(self, status: int, method: str, path: str, body: Obj | None) -> None:
        self.status = status
        self.body = body or {}
        self.reason = str(self.body.get("reason", ""))
        message = self.body.get("message") or f"HTTP {status}"
        super().__init__(f"{method} {path}: {message}")

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


_PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


def kind_of(kind: str | Kind) -> Kind:
    if isinstance(kind, Kind):
        return kind
    try:
        return KINDS[kind]
    except KeyError:
        raise HarnessError(f"unknown kind {kind!r}; known kinds: {', '.join(sorted(KINDS))}") from None


BULK_PARALLEL = 16
"""Requests :meth:`Kube.bulk` keeps in flight by default."""
T = TypeVar("T")


def _readable(sock: Any) -> bool:
    """True when ``sock`` has something to read now (for an idle keep-alive connection: the server closed
    it). poll, not select: select refuses descriptors from 1024 on, and the driver host has more open."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


_RECV_SIZE = 256 * 1024
"""Bytes asked of the socket per read (a LIST of thousands of pods is megabytes)."""

_CLOSED_UNANSWERED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
"""How a kept connection the server closed shows when a call is sent on it before the close is seen."""


class _Answer:
    """httptools' callbacks for one response: status, body pieces, whether the connection stays open."""

    __slots__ = ("parser", "body", "status", "keep", "done", "framed", "headers_done")

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.body: list[bytes] = []
        self.status = 0
        self.keep = False
        self.done = False
        self.framed = False  # a Content-Length or Transfer-Encoding: the body does not end at the close
        self.headers_done = False

    def on_header(self, name: bytes, _value: bytes) -> None:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, data: bytes) -> None:
        self.body.append(data)

    def on_message_complete(self) -> None:
        # read here: llhttp resets a message's flags once it is complete
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim answer (never asked for: no Expect is sent); the real one follows
            self.headers_done = self.framed = False
            return
        self.status, self.keep, self.done = status, self.parser.should_keep_alive(), True


_NOT_IN_TARGET = re.compile(r"[\x00-\x20\x7f]")
_NOT_IN_HEADER = re.compile(r"[\r\n\x00]")


def _checked(text: str, what: str, refused: re.Pattern[str] = _NOT_IN_HEADER) -> str:
    """``text`` unless it holds what would break the request's head (http.client refuses the same). A
    header's value is not repeated in the error: it may be a credential."""
    if refused.search(text):
        if refused is _NOT_IN_TARGET:
            raise http.client.InvalidURL(f"{what} holds a control character or a space: {text!r}")
        raise http.client.InvalidURL(f"header {what} holds a line break or NUL")
    return text


class _Connections:
    """Keep-alive connections to one API server for :meth:`Kube.request`: plain sockets, TLS from ``ssl``,
    answers parsed by ``httptools`` (llhttp, the parser of Node.js, in C).

    Client CPU per Lease renewal (``Kube.patch``) against a local API server, one thread, over TLS: about
    1.8 ms through the ``kubernetes`` package's urllib3 pool manager, 0.92 ms over ``http.client`` (which
    sends a request's head and body as two TLS records and parses headers with ``email.parser``), 0.61 ms
    here (head and body in one write). The fake nodes renew 50 Leases a second at 500 nodes and every
    pod costs the fake nodes and the driver host several calls. Used only where the kubeconfig needs nothing
    urllib3 adds (:meth:`usable`: no proxy, no overridden TLS host name, no socket options); watches stay
    on urllib3. A connection serves one call at a time; idle ones are kept (up to ``maxsize``) and checked
    before reuse, as urllib3 does: one the server closed is readable at once, and is dropped."""

    def __init__(self, configuration: Configuration, maxsize: int) -> None:
        url = urlsplit(configuration.host)
        self.https = url.scheme == "https"
        self.host = url.hostname or ""
        self.port = url.port or (443 if self.https else 80)
        self.host_header = _checked(url.netloc.rpartition("@")[2], "host", _NOT_IN_TARGET)
        self.maxsize = maxsize
        self.context: ssl.SSLContext | None = None
        if self.https:
            ctx = ssl.create_default_context(cafile=configuration.ssl_ca_cert,
                                             cadata=getattr(configuration, "ca_cert_data", None))  # fmt: skip
            if not configuration.verify_ssl:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            if configuration.cert_file:
                ctx.load_cert_chain(configuration.cert_file, configuration.key_file)
            self.context = ctx
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()

    @staticmethod
    def usable(configuration: Configuration) -> bool:
        url = urlsplit(configuration.host or "")
        return (url.scheme in ("http", "https") and bool(url.hostname) and not configuration.proxy
                and configuration.assert_hostname is None and not configuration.tls_server_name
                and configuration.socket_options is None)  # fmt: skip

    def request(self, method: str, url: str, body: bytes | None, headers: Mapping[str, str],
                timeout: float) -> tuple[int, bytes]:  # fmt: skip
        """One call; the answer's status and body. Raises OSError or http.client.HTTPException."""
        data = self._message(method, url, body, headers)
        sock, reused = self._take(timeout)
        while True:
            sent = False
            try:
                sock.sendall(data)  # head and body in one write: one TLS record, one segment for a small call
                sent = True
                answer = self._answer(sock)
                break
            except _CLOSED_UNANSWERED:
                sock.close()
                # A kept connection the server closed (its idle timeout) just as the call went out. Once
                # more on a new connection when the call cannot have taken effect twice: it was not
                # sent whole, or it is a GET; as Go's transport (net/http transport.go,
                # shouldRetryRequest) and client-go (rest/request.go, GETs on a reset connection) do.
                if not reused or (sent and method != "GET"):
                    raise
                sock, reused = self._new(timeout), False
            except BaseException:
                sock.close()
                raise
        if not answer.keep or not self._put(sock):
            sock.close()
        return answer.status, b"".join(answer.body)

    def _message(self, method: str, url: str, body: bytes | None, headers: Mapping[str, str]) -> bytes:
        """The request's head and body as one piece of bytes (refused before sending if it would break
        the head)."""
        parts = urlsplit(url)
        target = _checked(parts.path + (f"?{parts.query}" if parts.query else ""), "request target", _NOT_IN_TARGET)
        head = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}"]
        head += [f"{name}: {_checked(str(value), name)}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body or b'')}")
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")

    def stream(self, url: str, headers: Mapping[str, str], connect_timeout: float,
               read_timeout: float) -> Generator[tuple[int, bytes], None, None]:  # fmt: skip
        """GET ``url`` on a connection of its own (a watch) and yield ``(status, body bytes)`` as they
        arrive: everything one read of the socket returns, the chunked framing removed, in one piece.

        Why not urllib3 for watches: it reads a chunked answer one chunk (one watch event) at a time,
        each read a blocking call that gives up the GIL and must take it back. While a runner creates
        thousands of pods from many threads, taking it back costs up to the interpreter's switch
        interval (5 ms) each time, so a watch fell seconds behind the events it was sent (issue 12's
        detection latency). Here one read takes whatever the server has sent, up to 256 KiB. Raises
        OSError or http.client.HTTPException; the generator's ``close`` closes the connection."""
        data = self._message("GET", url, None, headers)
        sock = self._new(connect_timeout)
        try:
            sock.sendall(data)
            sock.settimeout(read_timeout)
            answer = _Answer()
            told = False
            while not answer.done:
                chunk = sock.recv(_RECV_SIZE)
                if not chunk:
                    if not answer.headers_done:
                        raise http.client.RemoteDisconnected("the API server closed the watch without an answer")
                    raise http.client.IncompleteRead(b"")  # closed mid-answer: the watch did not end as sent
                try:
                    answer.parser.feed_data(chunk)
                except httptools.HttpParserError as exc:
                    raise http.client.HTTPException(f"unreadable answer from the API server: {exc}") from exc
                if answer.body:
                    piece = b"".join(answer.body)
                    answer.body.clear()
                    told = True
                    yield answer.parser.get_status_code(), piece
            if not told:  # an answer without a body (a watch that timed out with no event, an empty error)
                yield answer.status, b""
        finally:
            sock.close()

    @staticmethod
    def _answer(sock: socket.socket) -> _Answer:
        answer = _Answer()
        while not answer.done:
            chunk = sock.recv(_RECV_SIZE)
            if not chunk:
                if not answer.headers_done:
                    raise http.client.RemoteDisconnected("the API server closed the connection without an answer")
                if answer.framed:
                    raise http.client.IncompleteRead(b"".join(answer.body))
                # no length given: the body ends where the connection does (HTTP/1.1, RFC 9112 6.3)
                answer.status, answer.keep, answer.done = answer.parser.get_status_code(), False, True
                break
            try:
                answer.parser.feed_data(chunk)
            except httptools.HttpParserError as exc:
                raise http.client.HTTPException(f"unreadable answer from the API server: {exc}") from exc
        return answer

    def _put(self, sock: socket.socket) -> bool:
        with self._lock:
            if len(self._idle) >= self.maxsize:
                return False
            self._idle.append(sock)
            return True

    def _take(self, timeout: float) -> tuple[socket.socket, bool]:
        """A connection for one call, and whether it was kept from an earlier one."""
        while True:
            with self._lock:
                sock = self._idle.pop() if self._idle else None
            if sock is None:
                return self._new(timeout), False
            if not _readable(sock):
                sock.settimeout(timeout)
                return sock, True
            sock.close()  # closed by the server while idle (or data nobody asked for): not reusable

    def _new(self, timeout: float) -> socket.socket:
        raw = socket.create_connection((self.host, self.port), timeout)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is None:
                return raw
            return self.context.wrap_socket(raw, server_hostname=self.host)
        except BaseException:
            raw.close()
            raise


class Kube:
    """A connection to one API server. Thread-safe: the underlying connection pools are."""

    def __init__(self, configuration: Configuration, pool_size: int = 0) -> None:
        # The library sizes the pool by CPU count (10 on 2 cores); bulk calls run up to BULK_PARALLEL at once.
        # A caller with more threads than that passes ``pool_size``: past the pool's size every call opens a
        # new TLS connection and urllib3 discards it afterwards ("Connection pool is full").
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 2 * BULK_PARALLEL,
                                                    pool_size)  # fmt: skip
        self.configuration = configuration
        self._api = ApiClient(configuration)
        self._pool = self._api.rest_client.pool_manager
        self._connections: _Connections | None = None
        if _Connections.usable(configuration):
            try:
                self._connections = _Connections(configuration, configuration.connection_pool_maxsize)
            except (OSError, ValueError):  # unreadable certificates: urllib3 reports them on the first call, as before
                self._connections = None

    @classmethod
    def from_kubeconfig(cls, path: str | Path | None = None, context: str | None = None, pool_size: int = 0) -> Kube:
        cfg = Configuration()
        try:
            kube_config.load_kube_config(
                config_file=str(path) if path else None, context=context, client_configuration=cfg
            )
        except Exception as exc:  # the library raises bare ConfigException, IOError, yaml errors
            raise HarnessError(f"{path or '~/.kube/config'}: cannot load kubeconfig: {exc}") from exc
        return cls(cfg, pool_size)

    @classmethod
    def in_cluster(cls, pool_size: int = 0) -> Kube:
        """The API server of the cluster this process runs in, as its pod's ServiceAccount (the token and CA
        the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount; the token is read again as
        the kubelet rotates it)."""
        cfg = Configuration()
        try:
            kube_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except Exception as exc:  # ConfigException: not in a pod, or no token mounted
            raise UsageError(f"in-cluster configuration: {exc} (run in a pod, or give --kubeconfig)") from exc
        return cls(cfg, pool_size)

    # -- paths -------------------------------------------------------------------------------
    @staticmethod
    def path(
        kind: str | Kind, name: str | None = None, namespace: str | None = None, subresource: str | None = None
    ) -> str:
        k = kind_of(kind)
        base = f"/apis/{k.group}/{k.version}" if k.group else f"/api/{k.version}"
        if k.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{k.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base

    # -- raw ---------------------------------------------------------------------------------
    def _serialize(
        self, method: str, path: str, query: Mapping[str, Any] | None, headers: dict[str, str]
    ) -> tuple[str, dict[str, str]]:
        _, url, hdrs, _, _ = self._api.param_serialize(
            method, path, header_params=dict(headers), auth_settings=["BearerToken"]
        )
        if query:
            q = {k: ("true" if v is True else "false" if v is False else v) for k, v in query.items() if v is not None}
            url += "?" + urlencode(q)
        return url, hdrs

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Obj:
        """One API call; returns the decoded JSON answer or raises :class:`ApiError`."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        url, hdrs = self._serialize(method, path, query, headers)
        data = None if body is None else jsonfast.dumps(body)
        try:
            if self._connections is not None:
                status, raw = self._connections.request(method, url, data, hdrs, timeout)
            else:
                resp = self._pool.request(
                    method, url, body=data, headers=hdrs, timeout=urllib3.Timeout(total=timeout), retries=False
                )
                status, raw = resp.status, resp.data
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
            raise HarnessError(f"{method} {path}: cannot reach the API server: {exc}") from exc
        payload: Obj | None
        try:
            payload = jsonfast.loads(raw) if raw else {}
        except ValueError:
            payload = {"message": raw[:200].decode(errors="replace")}
        if status >= 400:
            raise ApiError(status, method, path, payload)
        return payload or {}

    # -- verbs -------------------------------------------------------------------------------
    def get(self, kind: str | Kind, name: str, namespace: str | None = None) -> Obj | None:
        try:
            return self.request("GET", self.path(kind, name, namespace))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def list(
        self,
        kind: str | Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Obj], str]:
        """Items and the list's resourceVersion (to start a watch from)."""
        out = self.request(
            "GET",
            self.path(kind, namespace=namespace),
            query={"labelSelector": label_selector, "fieldSelector": field_selector},
        )
        k = kind_of(kind)
        items = out.get("items", [])
        for item in items:  # lists omit kind/apiVersion on items; put them back for uniform handling
            item.setdefault("kind", k.kind)
            item.setdefault("apiVersion", k.api_version)
        return items, str(out.get("metadata", {}).get("resourceVersion", ""))

    def items(self, kind: str | Kind, namespace: str | None = None, label_selector: str | None = None) -> builtins.list[Obj]:
        return self.list(kind, namespace, label_selector)[0]

    def create(self, obj: Obj, namespace: str | None = None) -> Obj:
        k = kind_of(obj["kind"])
        ns = namespace or obj.get("metadata", {}).get("namespace")
        return self.request("POST", self.path(k, namespace=ns), body=obj)

    def apply(self, obj: Obj, field_manager: str = "draguard", force: bool = True) -> Obj:
        """Server-side apply: create or update to match ``obj``."""
        k = kind_of(obj["kind"])
        md = obj["metadata"]
        return self.request(
            "PATCH",
            self.path(k, md["name"], md.get("namespace")),
            body=obj,
            query={"fieldManager": field_manager, "force": force},
            content_type=_PATCH_TYPES["apply"],
        )

    def replace(self, obj: Obj, subresource: str | None = None) -> Obj:
        k = kind_of(obj["kind"])
        md = obj["metadata"]
        return self.request("PUT", self.path(k, md["name"], md.get("namespace"), subresource), body=obj)

    def patch(
        self,
        kind: str | Kind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> Obj:
        return self.request(
            "PATCH",
            self.path(kind, name, namespace, subresource),
            body=patch,
            content_type=_PATCH_TYPES[patch_type],
        )

    def delete(
        self,
        kind: str | Kind,
        name: str,
        namespace: str | None = None,
        grace_seconds: int | None = None,
        uid: str | None = None,
        propagation: str = "Background",
    ) -> bool:
        """Delete one object; False if it was already gone."""
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", self.path(kind, name, namespace), body=body)
            return True
        except ApiError as exc:
            if exc.not_found:
                return False
            raise

    def bulk(self, fn: Callable[[T], Any], items: Sequence[T], parallel: int = BULK_PARALLEL) -> builtins.list[Any]:
        """``fn(item)`` for every item with at most ``parallel`` calls in flight, submitted in order.

        Returns each call's result or the exception it raised, in item order (no error is lost, and
        one failure does not stop the others). One at a time the runner created 8-10 pods per second
        (issue 12); the API server takes many more when they arrive together.
        """
        if parallel <= 1 or len(items) <= 1:
            out: builtins.list[Any] = []
            for item in items:
                try:
                    out.append(fn(item))
                except Exception as exc:  # noqa: BLE001 - returned to the caller, who decides
                    out.append(exc)
            return out

        def call(item: T) -> Any:
            try:
                return fn(item)
            except Exception as exc:  # noqa: BLE001
                return exc

        with ThreadPoolExecutor(min(parallel, len(items)), thread_name_prefix="kube-bulk") as pool:
            return builtins.list(pool.map(call, items))

    def delete_collection(
        self, kind: str | Kind, label_selector: str, namespace: str | None = None, grace_seconds: int | None = None
    ) -> None:
        query: dict[str, Any] = {"labelSelector": label_selector}
        if grace_seconds is not None:
            query["gracePeriodSeconds"] = grace_seconds
        self.request("DELETE", self.path(kind, namespace=namespace), query=query)

    def watch(
        self,
        kind: str | Kind,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        stop: threading.Event | None = None,
    ) -> Iterator[tuple[str, Obj]]:
        """Yield ``(type, object)`` watch events, bookmarks included, until the server ends the watch.

        Raises :class:`ApiError` with status 410 when ``resource_version`` is too old; callers
        (see :meth:`list_watch`, the runner's observer) re-list then.
        """
        k = kind_of(kind)
        query = {
            "watch": True,
            "allowWatchBookmarks": True,
            "resourceVersion": resource_version,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "timeoutSeconds": timeout_seconds,
        }
        path = self.path(k, namespace=namespace)
        url, hdrs = self._serialize("GET", path, query, {"Accept": "application/json"})
        pieces: Iterator[bytes]
        close: Callable[[], None]
        try:
            if self._connections is not None:
                answer = self._connections.stream(url, hdrs, 10, timeout_seconds + 30)
                status, first = next(answer)
                if status >= 400:
                    body = first + b"".join(p for _, p in answer)
                    raise ApiError(status, "WATCH", path, jsonfast.loads(body or b"{}"))
                pieces, close = itertools.chain((first,), (p for _, p in answer)), answer.close
            else:
                resp = self._pool.request(
                    "GET",
                    url,
                    headers=hdrs,
                    preload_content=False,
                    timeout=urllib3.Timeout(connect=10, read=timeout_seconds + 30),
                    retries=False,
                )
                if resp.status >= 400:
                    raise ApiError(resp.status, "WATCH", path, jsonfast.loads(resp.data or b"{}"))
                pieces, close = resp.stream(65536, decode_content=True), resp.release_conn
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
            raise HarnessError(f"watch {path}: cannot reach the API server: {exc}") from exc
        try:
            buf = b""
            for chunk in pieces:
                if stop is not None and stop.is_set():
                    return
                buf = buf + chunk if buf else chunk
                if b"\n" not in chunk:  # buf held no whole line before this chunk
                    continue
                *lines, buf = buf.split(b"\n")  # one pass over the buffer, however many events it holds
                for line in lines:
                    if not line.strip():
                        continue
                    event = jsonfast.loads(line)
                    etype = event.get("type", "")
                    obj = event.get("object", {})
                    if etype == "ERROR":
                        raise ApiError(int(obj.get("code", 500)), "WATCH", path, obj)
                    obj.setdefault("kind", k.kind)
                    obj.setdefault("apiVersion", k.api_version)
                    yield etype, obj
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
            if stop is not None and stop.is_set():
                return
            raise HarnessError(f"watch {path}: connection lost: {exc}") from exc
        finally:
            close()

    def list_watch(
        self,
        kind: str | Kind,
        on_list: Callable[[builtins.list[Obj]], None],
        on_event: Callable[[str, Obj], None],
        stop: threading.Event,
        namespace: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 60,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        """Until ``stop``: list (``on_list`` gets every item), then watch from the list's resourceVersion
        (``on_event`` gets each ADDED, MODIFIED and DELETED); when the watch ends (the server's timeout, a
        410, a lost connection) list again, so nothing is missed. An error goes to ``on_error``, then a
        second's pause. A connection that hangs without an error is given up after ``timeout_seconds`` + 30."""
        while not stop.is_set():
            try:
                items, rv = self.list(kind, namespace, field_selector=field_selector)
                on_list(items)
                for etype, obj in self.watch(kind, namespace, resource_version=rv, field_selector=field_selector,
                                             timeout_seconds=timeout_seconds, stop=stop):  # fmt: skip
                    if etype in ("ADDED", "MODIFIED", "DELETED"):
                        on_event(etype, obj)
            except Exception as exc:  # noqa: BLE001 - reported to the caller; list again
                if stop.is_set():
                    return
                if on_error is not None:
                    on_error(exc)
                stop.wait(1.0)

    def create_namespace(
        self, name: str, labels: Mapping[str, str] | None = None, timeout: float = 30.0, wait: bool = True
    ) -> Obj:
        """Create a namespace and (unless ``wait`` is off) wait until pods can be created in it."""
        ns = self.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
        )
        if wait:
            self.wait_namespace_ready(name, timeout)
        return ns

    def wait_namespace_ready(self, name: str, timeout: float = 30.0) -> None:
        """Wait for the ``default`` ServiceAccount, without which the API refuses pods (seconds on a new cluster)."""
        deadline = time.monotonic() + timeout
        while self.get("ServiceAccount", "default", name) is None:
            if time.monotonic() > deadline:
                raise HarnessError(f"namespace {name}: no default ServiceAccount after {timeout:.0f}s")
            time.sleep(0.1)

    def server_version(self) -> Obj:
        return self.request("GET", "/version")

    def exec(self, pod: str, namespace: str, command: Sequence[str], container: str | None = None,
             timeout: float = 120.0) -> tuple[int, bytes, str]:  # fmt: skip
        """Run ``command`` in a pod's container through the API's exec (a websocket, as ``kubectl exec``):
        its exit status, its stdout as bytes and its stderr. HarnessError when the exec cannot start or
        outlasts ``timeout``."""
        from kubernetes.client import CoreV1Api
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream

        try:
            ws = stream(CoreV1Api(self._api).connect_get_namespaced_pod_exec, pod, namespace, command=list(command),
                        container=container, stdin=False, stdout=True, stderr=True, tty=False, _preload_content=False,
                        binary=True)  # fmt: skip
        except (ApiException, OSError, ValueError) as exc:
            raise HarnessError(f"exec in pod {namespace}/{pod}: {exc}") from exc
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        try:
            while ws.is_open():
                if time.monotonic() > deadline:
                    raise HarnessError(f"exec in pod {namespace}/{pod}: {' '.join(command)} still running after {timeout:.0f}s")
                ws.update(timeout=1)
                out += ws.read_stdout() if ws.peek_stdout() else b""
                err += ws.read_stderr() if ws.peek_stderr() else b""
            out += ws.read_stdout() if ws.peek_stdout() else b""
            err += ws.read_stderr() if ws.peek_stderr() else b""
            try:
                code = ws.returncode
            except (KeyError, IndexError, TypeError, ValueError):  # a Failure status with no exit code in it
                status = ws.read_channel(3)  # the error channel
                err += status if isinstance(status, bytes) else str(status).encode()
                code = -1
        finally:
            ws.close()
        return (code if code is not None else -1), bytes(out), err.decode(errors="replace")

    def feature_gates(self, timeout: float = 10.0) -> dict[str, bool]:
        """The API server's feature gates as its ``kubernetes_feature_enabled`` metric reports them.

        Empty when ``/metrics`` cannot be read (no permission, an old server). The metric is defined in
        k8s.io/component-base/metrics/prometheus/feature/metrics.go.
        """
        url, hdrs = self._serialize("GET", "/metrics", None, {"Accept": "text/plain"})
        try:
            resp = self._pool.request("GET", url, headers=hdrs, timeout=urllib3.Timeout(total=timeout), retries=False)
        except urllib3.exceptions.HTTPError:
            return {}
        if resp.status != 200:
            return {}
        gates: dict[str, bool] = {}
        for line in resp.data.decode(errors="replace").splitlines():
            if line.startswith("kubernetes_feature_enabled{"):
                labels, _, value = line.rpartition("}")
                name = next((part.split("=", 1)[1].strip('"') for part in labels[len("kubernetes_feature_enabled{"):].split(",")
                             if part.startswith("name=")), None)
                if name:
                    gates[name] = value.strip() not in ("0", "0.0")
        return gates

    def ready(self) -> bool:
        """True when ``/readyz`` answers 200."""
        url, hdrs = self._serialize("GET", "/readyz", None, {})
        try:
            return self._pool.request("GET", url, headers=hdrs, timeout=3.0, retries=False).status == 200
        except urllib3.exceptions.HTTPError:
            return False
