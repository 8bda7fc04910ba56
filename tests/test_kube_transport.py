"""Kube.request's kept connections when the server closes one just as a call goes out (an idle timeout)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator

import pytest
from kubernetes.client import Configuration

from draguard.harness.core.errors import HarnessError
from draguard.harness.kube import ApiError, Kube, _Connections


class _Listening:
    """Plain HTTP on 127.0.0.1: each connection served by :meth:`_serve` in its own thread, numbered from 1."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        n = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            n += 1
            threading.Thread(target=self._serve, args=(conn, n), daemon=True).start()

    def _serve(self, conn: socket.socket, n: int) -> None:
        raise NotImplementedError


class _Server(_Listening):
    """Answers the first ``answered`` requests of each connection, then reads the next one and closes
    without an answer, as a server closing an idle connection under a late call does."""

    def __init__(self, answered: int) -> None:
        self.answered = answered
        self.seen: list[tuple[int, str]] = []  # (connection number, request line)
        super().__init__()

    def _serve(self, conn: socket.socket, n: int) -> None:
        with conn, conn.makefile("rb") as f:
            for i in range(self.answered + 1):
                line = f.readline().decode().strip()
                if not line:
                    return
                length = 0
                while (header := f.readline()) not in (b"\r\n", b""):
                    if header.lower().startswith(b"content-length:"):
                        length = int(header.split(b":")[1])
                f.read(length)
                self.seen.append((n, line))
                if i == self.answered:
                    return  # closed, unanswered
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server(answered=1)
    yield s
    s.sock.close()


def _connections(port: int) -> _Connections:
    cfg = Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    return _Connections(cfg, maxsize=4)


def test_a_get_on_a_kept_connection_closed_unanswered_is_sent_once_more_on_a_new_one(server: _Server) -> None:
    conns = _connections(server.port)
    assert conns.request("GET", f"http://127.0.0.1:{server.port}/a", None, {}, 5) == (200, b"{}")
    assert conns.request("GET", f"http://127.0.0.1:{server.port}/b", None, {}, 5) == (200, b"{}")
    assert server.seen == [(1, "GET /a HTTP/1.1"), (1, "GET /b HTTP/1.1"), (2, "GET /b HTTP/1.1")]


def test_a_patch_sent_whole_is_not_sent_again(server: _Server) -> None:
    """It may have taken effect: the caller sees the failure, as with Go's transport."""
    conns = _connections(server.port)
    conns.request("PATCH", f"http://127.0.0.1:{server.port}/a", b"{}", {}, 5)
    with pytest.raises(http.client.RemoteDisconnected):
        conns.request("PATCH", f"http://127.0.0.1:{server.port}/b", b"{}", {}, 5)
    assert server.seen == [(1, "PATCH /a HTTP/1.1"), (1, "PATCH /b HTTP/1.1")]


def test_a_new_connection_closed_unanswered_is_not_retried() -> None:
    s = _Server(answered=0)
    try:
        with pytest.raises(http.client.RemoteDisconnected):
            _connections(s.port).request("GET", f"http://127.0.0.1:{s.port}/a", None, {}, 5)
        assert s.seen == [(1, "GET /a HTTP/1.1")]
    finally:
        s.sock.close()


