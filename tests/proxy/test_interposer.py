"""The interposer between a node and a real plugin socket: pass-through, recording, each fault action."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from draguard.cli.main import main
from draguard.harness.core.errors import UsageError
from draguard.harness.grpcapi.plugin import ClaimRef, ClaimResult, PluginCallError, PluginClient
from draguard.harness.nodes.plugins import NodePlugins
from draguard.harness.nodes.stubplugin import StubPlugin
from draguard.harness.core.paths import NodeDirs
from draguard.harness.invariants import PreparedDevice
from draguard.harness.proxy import FaultRule, FaultSet, Interposer, driver_call, read_calls

DRIVER = "gpu.draguard.dev"
A, B = ClaimRef(namespace="ns", name="a", uid="uid-a"), ClaimRef(namespace="ns", name="bad-1", uid="uid-bad")


@pytest.fixture
def plugin(root: Path) -> Iterator[StubPlugin]:
    with StubPlugin(root / "plugins", "n1") as p:
        yield p


@pytest.fixture
def faults() -> FaultSet:
    return FaultSet()


@pytest.fixture
def proxy(root: Path, plugin: StubPlugin, faults: FaultSet) -> Iterator[Interposer]:
    with Interposer(root / "plugins", root / "nodes", faults, interval=0.1) as interposer:
        yield interposer


def client(root: Path, timeout: float = 5.0) -> PluginClient:
    plugins = NodePlugins("n1", NodeDirs(root / "nodes", "n1").registry, call_timeout=timeout)
    deadline = time.monotonic() + 5
    with ThreadPoolExecutor(1) as pool:
        while plugins.client(DRIVER) is None:
            assert time.monotonic() < deadline, "plugin never registered through the proxy"
            plugins.scan(pool.submit)
            time.sleep(0.05)
    c = plugins.client(DRIVER)
    assert c is not None
    return c


def calls(proxy: Interposer, method: str | None = None) -> list[dict]:
    return [c for c in read_calls(proxy.calls_file("n1")) if method is None or c["method"] == method]


def test_registration_goes_through_the_proxy_and_points_the_node_at_the_proxy_socket(
    root: Path, plugin: StubPlugin, proxy: Interposer
) -> None:
    c = client(root)
    assert str(c.dra_socket) == str(NodeDirs(proxy.node_root, "n1").dra_socket(DRIVER))
    assert plugin.registrations == [(True, "")]
    assert [x["method"] for x in calls(proxy)] == ["GetInfo", "NotifyRegistrationStatus"]


def test_dra_calls_pass_through_unchanged_and_are_recorded_with_claims_and_timing(
    root: Path, plugin: StubPlugin, proxy: Interposer
) -> None:
    result = client(root).prepare([A])
    assert result["uid-a"].error == "" and result["uid-a"].devices[0].device_name == "dev-a"
    assert plugin.count("NodePrepareResources", "a") == 1
    (rec,) = calls(proxy, "NodePrepareResources")
    assert rec["claims"] == [{"namespace": "ns", "name": "a", "uid": "uid-a"}]
    assert rec["status"] == "OK" and rec["fault"] is None and rec["node"] == "n1" and rec["driver"] == DRIVER
    assert rec["service"] == "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin" and rec["duration_s"] >= 0


def test_an_error_fault_on_one_claim_fails_the_call_without_reaching_the_plugin(
    root: Path, plugin: StubPlugin, proxy: Interposer, faults: FaultSet
) -> None:
    faults.set_rules([FaultRule(action="error", method="NodePrepareResources", claim="bad-*", message="boom")])
    c = client(root)
    with pytest.raises(PluginCallError, match="UNAVAILABLE: boom"):
        c.prepare([A, B])
    assert plugin.calls == []
    c.prepare([A])  # other claims are untouched
    recs = calls(proxy, "NodePrepareResources")
    assert [(r["status"], r["fault"]) for r in recs] == [("UNAVAILABLE", "error"), ("OK", None)]


def test_a_claim_error_answers_an_error_for_that_claim_and_prepares_the_others(
    root: Path, plugin: StubPlugin, proxy: Interposer, faults: FaultSet
) -> None:
    faults.set_rules([FaultRule(action="claim-error", claim="uid-bad", message="no such device")])
    result = client(root).prepare([A, B])
    assert result["uid-bad"] == ClaimResult((), "no such device")
    assert result["uid-a"].error == ""
    assert [[r.name for r in call.claims] for call in plugin.calls] == [["a"]]
    assert calls(proxy, "NodePrepareResources")[0]["claim_errors"] == {"uid-bad": "no such device"}


def test_a_delay_fault_holds_the_call_then_forwards_it(
    root: Path, plugin: StubPlugin, proxy: Interposer, faults: FaultSet
) -> None:
    faults.set_rules([FaultRule(action="delay", method="NodeUnprepareResources", seconds=0.3)])
    c = client(root)
    started = time.monotonic()
    assert c.unprepare([A]) == {"uid-a": ""}
    assert time.monotonic() - started >= 0.3
    assert plugin.count("NodeUnprepareResources", "a") == 1
    assert calls(proxy, "NodeUnprepareResources")[0]["duration_s"] >= 0.3


def test_a_hang_fault_never_answers_until_the_caller_gives_up(
    root: Path, plugin: StubPlugin, proxy: Interposer, faults: FaultSet
) -> None:
    faults.set_rules([FaultRule(action="hang", method="NodePrepareResources")])
    c = client(root, timeout=0.5)
    with pytest.raises(PluginCallError, match="DEADLINE_EXCEEDED"):
        c.prepare([A])
    assert plugin.calls == []


def test_a_duplicate_fault_calls_the_plugin_twice(
    root: Path, plugin: StubPlugin, proxy: Interposer, faults: FaultSet
) -> None:
    faults.set_rules([FaultRule(action="duplicate", method="NodePrepareResources", count=1)])
    c = client(root)
    c.prepare([A])
    c.prepare([A])
    assert plugin.count("NodePrepareResources", "a") == 3
    assert [r["kind"] for r in calls(proxy, "NodePrepareResources")] == ["duplicate", "call", "call"]


def test_a_stale_retry_replays_a_prepare_after_the_unprepare(
    root: Path, plugin: StubPlugin, proxy: Interposer, faults: FaultSet
) -> None:
    faults.set_rules([FaultRule(action="stale-retry", method="NodePrepareResources", seconds=0.3)])
    c = client(root)
    c.prepare([A])
    c.unprepare([A])
    time.sleep(0.6)
    assert [call.method for call in plugin.calls] == [
        "NodePrepareResources", "NodeUnprepareResources", "NodePrepareResources"
    ]
    assert "uid-a" in plugin.prepared  # the stale retry left the device prepared: what a driver must withstand
    assert [r["kind"] for r in calls(proxy, "NodePrepareResources")] == ["call", "stale-retry"]


def test_the_devices_a_prepare_answered_are_recorded_per_claim_and_read_back_as_the_drivers_answers(
    root: Path, plugin: StubPlugin, proxy: Interposer, faults: FaultSet
) -> None:
    plugin.fail = {"bad-*": "no such device"}
    c = client(root)
    c.prepare([A, B])
    c.unprepare([A])
    faults.set_rules([FaultRule(action="error", method="NodePrepareResources", message="boom")])
    with pytest.raises(PluginCallError):
        c.prepare([A])
    ok, failed = calls(proxy, "NodePrepareResources")
    answer = {"pool": "n1", "device": "dev-a", "requests": ["req"], "cdi_device_ids": [f"{DRIVER}/gpu=uid-a"]}
    assert ok["answers"] == {"uid-a": [answer]} and ok["claim_errors"] == {"uid-bad": "no such device"}
    assert "answers" not in failed and "answers" not in calls(proxy, "NodeUnprepareResources")[0]
    got = [driver_call(r, offset=-r["ts"]) for r in calls(proxy)]
    prepare, unprepare, refused = [g for g in got if g.method.startswith("Node")]
    assert prepare.answers == {"uid-a": (PreparedDevice("n1", "dev-a", ("req",), (f"{DRIVER}/gpu=uid-a",)),)}
    assert prepare.time == 0 and prepare.claims == (("ns", "a", "uid-a"), ("ns", "bad-1", "uid-bad"))
    assert unprepare.answers is None and refused.answers is None and refused.injected == "error"


def test_a_v1beta1_prepare_and_the_claims_a_claim_error_withheld_are_recorded_alike(
    root: Path, plugin: StubPlugin, proxy: Interposer, faults: FaultSet
) -> None:
    client(root)  # registered through the proxy
    faults.set_rules([FaultRule(action="claim-error", claim="uid-bad", message="withheld")])
    with PluginClient(NodeDirs(root / "nodes", "n1").dra_socket(DRIVER), version="v1beta1") as beta:
        beta.prepare([A, B])
    (rec,) = calls(proxy, "NodePrepareResources")
    assert rec["service"] == "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"
    assert list(rec["answers"]) == ["uid-a"] and rec["answers"]["uid-a"][0]["device"] == "dev-a"
    assert rec["claim_errors"] == {"uid-bad": "withheld"}


def test_a_record_written_before_answers_were_kept_reads_as_answers_not_recorded() -> None:
    old = {"ts": 100.0, "node": "n1", "driver": DRIVER, "service": "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
           "method": "NodePrepareResources", "kind": "call", "claims": [{"namespace": "ns", "name": "a", "uid": "uid-a"}],
           "duration_s": 0.01, "status": "OK", "error": "", "claim_errors": {}, "fault": None}
    call = driver_call(old, offset=-90.0)
    assert call.answers is None and call.time == 10.0 and call.claims == (("ns", "a", "uid-a"),) and call.injected is None
    assert driver_call({**old, "answers": {}}).answers == {}
    assert driver_call({**old, "kind": "stale-retry", "fault": "stale-retry"}).injected == "stale-retry"


def test_after_and_count_limit_which_matching_calls_a_fault_hits(
    root: Path, plugin: StubPlugin, proxy: Interposer, faults: FaultSet
) -> None:
    faults.set_rules([FaultRule(action="error", method="NodePrepareResources", after=1, count=1)])
    c = client(root)
    c.prepare([A])
    with pytest.raises(PluginCallError):
        c.prepare([A])
    c.prepare([A])
    assert [r["status"] for r in calls(proxy, "NodePrepareResources")] == ["OK", "UNAVAILABLE", "OK"]


def test_faults_in_a_file_are_switched_on_and_off_at_runtime(root: Path, plugin: StubPlugin) -> None:
    path = root / "faults.yaml"
    path.write_text("faults: []\n")
    with Interposer(root / "plugins", root / "nodes", FaultSet(path), interval=0.1):
        c = client(root)
        c.prepare([A])
        path.write_text("- {method: NodePrepareResources, action: error, code: INTERNAL, message: off}\n")
        with pytest.raises(PluginCallError, match="INTERNAL: off"):
            c.prepare([A])
        path.write_text("faults: []\n# lifted\n")
        c.prepare([A])
    assert plugin.count("NodePrepareResources", "a") == 2


def test_a_broken_fault_file_is_refused_naming_the_file_and_field(root: Path) -> None:
    path = root / "faults.yaml"
    path.write_text("faults:\n  - action: explode\n    method: NodePrepareResources\n")
    with pytest.raises(UsageError, match=r"faults.yaml: invalid fault file: faults.0.action"):
        FaultSet(path)
    path.write_text("faults:\n  - {action: error, code: NOPE}\n")
    with pytest.raises(UsageError, match="unknown gRPC status code 'NOPE'"):
        FaultSet(path)


def test_a_taken_socket_path_is_refused_by_name_and_left_alone(root: Path, plugin: StubPlugin) -> None:
    taken = NodeDirs(root / "nodes", "n1").registration_socket(DRIVER)
    taken.parent.mkdir(parents=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
        other.bind(str(taken))
        other.listen(1)
        with pytest.raises(UsageError, match=f"{taken}: socket is taken"):
            Interposer(root / "plugins", root / "nodes").start()
        assert taken.is_socket()
        assert not NodeDirs(root / "nodes", "n1").dra_socket(DRIVER).exists()


def test_a_plugin_that_goes_away_takes_its_proxied_sockets_with_it(
    root: Path, plugin: StubPlugin, proxy: Interposer
) -> None:
    proxied = NodeDirs(root / "nodes", "n1").registration_socket(DRIVER)
    assert proxied.is_socket()
    plugin.stop()
    deadline = time.monotonic() + 3
    while proxied.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not proxied.exists()
    proxy.stop()
    assert not NodeDirs(root / "nodes", "n1").dra_socket(DRIVER).exists()


def test_an_unknown_service_is_forwarded_as_raw_bytes(root: Path, plugin: StubPlugin, proxy: Interposer) -> None:
    client(root)  # learn the endpoint
    with grpc.insecure_channel(f"unix://{NodeDirs(root / 'nodes', 'n1').dra_socket(DRIVER)}") as ch:
        with pytest.raises(grpc.RpcError) as err:
            ch.unary_unary("/some.Other/Call")(b"", timeout=2)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED  # the plugin's own answer, passed back


def test_the_proxy_command_rejects_a_bad_fault_file_with_exit_code_2(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "plugins").mkdir()
    bad = root / "f.json"
    bad.write_text(json.dumps({"faults": [{"action": "hang", "colour": "red"}]}))
    code = main(["proxy", "--plugin-root", str(root / "plugins"), "--node-root", str(root / "n"), "--faults", str(bad)])
    assert code == 2
    assert f"{bad}: invalid fault file: faults.0.colour" in capsys.readouterr().err


def test_the_proxy_command_serves_until_sigterm_and_then_removes_its_sockets(root: Path, plugin: StubPlugin) -> None:
    import signal
    import subprocess
    import sys

    proxied = NodeDirs(root / "nodes", "n1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "draguard.cli", "proxy", "--plugin-root", str(root / "plugins"),
         "--node-root", str(root / "nodes"), "--record", str(root / "calls.jsonl"), "--run-label", "r1"],
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 15
        while not proxied.registration_socket(DRIVER).exists():
            assert proc.poll() is None and time.monotonic() < deadline, "proxy never served the plugin"
            time.sleep(0.05)
        client(root).prepare([A])
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    assert not proxied.registration_socket(DRIVER).exists() and not proxied.dra_socket(DRIVER).exists()
    assert plugin.registration_socket.exists(), "the plugin's own sockets are untouched"
    recs = read_calls(root / "calls.jsonl")
    assert [r["method"] for r in recs][-1] == "NodePrepareResources" and {r["run"] for r in recs} == {"r1"}
