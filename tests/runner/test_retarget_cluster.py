"""``draguard run --driver --device-class``: library scenarios against an installed driver, end to end.

The driver is the upstream DRA test driver (k8s.io/kubernetes/test/e2e/dra/test-driver, built as
dra-test-driver beside the control plane) on two fake nodes of the session's local control plane,
four devices each, with a DeviceClass for it: the cluster a vendor would point ``--kubeconfig`` at.
One fleet serves every case of this module; each case runs the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from draguard.harness.driver.external import TEST_DRIVER_NAME, ExternalPluginProcess, find_test_driver
from draguard.harness.core.errors import HarnessError
from draguard.harness.kube import Kube
from draguard.harness.runner.journal import pending_journals
from support import upstream_on_fake_nodes

pytestmark = pytest.mark.cluster

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"
README = Path(__file__).resolve().parents[2] / "README.md"


def _journals_on(kubeconfig: Path) -> set[Path]:
    """The pending run journals of runs against ``kubeconfig`` (tests on other xdist workers journal too)."""
    out = set()
    for path in pending_journals():
        try:
            if str(kubeconfig) in path.read_text():
                out.add(path)
        except FileNotFoundError:  # that run ended meanwhile
            pass
    return out


@dataclass
class Installed:
    kubeconfig: Path
    kube: Kube
    nodes: list[str]
    device_class: str
    drivers: dict[str, ExternalPluginProcess]


@pytest.fixture(scope="module")
def installed(draguard_cluster: Any) -> Iterator[Installed]:
    bin_dir = draguard_cluster.local.bin_dir if draguard_cluster.local is not None else None
    try:
        binary = find_test_driver(bin_dir)
    except HarnessError as exc:
        pytest.skip(str(exc))
    with upstream_on_fake_nodes(draguard_cluster, "dgr", binary) as up:
        yield Installed(Path(draguard_cluster.kubeconfig), draguard_cluster.kube(), up.nodes, up.device_class, up.procs)


def test_a_restart_command_restarts_a_driver_no_daemonset_runs(installed: Installed, tmp_path: Path) -> None:
    """--restart-command: the user's way of restarting the driver on a node (here: a marker file that a
    supervisor, standing in for systemd or an operator, answers by restarting that node's driver)."""
    markers = tmp_path / "restart"
    markers.mkdir()
    restarted: list[tuple[str, int | None, int | None]] = []
    stop = threading.Event()

    def supervise() -> None:
        while not stop.is_set():
            for marker in markers.glob("*"):
                proc = installed.drivers[marker.name]
                before = proc.pid
                proc.restart(kill=True)
                restarted.append((marker.name, before, proc.pid))
                marker.unlink()
            time.sleep(0.1)

    supervisor = threading.Thread(target=supervise, daemon=True)
    supervisor.start()
    command = f"touch {markers}/{{node}} && while [ -e {markers}/{{node}} ]; do sleep 0.1; done"
    try:
        done = _draguard("run", str(LIBRARY / "driver-restart-mid-gang.yaml"), str(LIBRARY / "driver-down-until-cleanup.yaml"),
                         "--kubeconfig", str(installed.kubeconfig), "--driver", TEST_DRIVER_NAME,
                         "--device-class", installed.device_class, "--restart-command", command,
                         "--report", "terminal,json", "--report-dir", str(tmp_path / "out"))
    finally:
        stop.set()
        supervisor.join(5)
    print(done.stderr[-4000:])
    by = {s["name"]: s for s in json.loads((tmp_path / "out" / "verdict.json").read_text())["scenarios"]}
    ran = by["driver-restart-mid-gang"]
    assert ran["outcome"] != "not-applicable", ran["notApplicable"]
    [step] = ran["steps"]
    assert (step["fault"], step["status"]) == ("driver-restart", "ok") and step["fired"] >= 1, step
    # Each node the step targeted had its driver restarted by the command: a new process there.
    assert len(restarted) == step["fired"], restarted
    assert all(node in installed.nodes and old != new for node, old, new in restarted), restarted
    # A restart command cannot keep the driver down: driver-down stays not applicable, saying why.
    down = by["driver-down-until-cleanup"]
    assert down["outcome"] == "not-applicable" and "keeps the driver down for a while" in down["notApplicable"]
    if ran["outcome"] != "met":
        assert "--restart-command" in done.stderr and f"replay: draguard run" in done.stderr


