"""Supervised child processes: start with logs to a file, wait for readiness, stop without orphans.

Every process starts in its own session (so a group kill reaches its children) and, when
``die_with_parent`` is set, with ``PR_SET_PDEATHSIG`` so that it dies if the draguard process that
owns it is killed, even by SIGKILL. The kernel ties that signal to the *thread* that forked the
child, not to the process: a child started from a short-lived thread (a chaos step restarting a node
agent or a driver) would be killed the moment that thread ends. Every such child is therefore forked
on one thread that lives as long as the draguard process (:func:`_spawn`). Pids are also written to the owner's state file so that
``draguard cluster down`` / ``draguard cleanup`` can stop them from another process.
Used by the local cluster, the fake driver and fake node wrappers, and the runner.
"""

from __future__ import annotations

import ctypes
import errno
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import HarnessError

__all__ = ["Supervised", "spawn", "free_port", "port_is_free", "pid_alive", "kill_pid", "last_lines"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


_SPAWNER: ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def spawn(argv: list[str], die_with_parent: bool = True, **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen`` on the process-wide spawner thread (see the module docstring), in a
    session of its own, killed with draguard when ``die_with_parent``."""
    kwargs.setdefault("start_new_session", True)
    if die_with_parent:
        kwargs["preexec_fn"] = _die_with_parent
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="draguard-spawner")

    def popen() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, **kwargs)

    return _SPAWNER.submit(popen).result()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, below the ephemeral range.

    Port 0 would hand out an ephemeral port, which the many outgoing connections of a running
    control plane may take as their source port before our component binds it.
    """
    low, _ = _ephemeral_range()
    rng = random.SystemRandom()
    for _ in range(100):
        port = rng.randrange(10000, max(10001, low))
        if port_is_free(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    try:  # a zombie of ours counts as dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def kill_pid(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM the process group of ``pid`` (falling back to the pid), then SIGKILL after ``timeout``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except OSError:
            try:
                os.kill(pid, sig)
            except OSError:
                return
        deadline = time.monotonic() + (timeout if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    return
            except ChildProcessError:
                pass
            if not pid_alive(pid):
                return
            time.sleep(0.05)


def last_lines(path: Path, n: int = 8) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in lines[-n:]) or "    (empty log)"


@dataclass
class Supervised:
    """One supervised process: its command, log file and readiness probe."""

    name: str
    argv: Sequence[str]
    log: Path
    ready: Callable[[], bool]
    env: dict[str, str] | None = None
    die_with_parent: bool = True
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    pid: int | None = None
    restarts: int = 0

    def start(self, timeout: float = 60.0) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            out.write(f"\n==== {time.strftime('%H:%M:%S')} starting {' '.join(self.argv)}\n".encode())
            out.flush()
            try:
                self.proc = spawn(list(self.argv), self.die_with_parent, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=self.env)
            except OSError as exc:
                raise HarnessError(f"cannot start {self.name} ({self.argv[0]}): {exc}") from exc
        self.pid = self.proc.pid
        self.wait_ready(timeout)

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pid is not None and pid_alive(self.pid)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                code = self.proc.returncode if self.proc else "?"
                raise HarnessError(
                    f"{self.name} exited with code {code} while starting; last lines of {self.log}:\n"
                    + last_lines(self.log)
                )
            if self.ready():
                return
            time.sleep(0.1)
        raise HarnessError(
            f"{self.name} was not ready after {timeout:.0f}s; last lines of {self.log}:\n" + last_lines(self.log)
        )

    def stop(self, timeout: float = 10.0) -> None:
        if self.pid is not None and self.alive():
            kill_pid(self.pid, timeout)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def kill(self) -> None:
        """SIGKILL, no grace: what a crash looks like."""
        if self.pid is not None and self.alive():
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def restart(self, timeout: float = 60.0) -> None:
        self.stop()
        self.restarts += 1
        self.start(timeout)
