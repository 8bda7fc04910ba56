"""The sanity suite against sockets that do not behave: nothing there, garbage, a hang, and a driver
that serves its health stream without advertising it. No cluster: the API server is unreachable,
so the checks that need claims end as errors with the reason, and the suite still ends and reports."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.conformance.sanity import SanityConfig, run_sanity
from draguard.harness.driver import service
from draguard.harness.driver.service import PluginServer
from draguard.harness.grpcapi.plugin import SUPPORTED_VERSIONS
from draguard.harness.core.paths import DEFAULT_DRIVER

from .conftest import NODE


def _config(root: Path, kubeconfig: Path, registration: Path, **kw: object) -> SanityConfig:
    return SanityConfig(registration_socket=registration, kubeconfig=kubeconfig, driver=DEFAULT_DRIVER,
                        node=NODE, call_timeout=1.0, check_timeout=20.0, **kw)  # type: ignore[arg-type]


def _statuses(result: object) -> dict[str, str]:
    return {c.id: c.status for c in result.checks}  # type: ignore[attr-defined]


def test_an_unreachable_socket_fails_the_registration_checks_and_the_suite_still_reports_every_check(
    root: Path, kubeconfig: Path
) -> None:
    start = time.monotonic()
    result = run_sanity(_config(root, kubeconfig, root / "nothing-reg.sock"))
    assert time.monotonic() - start < 60
    statuses = _statuses(result)
    assert statuses["sanity.registration.info"] == "failed"
    reason = next(c.reason for c in result.checks if c.id == "sanity.registration.info")
    assert "nothing-reg.sock" in reason and "UNAVAILABLE" in reason
    assert "passed" not in statuses.values(), {k: v for k, v in statuses.items() if v == "passed"}
    assert not result.ok
    needs_claims = [c for c in result.checks if c.id == "sanity.prepare.idempotent"][0]
    assert needs_claims.status == "error" and "Connection refused" in needs_claims.reason


def _serve(path: Path, answer: bytes | None) -> socket.socket:
    """A unix socket that answers ``answer`` to whatever comes (None: accepts and never answers)."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(16)
    held: list[socket.socket] = []

    def loop() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            if answer is not None:
                try:
                    conn.sendall(answer)
                    conn.close()
                except OSError:
                    pass

    threading.Thread(target=loop, daemon=True).start()
    return srv


@pytest.mark.parametrize("answer", [b"HTTP/1.1 200 OK\r\n\r\nnot grpc at all" * 20, None], ids=["garbage", "hang"])
def test_a_socket_that_answers_garbage_or_hangs_fails_checks_within_the_call_timeout(
    root: Path, kubeconfig: Path, answer: bytes | None, capsys: pytest.CaptureFixture[str]
) -> None:
    reg = root / "bad-reg.sock"
    srv = _serve(reg, answer)
    try:
        start = time.monotonic()
        code = main(["sanity", "--registration-socket", str(reg), "--plugin-socket", str(reg), "--kubeconfig",
                     str(kubeconfig), "--driver", DEFAULT_DRIVER, "--node", NODE, "--call-timeout", "1",
                     "--out", str(root / "out"), "--check", "sanity.registration.*", "--check", "sanity.prepare.empty-request"])
        took = time.monotonic() - start
    finally:
        srv.close()
    out = capsys.readouterr().out
    assert code == 1, out
    assert took < 30, f"took {took:.0f}s"
    verdict = json.loads((root / "out" / "verdict.json").read_text())
    statuses = {c["id"]: c["status"] for c in verdict["checks"]}
    assert statuses["sanity.registration.info"] == "failed"
    assert statuses["sanity.prepare.empty-request"] == "failed"
    assert "FAIL  sanity.registration.info" in out


def test_a_health_stream_served_but_not_advertised_fails_the_advertised_check(
    root: Path, kubeconfig: Path, fake_server: PluginServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(root, kubeconfig, fake_server.registration_socket,
                     select=("sanity.health.advertised", "sanity.registration.*"))
    assert _statuses(run_sanity(config)) == {
        "sanity.health.advertised": "passed",
        "sanity.registration.endpoint": "passed",
        "sanity.registration.info": "passed",
        "sanity.registration.notify": "passed",
        "sanity.registration.serves-advertised": "passed",
        "sanity.registration.versions": "passed",
    }
    monkeypatch.setattr(service, "ADVERTISED", SUPPORTED_VERSIONS)  # what the fake driver did before the fix
    result = run_sanity(config)
    (check,) = [c for c in result.checks if c.id == "sanity.health.advertised"]
    assert check.status == "failed"
    assert "v1.DRAResourceHealth" in check.reason and "v1alpha1.DRAResourceHealth" in check.reason


def test_with_trace_every_call_goes_through_the_interposer_and_is_recorded(
    root: Path, kubeconfig: Path, fake_server: PluginServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["sanity", "--registration-socket", str(fake_server.registration_socket), "--kubeconfig",
                 str(kubeconfig), "--driver", DEFAULT_DRIVER, "--node", NODE, "--out", str(root / "out"),
                 "--check", "sanity.registration.*", "--check", "sanity.*.empty-request"])
    assert code == 0, capsys.readouterr()
    calls = [json.loads(line) for line in (root / "out" / "grpc-calls.jsonl").read_text().splitlines()]
    methods = {c["method"] for c in calls}
    assert {"NodePrepareResources", "NodeUnprepareResources", "NotifyRegistrationStatus"} <= methods
    assert all(c["status"] == "OK" for c in calls)
    verdict = json.loads((root / "out" / "verdict.json").read_text())
    assert verdict["environment"]["trace"] and verdict["ok"] is True
