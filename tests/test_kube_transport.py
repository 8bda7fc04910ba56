"""Kube.request's kept connections when the server closes one just as a call goes out (an idle timeout)."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator

import pytest
from kubernetes.client import Configuration

from draguard.harness.kube import _Connections


class _Server:
    """Plain HTTP on 127.0.0.1: answers the first ``answered`` requests of each connection, then reads the
    next one and closes without an answer, as a server closing an idle connection under a late call does."""

    def __init__(self, answered: int) -> None:
        self.answered = answered
        self.seen: list[tuple[int, str]] = []  # (connection number, request line)
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
