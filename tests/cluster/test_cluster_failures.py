"""Bad environments give one clear error, exit code 2, and leave nothing running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.harness.cluster import binaries as bins
from draguard.harness.cluster import local
from draguard.harness.cluster.local import LocalCluster
from draguard.harness.core.process import pid_alive
from draguard.harness.core.errors import HarnessError


def _real_bin_dir() -> Path:
    entry = bins.cache_entry()
    if os.environ.get("DRAGUARD_BIN_DIR"):
        return Path(os.environ["DRAGUARD_BIN_DIR"])
    if not entry.exists():
        pytest.skip(f"no control-plane binaries in {entry} (make binaries builds them)")
    return entry


def _fake_bin_dir(tmp_path: Path, broken: str) -> Path:
    real = _real_bin_dir()
    d = tmp_path / "bin"
    d.mkdir()
    for name in bins.COMPONENTS:
        if name == broken:
            (d / name).write_text("#!/bin/sh\necho 'E1203 flag --bogus: the disk is on fire' >&2\nexit 1\n")
            (d / name).chmod(0o755)
        else:
            (d / name).symlink_to(real / name)
    return d


def _processes_under(path: Path) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if str(path) in line and "ps -eo" not in line]


def test_unknown_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "up", "--bogus"]) == 2
    assert "No such option '--bogus'" in capsys.readouterr().err


def test_a_component_that_fails_to_start_shows_its_last_log_lines_and_nothing_is_left(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = _fake_bin_dir(tmp_path, broken="kube-apiserver")
    state = tmp_path / "state"
    env_before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(state)
    try:
        code = main(["cluster", "up", "--name", "broken", "--bin-dir", str(bin_dir)])
    finally:
        if env_before is None:
            os.environ.pop("XDG_STATE_HOME")
        else:
            os.environ["XDG_STATE_HOME"] = env_before
    err = capsys.readouterr().err
    assert code == 2
    assert "kube-apiserver exited with code 1 while starting" in err
    assert "the disk is on fire" in err
    assert "Traceback" not in err
    time.sleep(0.5)
    assert _processes_under(bin_dir) == []


@pytest.fixture
def taken() -> Iterator[int]:
    """A port on 127.0.0.1 that another socket listens on for the test's duration."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_a_port_taken_every_time_is_reported_and_nothing_is_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   taken: int) -> None:
    bin_dir = _real_bin_dir()
    port = taken
    picks = []

    def always_taken() -> int:
        picks.append(port)
        return port

    monkeypatch.setattr(local, "free_port", always_taken)
    cluster = LocalCluster("taken", bin_dir=bin_dir, base_dir=tmp_path, progress=None)
    with pytest.raises(HarnessError, match=f"etcd: port {port} on 127.0.0.1 is already taken"):
        cluster.up()
    assert cluster.components == {}
    assert len(picks) == 5 * local._PORT_ATTEMPTS  # every attempt picked its five ports afresh


@pytest.mark.cluster
def test_a_port_taken_between_the_pick_and_the_bind_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 taken: int) -> None:
    """A parallel run may bind the port we picked before our component does: the cluster starts on new ports."""
    bin_dir = _real_bin_dir()
    port = taken
    real = local.free_port
    ports = iter([port])
    monkeypatch.setattr(local, "free_port", lambda: next(ports, None) or real())
    said: list[str] = []
    cluster = LocalCluster("retaken", bin_dir=bin_dir, base_dir=tmp_path, progress=said.append)
    try:
        cluster.up()
        assert port not in cluster.ports.values()
        assert cluster.kube().get("Namespace", "default") is not None
        assert any("retrying on new ports" in line for line in said), said
    finally:
        cluster.down(remove=True)


def test_free_port_never_hands_out_the_same_port_twice() -> None:
    """etcd's client and peer ports are picked one after the other, before either is bound."""
    picked = [local.free_port() for _ in range(2000)]
    assert len(set(picked)) == len(picked)


@pytest.mark.cluster
def test_a_killed_owner_takes_its_control_plane_with_it(tmp_path: Path) -> None:
    bin_dir = _real_bin_dir()
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from draguard.harness.cluster.local import LocalCluster\n"
        f"c = LocalCluster('orphan', bin_dir={str(bin_dir)!r}, base_dir=Path({str(tmp_path)!r}))\n"
        "c.up(); print('UP', flush=True); time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "UP"
    import json

    pids = json.loads((tmp_path / "orphan" / "cluster.json").read_text())["pids"]
    assert len(pids) == 4 and all(pid_alive(p) for p in pids.values())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids.values()):
        time.sleep(0.1)
    assert [c for c, p in pids.items() if pid_alive(p)] == []


