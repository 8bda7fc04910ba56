"""The sanity suite's engine, against the fake driver's servers in process (no API server needed):
a check that cannot start is skipped before it starts, a driver left down fails the check that left
it down and is restored or stops the suite, a call that ran out of its deadline is named as the
cause, ``{node}`` of ``--restart-command`` is the driver's node, and ``--capabilities`` selects checks."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from draguard.conformance.sanity import CommandHooks, FakeDriverHooks, SanityConfig, open_context, run_sanity
from draguard.conformance.sanity.capabilities import Capabilities, load_capabilities
from draguard.conformance.sanity.suite import SanityContext, run_check
from draguard.harness.core.errors import UsageError
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs
from draguard.harness.core.registry import Entry
from draguard.harness.driver.fault_control import FaultControl
from draguard.harness.driver.mutants import get_mutant
from draguard.harness.driver.plugin import FakeDriver
from draguard.harness.driver.service import PluginServer
from draguard.harness.driver.topology import generic, resolve

from .conftest import NODE, _NoClaims


def _server(root: Path) -> PluginServer:
    dirs = NodeDirs(root, NODE)
    driver = FakeDriver(driver=DEFAULT_DRIVER, node=NODE, dirs=dirs, inventory=resolve(generic(2), NODE),
                        claims=_NoClaims(), mutant=get_mutant(None), faults=FaultControl(dirs.plugin_dir(DEFAULT_DRIVER)))
    srv = PluginServer(driver, dirs.dra_socket(DEFAULT_DRIVER), dirs.registration_socket(DEFAULT_DRIVER), 0.05)
    srv.start()
    return srv


def _config(srv: PluginServer, kubeconfig: Path, **kw: Any) -> SanityConfig:
    return SanityConfig(registration_socket=srv.registration_socket, kubeconfig=kubeconfig, driver=DEFAULT_DRIVER,
                        node=NODE, **kw)


def _entry(name: str, fn: Any, **meta: Any) -> Entry[Any]:
    """A check that is not registered (the registry is global; these exist for one test only)."""
    return Entry(name, f"test check {name}", fn, meta=MappingProxyType({"source": "test", "area": "test", **meta}))


def _statuses(result: Any) -> dict[str, tuple[str, str]]:
    return {c.id: (c.status, c.reason) for c in result.checks}


# -- no cascades ------------------------------------------------------------------------------------


def test_checks_whose_hooks_cannot_be_done_are_skipped_before_they_start_with_the_reason(
    fake_server: PluginServer, kubeconfig: Path, root: Path
) -> None:
    # The fake driver's hooks without a process handle cannot restart it: the restart checks (one of
    # which crashes the driver first) must not start. Before, they started and errored, and the
    # crash left the driver down for every check after them.
    hooks = FakeDriverHooks(root, NODE, DEFAULT_DRIVER, process=None)
    result = run_sanity(_config(fake_server, kubeconfig, select=("sanity.restart.*",)), hooks)
    got = _statuses(result)
    assert set(got) == {"sanity.restart.interrupted-prepare", "sanity.restart.state-survives",
                        "sanity.restart.corrupt-checkpoint"}
    for check, (status, reason) in got.items():
        hook = "restart_with_corrupt_checkpoint" if check.endswith("corrupt-checkpoint") else "restart"
        assert status == "skipped" and f"'{hook}' hook" in reason and "not started by the suite's caller" in reason
    assert all(c.duration == 0 for c in result.checks)  # never started: no claim, no crash
    assert "stopped" not in result.environment


def test_not_blocked_without_its_hooks_is_skipped_not_failed_by_a_plain_call(
    fake_server: PluginServer, kubeconfig: Path
) -> None:
    result = run_sanity(_config(fake_server, kubeconfig, select=("sanity.concurrency.not-blocked",)),
                        CommandHooks("true"))
    ((status, reason),) = _statuses(result).values()
    assert status == "skipped", reason
    assert "'slow_prepare' hook" in reason and "'slow_release' hook" in reason


def test_a_driver_left_down_fails_that_check_alone_and_the_suite_stops_naming_the_cause(
    root: Path, kubeconfig: Path
) -> None:
    srv = _server(root)
    try:
        with open_context(_config(srv, kubeconfig), None) as ctx:
            assert ctx.answered_at_start
            killed = run_check(ctx, _entry("sanity.test.kills", lambda c: srv.stop(grace=0)))
            assert killed.status == "failed"
            assert "stopped answering during this check" in killed.reason
            assert "sanity.test.kills" in ctx.stopped and "'restart' hook" in ctx.stopped
            after = run_check(ctx, _entry("sanity.test.after", lambda c: None))
            assert (after.status, after.reason.startswith("not run: ")) == ("skipped", True)
    finally:
        srv.stop(grace=0)


class _Restarts:
    """A restart hook that brings the in-process driver back (a new server on the same sockets)."""

    def __init__(self, root: Path, srv: PluginServer) -> None:
        self.root, self.srv, self.restarts = root, srv, 0

    def restart(self) -> None:
        self.srv.stop(grace=0)
        self.srv = _server(self.root)
        self.restarts += 1

    def clear(self) -> None:
        pass


def test_a_driver_left_down_is_restarted_by_the_suite_and_the_next_checks_run(root: Path, kubeconfig: Path) -> None:
    hooks = _Restarts(root, _server(root))
    try:
        with open_context(_config(hooks.srv, kubeconfig), hooks) as ctx:
            killed = run_check(ctx, _entry("sanity.test.kills", lambda c: hooks.srv.stop(grace=0)))
            assert killed.status == "failed" and "stopped answering" in killed.reason
            assert any("restarted the driver" in e.message for e in killed.evidence)
            assert hooks.restarts == 1 and not ctx.stopped

            def answers(c: SanityContext) -> None:
                c.client().get_info(timeout=2)

            assert run_check(ctx, _entry("sanity.test.after", answers)).status == "passed"
    finally:
        hooks.srv.stop(grace=0)


def test_run_sanity_records_the_stop_and_the_checks_not_run(root: Path, kubeconfig: Path) -> None:
    from draguard.conformance.sanity import suite

    srv = _server(root)
    entries = [_entry("sanity.test.kills", lambda c: srv.stop(grace=0)), _entry("sanity.test.a", lambda c: None),
               _entry("sanity.test.b", lambda c: None)]
    real = suite.sanity_checks
    suite.sanity_checks = lambda select=(): entries  # type: ignore[assignment]
    try:
        result = run_sanity(_config(srv, kubeconfig), None)
    finally:
        suite.sanity_checks = real  # type: ignore[assignment]
        srv.stop(grace=0)
    assert [c.id for c in result.checks] == ["sanity.test.kills"]  # the others are not reported as failures
    assert result.checks[0].status == "failed"
    assert result.environment["notRun"] == ["sanity.test.a", "sanity.test.b"]
    assert "left down by sanity.test.kills" in result.environment["stopped"]


# -- timeouts ---------------------------------------------------------------------------------------


@pytest.fixture
def silent_socket(root: Path) -> Iterator[Path]:
    """A unix socket that accepts connections and never answers (a driver stuck in every call)."""
    path = root / "silent.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(16)
    yield path
    s.close()


def test_a_call_that_runs_out_of_its_deadline_is_named_as_the_cause(
    fake_server: PluginServer, kubeconfig: Path, silent_socket: Path
) -> None:
    config = _config(fake_server, kubeconfig, plugin_socket=silent_socket, call_timeout=0.5,
                     select=("sanity.prepare.empty-request",))
    start = time.monotonic()
    ((status, reason),) = _statuses(run_sanity(config)).values()
    assert time.monotonic() - start < 30
    assert status == "failed"
    assert reason.startswith("timed out: NodePrepareResources did not answer within 0.5s"), reason


# -- {node} of --restart-command ---------------------------------------------------------------------


def test_the_restart_command_gets_the_drivers_node_in_the_sanity_suite(
    fake_server: PluginServer, kubeconfig: Path, root: Path
) -> None:
    out = root / "restarted"
    hooks = CommandHooks(f"echo {{node}} > {out}")  # no node given: the suite finds it (config.node here)
    with open_context(_config(fake_server, kubeconfig), hooks) as ctx:
        assert not ctx.hook_unavailable("restart")
        ctx.hook("restart")()
    assert out.read_text().strip() == NODE


def test_a_restart_command_naming_node_without_a_known_node_cannot_be_done(root: Path) -> None:
    hooks = CommandHooks(f"echo {{node}} > {root / 'x'}")
    assert "{node}" in hooks.unavailable("restart")
    with pytest.raises(UsageError, match="give --node"):
        hooks.restart()
    assert not (root / "x").exists()


# -- capabilities -----------------------------------------------------------------------------------


def test_checks_for_an_undeclared_capability_are_not_applicable(
    fake_server: PluginServer, kubeconfig: Path, root: Path
) -> None:
    caps = root / "caps.yaml"
    caps.write_text("healthStream: false\nsharingStrategies: [TimeSlicing]\n")
    config = _config(fake_server, kubeconfig, capabilities=load_capabilities(caps),
                     select=("sanity.health.*", "sanity.unprepare.sharing-torn-down"))
    got = _statuses(run_sanity(config, FakeDriverHooks(root, NODE)))
    na = {k for k, (s, _) in got.items() if s == "not-applicable"}
    assert na == {"sanity.health.stream-opens", "sanity.health.published-devices", "sanity.health.reports-unhealthy",
                  "sanity.unprepare.sharing-torn-down"}
    assert all(str(caps) in got[k][1] for k in na)
    # Serving implies advertising whatever is declared: that check still runs.
    assert got["sanity.health.advertised"][0] == "passed"


def test_declared_capabilities_let_their_checks_run(fake_server: PluginServer, kubeconfig: Path, root: Path) -> None:
    caps = root / "caps.json"
    caps.write_text('{"healthStream": true, "sharingStrategies": ["MPS"]}')
    declared = load_capabilities(caps)
    assert declared == Capabilities(frozenset({"health-stream", "sharing-mps"}), str(caps))
    got = _statuses(run_sanity(_config(fake_server, kubeconfig, capabilities=declared,
                                       select=("sanity.health.stream-opens",))))
    assert got["sanity.health.stream-opens"][0] == "passed"


@pytest.mark.parametrize(("text", "message"), [
    ("healthStream: maybe\n", "healthStream: Input should be a valid boolean"),
    ("sharingStrategies: [Magic]\n", "sharingStrategies.0"),
    ("gpus: 3\n", "gpus: Extra inputs are not permitted"),
    ("- a\n", "expected a mapping"),
])
def test_a_bad_capabilities_file_is_one_line_naming_the_file_and_field(root: Path, text: str, message: str) -> None:
    path = root / "caps.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as exc:
        load_capabilities(path)
    assert str(exc.value).startswith(f"--capabilities {path}: ") and message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_the_fake_drivers_hooks_pass_the_node_to_a_restart_command_as_certify_builds_them(
    fake_server: PluginServer, kubeconfig: Path, root: Path
) -> None:
    out = root / "restarted"
    hooks = FakeDriverHooks(root, NODE, DEFAULT_DRIVER, process=CommandHooks(f"echo {{node}} > {out}"))
    with open_context(_config(fake_server, kubeconfig), hooks) as ctx:
        ctx.hook("restart")()
    assert out.read_text().strip() == NODE


@pytest.mark.parametrize("flag", ["--registration-socket", "--plugin-socket"])
def test_the_cli_refuses_a_socket_path_with_no_socket_before_anything_starts(
    fake_server: PluginServer, kubeconfig: Path, root: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from draguard.cli.main import main

    sockets = {"--registration-socket": str(fake_server.registration_socket), "--plugin-socket": str(fake_server.dra_socket)}
    sockets[flag] = str(root / "typo.sock")
    code = main(["sanity", *(a for kv in sockets.items() for a in kv), "--kubeconfig", str(kubeconfig),
                 "--driver", DEFAULT_DRIVER, "--node", NODE, "--out", str(root / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{flag} {root / 'typo.sock'}: no such socket" in err and "Traceback" not in err
    assert not (root / "out" / "verdict.json").exists()