def _draguard(*args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "draguard.cli", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200"}, check=False)


def _namespaces(kube: Kube) -> set[str]:
    return {n["metadata"]["name"] for n in kube.items("Namespace")}


def readme_command() -> str:
    block = re.search(r"<!-- retarget-commands:.*?-->\n```sh\n(.*?)```", README.read_text(), re.S)
    assert block, "README.md lost its retarget-commands block"
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("draguard run scenarios/ ")
    return lines[0]


def test_the_readme_command_runs_the_library_against_the_upstream_test_driver(installed: Installed,
                                                                               tmp_path: Path) -> None:
    before = _namespaces(installed.kube)
    (tmp_path / "scenarios").symlink_to(LIBRARY)
    done = subprocess.run(["bash", "-c", readme_command()], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          check=False, env={**os.environ, "COLUMNS": "200", "KUBECONFIG": str(installed.kubeconfig),
                                            "DRIVER": TEST_DRIVER_NAME, "DEVICE_CLASS": installed.device_class,
                                            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    print(done.stdout, done.stderr[-6000:])
    # Every applicable scenario met its expectations; those not applicable neither pass nor fail.
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["exitCode"] == 0 and verdict["ok"] is True
    by = {s["name"]: s for s in verdict["scenarios"]}
    assert len(by) == len(list(LIBRARY.glob("*.yaml")))
    assert {n for n, s in by.items() if s["outcome"] != "not-applicable"} == {"cdi-devices-correct-driver",
                                                                             "preempt-gang-member"}
    assert all(s["notApplicable"].startswith(f"not applicable on driver {TEST_DRIVER_NAME}: ")
               for s in by.values() if s["outcome"] == "not-applicable")
    assert (out / "report.html").is_file() and "not applicable" in (out / "report.html").read_text()

    held = by["cdi-devices-correct-driver"]
    assert held["outcome"] == "met" and held["ok"] is True and held["notApplicable"] is None
    assert held["environment"]["driver"] == {"name": TEST_DRIVER_NAME, "kind": "external", "mutant": None,
                                             "deviceClass": installed.device_class, "version": None,
                                             "interposed": False}
    inv = held["invariants"]
    for name in ("claim-atomic", "gang-atomic", "topology", "no-double-allocation", "no-leak"):
        assert inv[name]["status"] == "held" and inv[name]["met"], (name, inv[name])
    assert "judged from the API only" in inv["no-leak"]["note"]
    assert inv["container-devices"]["status"] == "not-checked"
    assert inv["container-devices"]["required"] is False and "device truth" in inv["container-devices"]["note"]
    timeline = json.loads((out / held["timeline"]).read_text())
    ran = {(e["data"] or {}).get("node") for e in timeline
           if e.get("kind") == "Pod" and (e.get("data") or {}).get("phase") == "Running"}
    assert ran == {installed.nodes[0]}, "the pod did not run on the node the scenario's node maps to"

    preempt = by["preempt-gang-member"]
    assert preempt["outcome"] == "met", preempt
    gang = preempt["invariants"]["gang-atomic"]
    assert gang["status"] == "violated" and gang["expected"] == "violate"
    assert any("batch" in v["message"] for v in gang["violations"]), gang["violations"]
    assert any(TEST_DRIVER_NAME in d for v in gang["violations"] for d in v["devices"]), gang["violations"]
    assert all(e["met"] for e in preempt["expectationResults"]), preempt["expectationResults"]

    na = by["reset-leak-forget-before-reset"]
    assert na["outcome"] == "not-applicable" and na["ok"] is None
    assert "mutant 'forget-before-reset'" in na["notApplicable"]
    assert "step 0-reset-failure (reset-failure) is a fault of draguard's fake driver" in na["notApplicable"]
    assert na["invariants"] == {} and na["steps"] == []
    assert "reset-leak-forget-before-reset: not applicable on driver" in done.stderr
    total = len(list(LIBRARY.glob("*.yaml")))
    assert (f"{total - 2} of {total} scenario(s) not applicable on this driver (not run); 2 of 2 run met their "
            "expectations") in done.stderr
    # Nothing of the runs is left in the cluster: their namespaces are gone or going.
    left = [ns for ns in installed.kube.items("Namespace") if ns["metadata"]["name"] not in before
            and not ns["metadata"].get("deletionTimestamp")]
    assert not left, [ns["metadata"]["name"] for ns in left]


def test_junit_reports_a_scenario_not_applicable_as_skipped_with_the_reason(installed: Installed,
                                                                           tmp_path: Path) -> None:
    done = _draguard("run", str(LIBRARY / "reset-leak-forget-before-reset.yaml"), str(LIBRARY / "cdi-devices-correct-driver.yaml"),
                     "--kubeconfig", str(installed.kubeconfig), "--driver", TEST_DRIVER_NAME,
                     "--device-class", installed.device_class, "--report", "junit", "--report-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    root = ET.parse(tmp_path / "junit.xml").getroot()
    suite = next(s for s in root if s.get("name") == "scenario reset-leak-forget-before-reset")
    skipped = suite.find("testcase/skipped")
    assert skipped is not None and "mutant 'forget-before-reset'" in (skipped.get("message") or "")
    assert suite.get("skipped") == "1" and suite.get("failures") == "0" and suite.get("errors") == "0"
    ran = next(s for s in root if s.get("name") == "scenario cdi-devices-correct-driver")
    devices = next(c for c in ran if c.get("name") == "invariant container-devices").find("skipped")
    assert devices is not None and "not checked on an installed driver" in (devices.get("message") or "")
    assert ran.get("failures") == "0" and ran.get("errors") == "0"


def test_only_not_applicable_scenarios_exit_2(installed: Installed, tmp_path: Path) -> None:
    done = _draguard("run", str(LIBRARY / "driver-down-until-cleanup.yaml"), "--kubeconfig", str(installed.kubeconfig),
                     "--driver", TEST_DRIVER_NAME, "--device-class", installed.device_class,
                     "--report", "json", "--report-dir", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr[-2000:]
    verdict = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert verdict["exitCode"] == 2
    assert ("step 0-driver-down (driver-down) keeps the driver down for a while, which draguard does through the "
            "driver's DaemonSet") in verdict["scenarios"][0]["notApplicable"]


def test_repeat_says_once_what_is_not_applicable(installed: Installed, tmp_path: Path) -> None:
    done = _draguard("run", str(LIBRARY / "driver-down-until-cleanup.yaml"), "--repeat", "2", "--kubeconfig",
                     str(installed.kubeconfig), "--driver", TEST_DRIVER_NAME, "--device-class", installed.device_class,
                     "--report-dir", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("driver-down-until-cleanup: not applicable on driver") == 1
    assert f"no scenario is applicable on driver {TEST_DRIVER_NAME}: nothing to repeat" in done.stderr


def test_dry_run_says_what_applies(installed: Installed) -> None:
    done = _draguard("run", "--dry-run", str(LIBRARY / "cdi-devices-correct-driver.yaml"),
                     str(LIBRARY / "gang-deadlock-per-pod.yaml"), "--kubeconfig", str(installed.kubeconfig),
                     "--driver", TEST_DRIVER_NAME, "--device-class", installed.device_class)
    assert done.returncode == 0, done.stderr
    assert f"cdi-devices-correct-driver: applicable; nodes gpu-node-0 -> {installed.nodes[0]}" in done.stdout
    assert ("gang-deadlock-per-pod: not applicable: claim gang-a/gpus constrains matchAttribute "
            "gpu.draguard.dev/nvlinkDomain, which driver test-driver.cdi.k8s.io does not publish") in done.stdout


@pytest.mark.parametrize("args, message", [
    (("--driver", TEST_DRIVER_NAME, "--device-class", "no-such-class"),
     "--device-class no-such-class: no such DeviceClass in the cluster"),
    (("--driver", "gpu.nobody.example.com", "--device-class", "@class"),
     "--driver gpu.nobody.example.com: the driver publishes no devices on any schedulable node"),
    (("--driver", TEST_DRIVER_NAME), "--driver and --device-class go together"),
    (("--restart-command", "true"), "--restart-command restarts an installed driver: give it with --driver"),
    (("--cluster", "local", "--driver", TEST_DRIVER_NAME, "--device-class", "@class", "--restart-command", "true"),
     "--restart-command restarts a driver installed in a cluster; with --cluster local draguard runs the driver"),
])
def test_bad_input_exits_2_and_starts_nothing(installed: Installed, tmp_path: Path, args: tuple[str, ...],
                                              message: str) -> None:
    before = _namespaces(installed.kube)
    journals = _journals_on(installed.kubeconfig)
    args = tuple(installed.device_class if a == "@class" else a for a in args)
    done = _draguard("run", str(LIBRARY / "cdi-devices-correct-driver.yaml"), "--kubeconfig",
                     str(installed.kubeconfig), *args, "--report-dir", str(tmp_path / "out"))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()
    assert not _namespaces(installed.kube) - before  # no namespace created (an earlier run's may have gone)
    assert _journals_on(installed.kubeconfig) == journals  # no run started, so none journaled anything to undo