class _Scripted(_Listening):
    """Reads each request and answers it with the next scripted bytes; after the script, closes. Records
    (connection number, request head, body)."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = list(answers)
        self.seen: list[tuple[int, bytes, bytes]] = []
        super().__init__()

    def _serve(self, conn: socket.socket, n: int) -> None:
        with conn, conn.makefile("rb") as f:
            while self.answers:
                head = b""
                while (line := f.readline()) not in (b"\r\n", b""):
                    head += line
                if not head:
                    return
                length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                               if h.lower().startswith(b"content-length:")), 0)  # fmt: skip
                self.seen.append((n, head, f.read(length)))
                answer = self.answers.pop(0)
                conn.sendall(answer)
                if b"Connection: close" in answer or not self.answers:
                    return


def _call(server: _Scripted, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes]:
    url = f"http://127.0.0.1:{server.port}/x?a=1"
    return _connections(server.port).request(method, url, body, {"Accept": "application/json"}, 5)


def test_head_and_body_go_out_as_one_request_with_its_length() -> None:
    s = _Scripted([b"HTTP/1.1 201 Created\r\nContent-Length: 7\r\n\r\n{\"a\":1}"])
    assert _call(s, "PATCH", b'{"b":2}') == (201, b'{"a":1}')
    (n, head, body), = s.seen
    lines = head.decode().split("\r\n")
    assert lines[0] == "PATCH /x?a=1 HTTP/1.1"
    assert f"Host: 127.0.0.1:{s.port}" in lines and "Accept: application/json" in lines and "Content-Length: 7" in lines
    assert body == b'{"b":2}'


def test_a_chunked_answer_is_put_together_and_the_connection_kept() -> None:
    s = _Scripted([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n",
                   b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"])  # fmt: skip
    conns = _connections(s.port)
    url = f"http://127.0.0.1:{s.port}/x"
    assert conns.request("GET", url, None, {}, 5) == (200, b'{"a":1}')
    assert conns.request("GET", url, None, {}, 5) == (200, b"{}")
    assert [n for n, _, _ in s.seen] == [1, 1]  # one connection for both


def test_an_answer_that_says_close_is_not_kept() -> None:
    s = _Scripted([b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
                   b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]"])  # fmt: skip
    conns = _connections(s.port)
    url = f"http://127.0.0.1:{s.port}/x"
    assert conns.request("GET", url, None, {}, 5) == (200, b"{}")
    assert not conns._idle
    assert conns.request("GET", url, None, {}, 5) == (200, b"[]")
    assert [n for n, _, _ in s.seen] == [1, 2]


def test_a_body_without_length_ends_with_the_connection() -> None:
    s = _Scripted([b"HTTP/1.1 500 Internal Server Error\r\n\r\n" + b"x" * 300_000])
    status, body = _call(s)
    assert status == 500 and body == b"x" * 300_000


def test_an_interim_answer_is_passed_over() -> None:
    s = _Scripted([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\n{}"])
    assert _call(s, "POST", b"{}") == (409, b"{}")


def test_a_body_cut_short_is_an_error_not_an_answer() -> None:
    s = _Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}"])
    with pytest.raises(http.client.IncompleteRead):
        _call(s)


def test_garbage_is_an_error() -> None:
    s = _Scripted([b"SMTP ready\r\n\r\n"])
    with pytest.raises(http.client.HTTPException, match="unreadable answer"):
        _call(s)


def test_a_control_character_in_a_header_or_path_is_refused_before_sending() -> None:
    s = _Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"])
    conns = _connections(s.port)
    with pytest.raises(http.client.InvalidURL):
        conns.request("GET", f"http://127.0.0.1:{s.port}/x HTTP/1.1\x00", None, {}, 5)
    with pytest.raises(http.client.InvalidURL) as refused:
        conns.request("GET", f"http://127.0.0.1:{s.port}/x", None, {"Authorization": "Bearer secret\r\nEvil: 1"}, 5)
    assert "Authorization" in str(refused.value) and "secret" not in str(refused.value)
    assert s.seen == []


def _kube(port: int) -> Kube:
    cfg = Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    return Kube(cfg)


def test_watch_events_are_cut_at_newlines_whatever_the_chunks() -> None:
    """Two events in one chunk, one event over two chunks, blank lines, the last one without its newline:
    each event comes out once, whole, in order, with kind and apiVersion filled in."""
    a = b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}'
    b = b'{"type":"MODIFIED","object":{"metadata":{"name":"b","annotations":{"x":"\xc3\xa9"}}}}'
    c = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}'
    chunks = [a + b"\n" + b[:20], b[20:] + b"\n\n", c, b"\n"]
    body = b"".join(b"%x\r\n%s\r\n" % (len(x), x) for x in chunks) + b"0\r\n\r\n"
    s = _Scripted([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body])
    events = list(_kube(s.port).watch("Pod", namespace="ns", timeout_seconds=5))
    assert [(t, o["metadata"].get("name")) for t, o in events] == [("ADDED", "a"), ("MODIFIED", "b"), ("BOOKMARK", None)]
    assert events[1][1]["metadata"]["annotations"] == {"x": "é"}
    assert all(o["kind"] == "Pod" and o["apiVersion"] == "v1" for _, o in events)
    head = s.seen[0][1].decode()
    assert head.startswith("GET /api/v1/namespaces/ns/pods?") and "watch=true" in head


def test_a_watch_error_event_is_an_api_error() -> None:
    err = b'{"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old resource version"}}\n'
    s = _Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(err), err)])
    with pytest.raises(ApiError) as raised:
        list(_kube(s.port).watch("Pod", timeout_seconds=5))
    assert raised.value.status == 410


def test_a_request_body_goes_out_as_utf8_json_with_its_byte_length() -> None:
    s = _Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n{\"note\":\"\xc3\xa9t\xc3\xa9\"}"])
    assert _kube(s.port).request("PATCH", "/api/v1/x", {"note": "été", "n": 2**70}) == {"note": "été"}
    (_, head, body), = s.seen
    assert json.loads(body) == {"note": "été", "n": 2**70}
    assert f"Content-Length: {len(body)}" in head.decode()


def test_a_watch_refused_with_a_status_is_an_api_error_naming_it() -> None:
    body = b'{"kind":"Status","code":403,"message":"pods is forbidden"}'
    s = _Scripted([b"HTTP/1.1 403 Forbidden\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)])
    with pytest.raises(ApiError) as raised:
        list(_kube(s.port).watch("Pod", timeout_seconds=5))
    assert raised.value.status == 403 and "forbidden" in str(raised.value)


def test_a_watch_cut_off_mid_answer_is_a_lost_connection_after_the_events_before_it() -> None:
    a = b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n'
    s = _Scripted([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(a), a)])
    seen = []
    with pytest.raises(HarnessError, match="connection lost"):
        for _, obj in _kube(s.port).watch("Pod", timeout_seconds=5):
            seen.append(obj["metadata"]["name"])
    assert seen == ["a"]


def test_a_watch_that_times_out_without_events_ends_quietly() -> None:
    s = _Scripted([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"])
    assert list(_kube(s.port).watch("Pod", timeout_seconds=5)) == []


class _Trickle(_Listening):
    """Sends a chunked watch answer's events one at a time, each only once the test asks for it."""

    def __init__(self, events: list[bytes]) -> None:
        self.events = events
        self.next = threading.Semaphore(0)
        super().__init__()

    def _serve(self, conn: socket.socket, n: int) -> None:
        with conn, conn.makefile("rb") as f:
            while f.readline() not in (b"\r\n", b""):
                pass
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for e in self.events:
                self.next.acquire()
                conn.sendall(b"%x\r\n%s\r\n" % (len(e), e))
            conn.sendall(b"0\r\n\r\n")


@pytest.mark.parametrize("transport", ["own", "urllib3"])
def test_each_watch_event_comes_out_as_soon_as_it_arrives(transport: str) -> None:
    """Not held until more data or the end of the answer: the runner judges what it has seen."""
    events = [b'{"type":"ADDED","object":{"metadata":{"name":"%d"}}}\n' % i for i in range(3)]
    s = _Trickle(events)
    kube = _kube(s.port)
    if transport == "urllib3":
        kube._connections = None  # a kubeconfig with a proxy or socket options: urllib3 carries the watch
    stream = kube.watch("Pod", timeout_seconds=5)
    for i in range(3):
        s.next.release()
        assert next(stream)[1]["metadata"]["name"] == str(i)
    assert list(stream) == []
