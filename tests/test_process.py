"""Process plumbing in one place (draguard.harness.core.process): the socket-path rules every socket server
uses, the spawner thread, and the harness entry points draguard's children run instead of the
command line."""

from __future__ import annotations

import gc
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from draguard.harness.core.errors import UsageError
from draguard.harness.core.process import (
    GC_THRESHOLD,
    UNIX_PATH_MAX,
    Supervised,
    child_main,
    check_dns_subdomain,
    claim_socket_path,
    pid_alive,
    release_socket_paths,
    socket_accepts,
    tune_gc,
)

PACKAGE = Path(__file__).resolve().parents[1]


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dgp", dir="/tmp"))  # short: unix socket paths are limited
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_socket_path_is_claimed_only_when_free_and_short_enough(root: Path) -> None:
    live = root / "live.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(live))
        server.listen()
        assert socket_accepts(live)
        with pytest.raises(UsageError, match="socket is taken"):
            claim_socket_path(live)
        assert live.is_socket(), "a socket another process serves is left alone"
    assert not socket_accepts(live), "nobody listens any more"
    claim_socket_path(live)  # what a killed process leaves behind: removed
    assert not live.exists()
    (root / "file.sock").write_text("x")
    with pytest.raises(UsageError, match="not a socket"):
        claim_socket_path(root / "file.sock")
    longest = root / ("x" * (UNIX_PATH_MAX - len(str(root)) - 1))
    claim_socket_path(longest)  # exactly the limit: allowed (nothing there)
    with pytest.raises(UsageError, match=f"{UNIX_PATH_MAX + 1} bytes, more than the {UNIX_PATH_MAX}"):
        claim_socket_path(Path(str(longest) + "y"))


def test_releasing_removes_only_socket_files(root: Path) -> None:
    sock = root / "served.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(sock))
    (root / "plain.sock").write_text("not ours to remove")
    release_socket_paths(sock, root / "plain.sock", root / "missing.sock")
    assert not sock.exists() and (root / "plain.sock").read_text() == "not ours to remove"


@pytest.mark.parametrize(("value", "limit", "ok"), [
    ("gpu.draguard.dev", 63, True), ("node-0", 253, True), ("Not_A_Name", 63, False), ("a" * 64, 63, False),
    ("-dash", 253, False), ("", 253, False),
])  # fmt: skip
def test_driver_and_node_names_are_dns_subdomains(value: str, limit: int, ok: bool) -> None:
    if ok:
        assert check_dns_subdomain("--driver", value, limit) == value
    else:
        with pytest.raises(UsageError, match=re.escape(f"--driver {value!r}: must be a lower-case DNS subdomain")):
            check_dns_subdomain("--driver", value, limit)


def test_a_child_started_from_a_short_lived_thread_outlives_the_thread(root: Path) -> None:
    proc = Supervised("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], root / "sleeper.log",
                      ready=lambda: True)
    thread = threading.Thread(target=proc.start, kwargs={"timeout": 10})
    thread.start()
    thread.join()
    try:
        assert proc.pid is not None
        time.sleep(0.5)  # PR_SET_PDEATHSIG would have fired when the starting thread ended
        assert proc.alive() and pid_alive(proc.pid)
    finally:
        assert proc.stop(timeout=5) is not None
    assert not proc.alive()


def test_no_harness_or_chaos_module_starts_a_command_line_child() -> None:
    offenders = []
    for folder in ("harness", "chaos"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"""["']draguard\.cli\b""", line):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}")
    assert not offenders, offenders


@pytest.mark.parametrize(("module", "args", "message"), [
    ("draguard.harness.driver.main", ["fake", "--kubeconfig", "{kc}", "--node", "n", "--root", "{root}",
                                      "--driver", "Not_A_Name"],
     "draguard: error: --driver 'Not_A_Name': must be a lower-case DNS subdomain"),
    ("draguard.harness.nodes.main", ["--kubeconfig", "{kc}", "--node", "Bad_Name", "--root", "{root}"],
     "draguard: error: node name 'Bad_Name': must be a lower-case DNS subdomain"),
])  # fmt: skip
def test_the_harness_entry_points_refuse_bad_input_with_one_line_and_exit_2(
    root: Path, module: str, args: list[str], message: str
) -> None:
    kubeconfig = root / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    argv = [a.format(kc=kubeconfig, root=root) for a in args]
    done = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.fixture
def default_gc() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def test_child_entry_points_and_the_command_line_collect_cycles_less_often(default_gc: None) -> None:
    from draguard.cli._entry import invoke

    seen: list[tuple[int, ...]] = []
    assert child_main(lambda argv: seen.append(gc.get_threshold()) or 0, []) == 0
    gc.set_threshold(700, 10, 10)
    command = click.Command("x", callback=lambda: seen.append(gc.get_threshold()))
    assert invoke(command, [], "x") == 0
    assert seen == [GC_THRESHOLD, GC_THRESHOLD]


def test_a_threshold_the_user_set_is_kept(default_gc: None) -> None:
    gc.set_threshold(1000, 5, 5)
    tune_gc()
    assert gc.get_threshold() == (1000, 5, 5)


def test_jobs_end_when_the_wait_for_them_is_ended_by_an_error() -> None:
    """A failure while waiting (here the ``done`` callback; in CI a test's time limit) ends the running
    jobs and never starts the queued ones (the pool's own shutdown would wait for all of them)."""
    from draguard.harness.core.process import in_processes

    def done(result: object) -> None:
        raise RuntimeError("the caller gives up")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="gives up"):
        # The 1 s job ends first; a 120 s one is running then, and the pool has handed the others out
        # ahead (a worker takes one as soon as it is interrupted: that was CI's 120 s).
        in_processes(time.sleep, [(120.0,), (1.0,), (120.0,), (120.0,), (120.0,)], 2, lambda i, exc: None, done)
    assert time.monotonic() - started < 60.0
