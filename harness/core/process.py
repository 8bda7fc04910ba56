"""Child processes and their sockets, in one place: every harness module that starts a child process
(control plane, hollow kubelets, fake drivers and the driver host, fake node agents, the upstream
test driver) or serves a unix socket (fake drivers, the driver host, the interposer) uses this module.

**Supervision.** Every process starts in its own session (so a group kill reaches its children) and,
when ``die_with_parent`` is set, with ``PR_SET_PDEATHSIG`` so that it dies if the draguard process
that owns it is killed, even by SIGKILL. The kernel ties that signal to the *thread* that forked the
child, not to the process: a child started from a short-lived thread (a chaos step restarting a node
agent or a driver) would be killed the moment that thread ends. Every child is therefore forked on
one thread that lives as long as the draguard process (:func:`spawn`). :class:`Supervised` adds a log
file, a readiness probe, stop/kill/restart. Pids are also written to the owner's state file so that
``draguard cluster down`` / ``draguard cleanup`` can stop them from another process.

**Socket rules and probes.** :func:`claim_socket_path` makes a path free for a new unix socket (the
107-byte ``sun_path`` limit, a stale socket of a killed process removed, a live one or another file
refused); :func:`socket_accepts` is the readiness probe of a socket; :func:`check_dns_subdomain` is
the rule for driver and node names, which become path components and API object names.

**Child entry points.** Children run harness entry points (``python -m draguard.harness.driver.main``,
``python -m draguard.harness.nodes.main``), never the ``draguard`` command line; :func:`child_main`
gives them the command line's error handling (one line, the documented exit code) and
:func:`wait_for_signal` / :func:`stop_on_signals` their shutdown on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import logging
import multiprocessing
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Self, TypeVar

from draguard.harness.core.errors import EXIT_USAGE, DraguardError, HarnessError, UsageError

__all__ = [
    "Supervised",
    "NodeProcess",
    "tune_gc",
    "GC_THRESHOLD",
    "spawn",
    "free_port",
    "port_is_free",
    "pid_alive",
    "kill_pid",
    "last_lines",
    "UNIX_PATH_MAX",
    "claim_socket_path",
    "release_socket_paths",
    "socket_accepts",
    "check_dns_subdomain",
    "child_main",
    "child_logging",
    "wait_for_signal",
    "stop_on_signals",
    "interrupt_on_sigterm",
    "in_processes",
]

R = TypeVar("R")

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


_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, below the ephemeral range.

    Port 0 would hand out an ephemeral port, which the many outgoing connections of a running
    control plane may take as their source port before our component binds it.

    A port is handed out once per process: two calls in a row (etcd's client and peer port) must
    not get the same port just because nothing has bound the first one yet.
    """
    low, _ = _ephemeral_range()
    rng = random.SystemRandom()
    for _ in range(100):
        port = rng.randrange(10000, max(10001, low))
        with _HANDED_OUT_LOCK:
            if port in _HANDED_OUT or not port_is_free(port):
                continue
            if len(_HANDED_OUT) > 8192:  # a long-lived process: forget the oldest picks wholesale
                _HANDED_OUT.clear()
            _HANDED_OUT.add(port)
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
    poll: float = 0.1
    """Seconds between readiness probes while starting."""
    log_lines: int = 8
    """Lines of the log shown when it fails to start."""
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

    @property
    def returncode(self) -> int | None:
        """The exit status of the last child started here; None while it runs or before it started."""
        return self.proc.poll() if self.proc is not None else None

    def wait_exit(self, timeout: float = 10.0) -> int | None:
        """Wait for the child to end by itself (an injected crash); its exit status, None if still alive."""
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                code = self.proc.returncode if self.proc else "?"
                raise HarnessError(
                    f"{self.name} exited with code {code} while starting; last lines of {self.log}:\n"
                    + last_lines(self.log, self.log_lines)
                )
            if self.ready():
                return
            time.sleep(self.poll)
        raise HarnessError(
            f"{self.name} was not ready after {timeout:.0f}s; last lines of {self.log}:\n"
            + last_lines(self.log, self.log_lines)
        )

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM to its process group, SIGKILL after ``timeout``; the exit status (None if never started)."""
        if self.pid is not None and self.alive():
            kill_pid(self.pid, timeout)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        return self.returncode

    def kill(self) -> int | None:
        """SIGKILL, no grace: what a crash looks like; the exit status (None if never started)."""
        if self.pid is not None and self.alive():
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
        if self.proc is not None:
            self.proc.wait(timeout=10)
        return self.returncode

    def restart(self, timeout: float = 60.0) -> None:
        self.stop()
        self.restarts += 1
        self.start(timeout)


class NodeProcess:
    """One child process a fleet runs for its nodes or drivers: a fake driver (per node, or one node's
    share of the driver host), the driver host, the fake node agents, a hollow kubelet, the upstream test
    driver, the benchmarks' floor server. Every wrapper reports and controls its child through this one
    interface; by default it delegates to the :class:`Supervised` ``_proc`` it builds, and a wrapper whose
    child is not its own (a node served by the driver host) overrides what differs.
    """

    _proc: Supervised

    @property
    def title(self) -> str:
        """What the journal and error messages call it (``fake driver on n0``)."""
        return self._proc.name

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc.alive()

    @property
    def returncode(self) -> int | None:
        """Its exit status; None while it runs or before it started."""
        return self._proc.returncode

    @property
    def log_path(self) -> Path:
        return self._proc.log

    @property
    def socket(self) -> Path | None:
        """The unix socket it serves (its readiness), or None when it serves none of its own."""
        return None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def start(self, timeout: float = 60.0) -> Self:
        """Start the child and wait until it is ready."""
        self._proc.start(timeout)
        return self

    def wait_exit(self, timeout: float = 10.0) -> int | None:
        """Wait for the child to end by itself (an injected crash); its exit status, None if still alive."""
        return self._proc.wait_exit(timeout)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; the exit status (None if never started)."""
        return self._proc.stop(timeout)

    def kill(self) -> int | None:
        """SIGKILL now, as a crash; what it leaves on disk stays."""
        return self._proc.kill()

    def restart(self, kill: bool = False, timeout: float = 60.0) -> Self:
        """Stop (or kill) and start again."""
        self.kill() if kill else self.stop()
        return self.start(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- unix sockets ---------------------------------------------------------------------------------

UNIX_PATH_MAX = 107
"""Longest unix socket path: ``sun_path`` is 108 bytes with the terminating NUL (linux ``un.h``)."""
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def check_dns_subdomain(what: str, value: str, limit: int = 253) -> str:
    """``value`` if it is a lower-case RFC 1123 DNS subdomain of at most ``limit`` characters (driver
    names: 63, node names: 253), else UsageError naming ``what``. Both become socket path components
    and API object names (k8s.io/apimachinery/pkg/util/validation: IsDNS1123Subdomain)."""
    if not value or len(value) > limit or not _DNS_SUBDOMAIN.match(value):
        raise UsageError(f"{what} {value!r}: must be a lower-case DNS subdomain of at most {limit} characters "
                         "(a-z, 0-9, '-', '.')")
    return value


def socket_accepts(path: Path, timeout: float = 0.5) -> bool:
    """True when a server accepts connections on the unix socket ``path`` (the readiness probe)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(path))
        except OSError:
            return False
        return True


def claim_socket_path(path: Path) -> None:
    """Make ``path`` free for a new unix socket, or raise UsageError naming it.

    Too long for ``sun_path``, taken by another file, or served by a live process: an error. A
    socket file nobody listens on (left by a killed process) is removed.
    """
    size = len(str(path).encode())
    if size > UNIX_PATH_MAX:
        raise UsageError(f"{path}: socket path is {size} bytes, more than the {UNIX_PATH_MAX} a unix socket allows; "
                         "use a shorter root directory")
    if not os.path.lexists(path):
        return
    if not path.is_socket():
        raise UsageError(f"{path}: exists and is not a socket; remove it or use another root directory")
    if not socket_accepts(path, timeout=1.0):
        path.unlink(missing_ok=True)  # left behind by a killed process
        return
    raise UsageError(f"{path}: socket is taken: another process is serving on it (a driver already running?)")


def release_socket_paths(*paths: Path) -> None:
    """Remove the socket files a server of ours stopped serving (never a file that is not a socket)."""
    for path in paths:
        try:
            if path.is_socket():
                path.unlink()
        except OSError:
            pass


# -- the child's side -----------------------------------------------------------------------------

def child_logging(level: str) -> None:
    """Log lines of a child process to stderr (its supervisor's log file) at ``level``."""
    logging.basicConfig(level=getattr(logging, level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s")


@contextlib.contextmanager
def stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT call ``stop`` (a clean shutdown) instead of ending the process."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def interrupt_on_sigterm() -> None:
    """From now on SIGTERM ends this process as Ctrl-C does (KeyboardInterrupt), so the same cleanup
    runs: a runner tears its cluster down and undoes its faults, ``cluster up`` removes half a cluster."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


_ENDING = False
"""In an :func:`in_processes` worker: a job was interrupted, so the jobs already handed to this worker
(the pool queues a few ahead, beyond cancelling) are refused instead of run."""


def _worker_signals() -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        global _ENDING
        _ENDING = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def _job(fn: Callable[..., R], *args: Any) -> R:
    """One :func:`in_processes` job in its worker; none starts after one was interrupted (the job may
    have put its own SIGTERM handler in place, so its KeyboardInterrupt counts too)."""
    global _ENDING
    if _ENDING:
        raise HarnessError("not started: the jobs were ended")
    try:
        return fn(*args)
    except KeyboardInterrupt:
        _ENDING = True
        raise


def in_processes(fn: Callable[..., R], jobs: Sequence[tuple[Any, ...]], parallel: int,
                 failed: Callable[[int, Exception], R], done: Callable[[R], None] | None = None) -> list[R]:
    """``fn(*job)`` for every job, each in a spawned process of its own, ``parallel`` at a time; the
    results in the order of ``jobs``.

    A job whose process raised or died gives ``failed(index, exception)`` (for the callers, an error
    result, never a pass); ``done`` sees each result as it comes. In the workers Ctrl-C and SIGTERM
    are KeyboardInterrupt, so a runner there cleans up; here Ctrl-C cancels the jobs not started.
    ``fn`` and the jobs must pickle (a module-level function, plain arguments)."""
    ctx = multiprocessing.get_context("spawn")
    out: dict[int, R] = {}
    pool = ProcessPoolExecutor(max_workers=parallel, mp_context=ctx, initializer=_worker_signals)
    futures = {pool.submit(_job, fn, *job): i for i, job in enumerate(jobs)}
    try:
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                out[i] = fut.result()
            except Exception as exc:  # noqa: BLE001 - the caller turns it into an error result
                out[i] = failed(i, exc)
            if done is not None:
                done(out[i])
    except KeyboardInterrupt:  # Ctrl-C reached the workers too (one process group): they clean up
        for fut in futures:
            fut.cancel()
        raise
    except BaseException:
        # Anything else ending the wait (an error in ``done``, a test's time limit) ends the jobs: the
        # running ones as SIGTERM does (their runners clean up), the rest never start (``_job``: those a
        # worker was already handed cannot be cancelled). Without this the pool's shutdown below waited
        # for every job still queued (hours for a kill matrix).
        for fut in futures:
            fut.cancel()
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            with contextlib.suppress(OSError):
                proc.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [out[i] for i in range(len(jobs))]


def wait_for_signal() -> None:
    """Block until SIGTERM or SIGINT."""
    done = threading.Event()
    with stop_on_signals(done.set):
        while not done.wait(1.0):
            pass


GC_THRESHOLD = (50_000, 20, 100)
"""The cyclic collector's thresholds in draguard's own processes (Python's default: 700, 10, 10)."""


def tune_gc() -> None:
    """Run the cyclic garbage collector far less often in this process (a setting of the user's own,
    anything but Python's default, is kept).

    draguard's processes hold thousands of decoded API objects (the runner's watch cache and timeline,
    the fake nodes' pods) and allocate a few hundred objects per watch event, so with the default
    thresholds a young collection ran every 700 allocations and a full one, walking every object
    held, every hundred of those. Nothing they keep forms reference cycles that must go soon:
    plain JSON is freed by reference counting. Measured at 200 nodes x 2000 pods, one run each, the
    runner spent 2.4 of its 11.1 CPU seconds collecting (13 full collections, 1.8 s); with these
    thresholds the harness used 37.3 CPU-s instead of 42.2 (runner 10.6 -> 8.6), peak memory 554
    -> 565 MiB.
    """
    if gc.get_threshold() == (700, 10, 10):
        gc.set_threshold(*GC_THRESHOLD)


def child_main(run: Callable[[list[str]], int | None], argv: list[str] | None = None) -> int:
    """Run a child's entry point: a library error is one line on stderr and its exit code (2 for bad
    input), an interrupt 130, as for the ``draguard`` command line (README, exit codes)."""
    tune_gc()
    try:
        return run(sys.argv[1:] if argv is None else argv) or 0
    except DraguardError as exc:
        print(f"draguard: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("draguard: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # argparse: bad arguments
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