def test_a_throwaway_cluster_removes_its_directory_on_exit_unless_logs_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Benchmarks start a cluster per measurement: each left ~200 MB of etcd data and logs behind."""
    monkeypatch.delenv("DRAGUARD_KEEP_LOGS", raising=False)
    for name, throwaway, keep_logs, left in (("gone", True, None, False), ("kept", False, None, True),
                                             ("logs", True, "1", True)):  # fmt: skip
        if keep_logs:
            monkeypatch.setenv("DRAGUARD_KEEP_LOGS", keep_logs)
        cluster = LocalCluster(name, base_dir=tmp_path, remove_on_exit=throwaway)
        (cluster.dir / "logs").mkdir(parents=True)
        cluster.__exit__(None, None, None)  # what leaving `with LocalCluster(...)` does after its components stopped
        assert cluster.dir.exists() is left, name


@pytest.mark.cluster
def test_a_controller_manager_restarted_while_the_api_server_is_down_starts_once_it_is_back(tmp_path: Path) -> None:
    """control-plane-restarts overlaps an apiserver-restart step with a controller-manager-restart step:
    the controller manager started while the API server was down, exited (it reads the request-header
    CA from the API while starting), and nothing released the scenario's claims afterwards."""
    with LocalCluster("overlap", bin_dir=_real_bin_dir(), base_dir=tmp_path, progress=None) as cluster:
        api = cluster.components["kube-apiserver"]
        api.stop()
        back = threading.Timer(3.0, api.start)
        back.start()
        try:
            cluster.restart("controller-manager")
        finally:
            back.join()
        cm = cluster.components["kube-controller-manager"]
        assert cm.alive() and cm.ready()
        starts = cm.log.read_text().count("==== ")
        assert starts >= 3, f"the first start after the restart should have failed with the API down: {starts} starts"


def test_a_component_that_died_is_named_with_its_exit_status_and_log(tmp_path: Path) -> None:
    """What the runner checks after cleanup: a component down then died on its own (every step that
    stops one starts it again), and the run is an error naming it rather than a verdict on the driver."""
    from draguard.harness.core.process import Supervised

    cluster = LocalCluster("dead", base_dir=tmp_path, progress=None)
    gate = tmp_path / "exit-now"  # it exits once started: an exit before the readiness check is a failed start
    dies = f"echo 'F1205 lost the API'; while [ ! -e {gate} ]; do sleep 0.05; done; exit 3"
    for name, argv in (("kube-scheduler", ["sh", "-c", dies]), ("etcd", ["sleep", "30"])):
        sup = Supervised(name, argv, tmp_path / f"{name}.log", ready=lambda: True)
        sup.start(5)
        cluster.components[name] = sup
    gate.touch()
    cluster.components["kube-scheduler"].wait_exit(5)
    try:
        (dead,) = cluster.dead()
        assert dead.startswith("kube-scheduler (exit code 3)") and "F1205 lost the API" in dead
    finally:
        cluster.components["etcd"].stop()
    assert len(cluster.dead()) == 2  # stopped is down too


@pytest.mark.cluster
def test_a_controller_manager_that_dies_on_its_own_is_started_again_and_recorded(tmp_path: Path) -> None:
    """It can exit after serving /healthz (the API server going away while it builds its controllers):
    the kubelet restarts such a static pod, and so does the local backend, keeping what happened."""
    said: list[str] = []
    with LocalCluster("keeper", bin_dir=_real_bin_dir(), base_dir=tmp_path, progress=said.append) as cluster:
        cm = cluster.components["kube-controller-manager"]
        first = cm.pid
        assert first is not None
        os.killpg(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (cm.pid != first and cm.ready() and cm.restarts):
            time.sleep(0.2)
        assert cm.pid != first and cm.alive() and cm.ready(), cluster.exits
        assert cluster.dead() == []
        (exited,) = cluster.exits
        assert exited.startswith("kube-controller-manager exited with code -9")
        assert any("started again" in m for m in said), said


OVERLAP = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {name: overlapping-restarts}
spec:
  nodes: [{namePrefix: gpu-node, count: 1, topology: {gpus: 2}}]
  deviceClasses: [{name: gpu.draguard.dev, selectors: ["device.driver == 'gpu.draguard.dev'"]}]
  workloads:
    - name: w
      replicas: 2
      claims: [{name: gpus, requests: [{name: gpu, deviceClassName: gpu.draguard.dev, count: 1}]}]
  timeline:
    - {at: 0s, fault: apiserver-restart}
    - {at: 1s, fault: controller-manager-restart}
  settle: {timeout: 30s, cleanup: 45s}
"""


@pytest.mark.cluster
def test_a_controller_manager_restarted_inside_an_api_server_restart_leaves_a_scenario_met() -> None:
    """The overlap control-plane-restarts reaches by chance (2 runs in 27 under load here), on purpose:
    before, its controller manager stayed down and no-leak failed the correct driver."""
    from draguard.harness.runner.runner import Runner, RunOptions
    from draguard.harness.scenario.loader import parse_scenario

    result = Runner(parse_scenario(OVERLAP, "overlap.yaml"), RunOptions(backend="local")).run()
    assert result.ok, result.shortfalls
    assert [s.status for s in result.steps] == ["ok", "ok"]
    (api, cm) = result.steps
    assert cm.ran is not None and api.finished is not None and cm.ran < api.finished  # they did overlap
