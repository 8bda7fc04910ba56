"""Locust's distributed mode for ``draguard load`` without a cluster: what a worker needs crosses
processes (pickle and locust's own wire format), a user keeps nothing between tasks, and a master or
worker that cannot start says why in one line, exits 2 and leaves no process behind.

Locust is imported only in child processes here: ``import locust`` patches sockets with gevent for
the whole process (the reason draguard runs it in a process of its own)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from draguard.harness.load.engine import LoadConfig, load_settings
from draguard.harness.core.process import free_port

LOCUSTMAIN = [sys.executable, "-m", "draguard.harness.load.locustmain"]


def _settings(tmp_path: Path, **overrides: Any) -> Path:
    """The load's settings as ``run_load`` writes them (a kubeconfig that is not there: nothing here
    reaches a cluster)."""
    config = LoadConfig(kubeconfig=str(tmp_path / "no-kubeconfig"), namespace="ns", device_class="gpu.draguard.dev",
                        out_dir=tmp_path / "out", rate=2, duration=2, op_timeout=5)  # fmt: skip
    path = tmp_path / "load-config.json"
    path.write_text(json.dumps({**load_settings(config), **overrides}))
    return path


def _run(args: list[str], timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LOCUSTMAIN, *args], capture_output=True, text=True, timeout=timeout,
                          env={k: v for k, v in os.environ.items() if k != "DRAGUARD_LOAD_CONFIG"} | (env or {}))  # fmt: skip


def _processes_naming(needle: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in text and "locustmain" in text:
            found.append(text)
    return found


# A child process: the user class, its pacing and the settings a worker gets survive pickle and
# locust's wire format (msgpack); one ChurnUser runs six operations (of random kinds) against a fake
# API and keeps nothing from any of them; its state (all but the environment locust gives every process) pickled after
# that, it runs the next operation in a second process that has only the settings, as a second
# worker would.
_USER_PROBE = r"""
import json, pickle, sys, time
from locust.env import Environment
from locust.rpc.protocol import Message
from draguard.harness.load import users
from draguard.harness.load.users import ChurnUser, Tracker, use_settings, _pacing

class FakeKube:
    def __init__(self):
        self.objects = {}
    def create(self, obj, namespace=None):
        md = obj["metadata"]
        if obj["kind"] == "Pod":
            obj = {**obj, "status": {"phase": "Running"}}
            for ref in obj["spec"]["resourceClaims"]:
                if "resourceClaimTemplateName" in ref:  # the resourceclaim controller's claim, allocated
                    self.objects[("ResourceClaim", md["name"] + "-devices")] = {
                        "metadata": {"name": md["name"] + "-devices", "ownerReferences": [{"kind": "Pod", "name": md["name"]}]},
                        "status": {"allocation": {"devices": {}}}}
            tracker.prepared_at[md["name"]] = time.monotonic()
        else:
            obj = {**obj, "status": {"allocation": {"devices": {}}}}
        self.objects[(obj["kind"], md["name"])] = obj
        return obj
    def delete(self, kind, name, namespace=None, grace_seconds=None):
        self.objects.pop((kind, name), None)
        if kind == "Pod":
            self.objects.pop(("ResourceClaim", name + "-devices"), None)

class FakeTracker:
    def __init__(self):
        self.kube = FakeKube()
        self.prepared_at = {}
    def of(self, op):
        pods = [o for (k, _), o in self.kube.objects.items() if k == "Pod" and users._pod_op(o) == op]
        claims = [o for (k, _), o in self.kube.objects.items() if k == "ResourceClaim" and users._claim_op(o) == op]
        return pods, claims

settings = json.load(open(sys.argv[2]))
wire = Message("spawn", {"parsed_options": {users.SETTINGS_OPTION: settings}}, "worker").serialize()
forwarded = Message.unserialize(wire).data["parsed_options"][users.SETTINGS_OPTION]
assert forwarded == settings and pickle.loads(pickle.dumps(settings)) == settings
use_settings(forwarded)
for thing in (ChurnUser, Tracker, _pacing, use_settings):
    assert pickle.loads(pickle.dumps(thing)) is thing, thing
tracker = Tracker._instance = FakeTracker()
env = Environment(user_classes=[ChurnUser])
env.create_local_runner()  # its listener counts the requests
user = ChurnUser(env)
if sys.argv[1] == "second":  # the first process's user, all but the environment locust gives each process
    vars(user).update(pickle.load(open(sys.argv[3], "rb")))
before = dict(vars(user))
class_before = dict(vars(ChurnUser))
for _ in range(6):
    user.operation()
    assert dict(vars(user)) == before, (before, vars(user))
    assert dict(vars(ChurnUser)) == class_before
    assert not tracker.kube.objects, tracker.kube.objects
if sys.argv[1] == "first":
    pickle.dump({k: v for k, v in vars(user).items() if k != "environment"}, open(sys.argv[3], "wb"))
print(json.dumps({f"{kind}/{name}": [e.num_requests, e.num_failures] for (name, kind), e in env.stats.entries.items()}))
"""


def test_users_and_what_a_worker_needs_pickle_and_a_user_keeps_nothing_between_tasks(tmp_path: Path) -> None:
    settings = _settings(tmp_path, gang_size=2)
    pickled = tmp_path / "user.pickle"
    counts = []
    for which in ("first", "second"):  # the second process is another worker: it has only the settings
        probe = subprocess.run([sys.executable, "-c", _USER_PROBE, which, str(settings), str(pickled)],
                               capture_output=True, text=True, timeout=60,
                               env={k: v for k, v in os.environ.items() if k != "DRAGUARD_LOAD_CONFIG"})  # fmt: skip
        assert probe.returncode == 0, probe.stderr[-3000:]
        counts.append(json.loads(probe.stdout.strip().splitlines()[-1]))
    for phases in counts:
        for phase in ("create", "allocated", "prepared", "running", "released"):
            assert sum(n for key, (n, _) in phases.items() if key.endswith(f"/{phase}")) == 6, (phase, phases)
        assert not any(failures for _, failures in phases.values()), phases


def test_a_worker_that_cannot_reach_its_master_exits_2_in_time_without_a_traceback() -> None:
    port = free_port()
    started = time.monotonic()
    result = _run(["--worker", f"127.0.0.1:{port}", "--connect-timeout", "2"])
    assert result.returncode == 2, result.stderr
    assert f"cannot reach the locust master at 127.0.0.1:{port} within 2s" in result.stderr
    assert "Traceback" not in result.stderr and time.monotonic() - started < 30
    with socket.socket() as not_a_master:  # accepts TCP, never answers locust's handshake
        not_a_master.bind(("127.0.0.1", 0))
        not_a_master.listen()
        port = not_a_master.getsockname()[1]
        silent = _run(["--worker", f"127.0.0.1:{port}", "--connect-timeout", "2"])
    assert silent.returncode == 2 and f"the locust master at 127.0.0.1:{port} did not answer" in silent.stderr
    assert "Traceback" not in silent.stderr


@pytest.mark.parametrize("address", ["nowhere", "127.0.0.1:http", "127.0.0.1:70000"])
def test_a_worker_address_that_is_not_master_colon_port_is_bad_input(address: str) -> None:
    result = _run(["--worker", address])
    assert result.returncode == 2 and "expected MASTER:PORT" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
def test_a_master_gives_up_on_workers_that_do_not_come_naming_how_many_did(tmp_path: Path, bind: str) -> None:
    port = free_port()
    settings = _settings(tmp_path, workers=1, expect_workers=1, master_bind=bind, master_port=port, worker_timeout=4)
    result = _run([str(settings)])
    assert result.returncode == 2, result.stderr
    # The worker it started came (on 0.0.0.0 too), the one expected from elsewhere did not.
    assert (f"only 1 of 2 locust workers connected to {bind}:{port} within 4s (1 started on this machine, "
            f"1 expected from others") in result.stderr  # fmt: skip
    assert "Traceback" not in result.stderr
    time.sleep(0.5)
    assert not _processes_naming(f":{port}"), "the worker it started is still running"
    assert not (tmp_path / "out" / "locust.json").exists()


def test_a_master_port_in_use_or_an_address_not_of_this_machine_is_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run([str(_settings(tmp_path, expect_workers=1, master_port=port))])
    assert result.returncode == 2 and f"cannot listen for locust workers on 127.0.0.1:{port}: the port is in use" \
        in result.stderr and "Traceback" not in result.stderr, result.stderr  # fmt: skip
    elsewhere = _run([str(_settings(tmp_path, expect_workers=1, master_bind="192.0.2.1", master_port=free_port()))])
    assert elsewhere.returncode == 2 and "cannot listen for locust workers on 192.0.2.1:" in elsewhere.stderr
    assert "Traceback" not in elsewhere.stderr


def test_a_worker_without_the_masters_kubeconfig_leaves_before_its_users_start(tmp_path: Path) -> None:
    port = free_port()
    settings = _settings(tmp_path, expect_workers=1, master_port=port, worker_timeout=30, duration=20)
    master = subprocess.Popen([*LOCUSTMAIN, str(settings)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)  # fmt: skip
    try:
        worker = _run(["--worker", f"127.0.0.1:{port}", "--connect-timeout", "20"])
        out, _ = master.communicate(timeout=60)
    finally:
        master.kill()
    assert worker.returncode == 2, worker.stderr
    assert f"the master's kubeconfig {tmp_path / 'no-kubeconfig'} is not on this machine: pass --kubeconfig" \
        in worker.stderr  # fmt: skip
    assert "Traceback" not in worker.stderr, "a user started without settings"
    assert master.returncode == 1 and "every locust worker left before the load's end" in out, out
    assert json.loads((tmp_path / "out" / "locust.json").read_text())["workers"] == 1


def test_distributed_options_without_workers_are_bad_input_and_users_help_says_the_cap() -> None:
    cli = [sys.executable, "-m", "draguard.cli.main", "load"]
    result = subprocess.run([*cli, "--master-bind", "0.0.0.0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--master-bind: only with --workers or --expect-workers" in result.stderr
    text = subprocess.run([*cli, "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "rate x 4, at least 2, at most 500" in " ".join(text.split())
