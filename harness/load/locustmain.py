"""The load process: locust as a library, headless, in its own process (``import locust`` patches
sockets with gevent for the whole process, so it never runs inside the caller).

    python -m draguard.harness.load.locustmain CONFIG.json          # local runner, or master
    python -m draguard.harness.load.locustmain --worker MASTER:PORT [--kubeconfig F [--context C]]
                                               [--connect-timeout SECONDS]

A local runner when the config asks for no workers. Otherwise the process is locust's master
(locust's distributed mode: the users run in the workers, their stats merged in the master): it
listens on ``master_bind``:``master_port`` (default 127.0.0.1:5557), starts ``workers`` worker
processes on this machine and waits up to ``worker_timeout`` seconds until those and
``expect_workers`` more (started by hand, on other machines) have connected, then starts the load.
A worker needs no config file: the master forwards the settings (see :mod:`.users`); its
kubeconfig is the master's path unless ``--kubeconfig`` names one on the worker's machine. It
retries the master for ``--connect-timeout`` seconds (default 60) and exits when the master tells it
to, at the end of the load.

The master writes ``<out_dir>/locust_stats.csv``, ``_stats_history.csv``, ``_failures.csv``,
``_exceptions.csv`` and ``locust.json`` (per request type and name: count, failures,
p50/p90/p99/max in ms; operations started and finished; the workers that took part; the run's wall
time).

Exit codes: 0 the load ran (a worker: until its master ended it); 1 every worker left before the
load's end (``locust.json`` is still written); 2 it could not start, with one
line on stderr (``draguard: error: ...``): bad arguments, the master's address not bindable or
its port in use, fewer workers than expected connected in time, a master not reachable, a worker
without a usable kubeconfig. Nothing it started is left running.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gevent
from locust import argument_parser
from locust.env import Environment
from locust.exception import RPCError
from locust.runners import WORKER_REPORT_INTERVAL, MasterRunner
from locust.stats import StatsCSVFileWriter

from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.core.process import child_logging, child_main, spawn

from .engine import DEFAULT_MASTER_BIND, DEFAULT_MASTER_PORT, DEFAULT_WORKER_TIMEOUT, WORKER_COMMAND
from .users import CONFIG_ENV, SETTINGS_OPTION, ChurnUser, settings, use_settings

__all__ = ["main", "DEFAULT_CONNECT_TIMEOUT"]

PERCENTILES = [0.5, 0.9, 0.99, 1.0]
DEFAULT_CONNECT_TIMEOUT = 60.0
"""Seconds a worker tries to reach its master."""
_ALL_INTERFACES = {"*": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}
"""Bind addresses that accept every interface, and the address a worker on this machine uses."""


def _summary(env: Environment, wall: float, workers: int) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    for (name, kind), e in sorted(env.stats.entries.items()):
        entries.append({
            "kind": kind, "name": name, "count": e.num_requests, "failures": e.num_failures,
            "p50_ms": e.get_response_time_percentile(0.5), "p90_ms": e.get_response_time_percentile(0.9),
            "p99_ms": e.get_response_time_percentile(0.99), "max_ms": e.max_response_time,
            "mean_ms": e.avg_response_time,
        })  # fmt: skip
    errors = [{"kind": f.method, "name": f.name, "error": str(f.error), "count": f.occurrences}
              for f in env.stats.errors.values()]  # fmt: skip
    started = sum(int(e["count"]) for e in entries if e["name"] == "create")
    finished = sum(int(e["count"]) for e in entries if e["name"] == "released")
    return {"wall_s": wall, "operations_started": started, "operations_finished": finished, "workers": workers,
            "entries": entries, "errors": errors}  # fmt: skip


def _finish_csv(writer: StatsCSVFileWriter) -> None:
    """One last write of the per-request, failure and exception files, then close them all."""
    files = (
        (writer.requests_csv_filehandle, writer.requests_csv_columns, writer._requests_data_rows),
        (writer.failures_csv_filehandle, writer.failures_columns, writer._failures_data_rows),
        (writer.exceptions_csv_filehandle, writer.exceptions_columns, writer._exceptions_data_rows),
    )
    for handle, columns, rows in files:
        handle.seek(0)
        handle.truncate()
        out = csv.writer(handle)
        out.writerow(columns)
        rows(out)
    writer.close_files()


def _address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6]:PORT`` too) -> (host, port)."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--worker {value!r}: expected MASTER:PORT (e.g. 10.0.0.5:5557)")
    return host, int(port)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m draguard.harness.load.locustmain",
                                description="The locust process of draguard load: local runner, master or worker.")
    p.add_argument("config", nargs="?", help="The load's settings (JSON, written by draguard load); the master's.")
    p.add_argument("--worker", metavar="MASTER:PORT", help="Run as a worker of the master at MASTER:PORT.")
    p.add_argument("--kubeconfig", help="A worker's kubeconfig for the cluster [default: the master's path].")
    p.add_argument("--context", help="Context in --kubeconfig [default: the master's, or the current one].")
    p.add_argument("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT,
                   help="Seconds a worker tries to reach its master [default: %(default)g].")  # fmt: skip
    return p


def main(argv: list[str]) -> int:
    child_logging("INFO")
    args = _parser().parse_args(argv)
    if args.worker is not None:
        return _worker(args)
    if args.config is None:
        raise UsageError("give the load's CONFIG.json (master or local runner) or --worker MASTER:PORT")
    if args.kubeconfig or args.context:
        raise UsageError("--kubeconfig and --context are a worker's options (the master's are in CONFIG.json)")
    os.environ[CONFIG_ENV] = os.path.abspath(args.config)
    return _run()


# -- worker ------------------------------------------------------------------------------------


def _reachable(host: str, port: int, timeout: float) -> None:
    """Wait until the master accepts TCP connections; a name that does not resolve fails at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=max(0.5, min(5.0, deadline - time.monotonic()))).close()
            return
        except socket.gaierror as exc:
            raise UsageError(f"--worker {host}:{port}: cannot resolve {host!r}: {exc.strerror}") from exc
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise HarnessError(f"cannot reach the locust master at {host}:{port} within {timeout:g}s "
                                   f"({exc.strerror or exc}); is `draguard load --expect-workers` running there, "
                                   "with --master-bind an address this machine reaches?") from exc  # fmt: skip
            gevent.sleep(0.5)


def _worker(args: argparse.Namespace) -> int:
    host, port = _address(args.worker)
    if args.config:
        raise UsageError("a worker takes no CONFIG.json: its master forwards the settings")
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        raise UsageError(f"--kubeconfig {args.kubeconfig}: no such file")
    started = time.monotonic()
    _reachable(host, port, args.connect_timeout)
    env = Environment(user_classes=[ChurnUser])  # stop_timeout comes from the master with the users
    events: Any = env.events  # locust's EventHook is untyped
    problems: list[str] = []

    def leave() -> None:
        events.quitting.fire(environment=env, reverse=True)  # tells the master this worker is gone
        runner.quit()

    def install(environment: Environment, **_: Any) -> None:
        """Fired by the spawn message, after its options are in and before any user starts."""
        s = dict(getattr(environment.parsed_options, SETTINGS_OPTION, None) or {})
        if args.kubeconfig:
            s["kubeconfig"], s["context"] = os.path.abspath(args.kubeconfig), args.context
        elif args.context:
            s["context"] = args.context
        if not s.get("run"):
            problems.append(f"the master at {host}:{port} sent no load settings: is it `draguard load`?")
        elif not os.path.isfile(str(s.get("kubeconfig") or "")):
            problems.append(f"the master's kubeconfig {s['kubeconfig']} is not on this machine: "
                            "pass --kubeconfig with one for the same cluster")  # fmt: skip
        else:
            use_settings(s)
            return
        # Spawned before the spawn message's users, so it runs first and they never start.
        gevent.spawn(leave)

    events.test_start.add_listener(install)
    # The handshake after TCP: locust retries for 5 minutes on its own; the rest of our time is enough.
    left = max(5.0, args.connect_timeout - (time.monotonic() - started))
    try:
        with gevent.Timeout(left, HarnessError(f"the locust master at {host}:{port} did not answer within "
                                               f"{args.connect_timeout:g}s (is it a locust master?)")):  # fmt: skip
            runner = env.create_worker_runner(host, port)
    except RPCError as exc:
        raise HarnessError(f"cannot connect to the locust master at {host}:{port}: {exc}") from exc
    runner.greenlet.join()
    if problems:
        raise UsageError(problems[0])
    return 0


# -- master or local runner --------------------------------------------------------------------


def _master(env: Environment, bind: str, port: int) -> MasterRunner:
    in_use = HarnessError(f"cannot listen for locust workers on {bind}:{port}: the port is in use "
                          "(another load's master?); choose another with --master-port")  # fmt: skip
    try:
        return env.create_master_runner(master_bind_host=bind, master_bind_port=port)
    except SystemExit as exc:  # locust versions whose message it recognises log "port ... was busy" and exit
        raise in_use from exc
    except RPCError as exc:
        if "Address already in use" in str(exc):
            raise in_use from exc
        raise HarnessError(f"cannot listen for locust workers on {bind}:{port}: {exc} "
                           "(--master-bind takes an address of this machine, or 0.0.0.0 for all)") from exc  # fmt: skip


def _stop_workers(procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _wait_for_workers(runner: MasterRunner, procs: list[subprocess.Popen[bytes]], remote: int, timeout: float,
                      where: str) -> None:  # fmt: skip
    expected = len(procs) + remote
    deadline = time.monotonic() + timeout
    shown = -1
    while runner.worker_count < expected:
        if runner.worker_count != shown:
            shown = runner.worker_count
            print(f"locust master on {where}: {shown} of {expected} workers connected", file=sys.stderr, flush=True)
        for p in procs:
            if p.poll() is not None:
                raise HarnessError(f"a locust worker started on this machine exited with {p.returncode} "
                                   "before the load started (see the log above)")  # fmt: skip
        if time.monotonic() >= deadline:
            raise HarnessError(f"only {runner.worker_count} of {expected} locust workers connected to {where} within "
                               f"{timeout:g}s ({len(procs)} started on this machine, {remote} expected from others: "
                               f"`{WORKER_COMMAND} HOST:{where.rsplit(':', 1)[1]}`)")
        gevent.sleep(0.1)


def _run() -> int:
    s = settings()
    report = Path(s["out_dir"])
    report.mkdir(parents=True, exist_ok=True)
    local, remote = int(s.get("workers", 0)), int(s.get("expect_workers", 0))
    # stop_timeout: operations in flight at the end finish (deletion and release included).
    env = Environment(user_classes=[ChurnUser], stop_timeout=float(s["op_timeout"]) * 2 + 10)
    procs: list[subprocess.Popen[bytes]] = []
    seen: set[str] = set()
    done: set[str] = set()  # workers whose users all stopped since they were told to quit: their last report is in
    quitting = [False]
    runner: Any
    if local + remote > 0:
        bind, port = str(s.get("master_bind") or DEFAULT_MASTER_BIND), int(s.get("master_port", DEFAULT_MASTER_PORT))
        # Locust forwards custom options to its workers with each spawn message: the settings ride there.
        env.parsed_options = argparse.Namespace(**{**argument_parser.default_args_dict(), "headless": True,
                                                   SETTINGS_OPTION: s})  # fmt: skip
        runner = _master(env, bind, port)
        port = runner.server.port
        where = f"{bind}:{port}"
        events: Any = env.events  # locust's EventHook is untyped
        events.worker_connect.add_listener(lambda client_id, **_: seen.add(client_id))

        def on_report(client_id: str, data: dict[str, Any], **_: Any) -> None:
            if quitting[0] and data.get("user_count") == 0:
                done.add(client_id)

        events.worker_report.add_listener(on_report)
        child_env = {k: v for k, v in os.environ.items() if k != CONFIG_ENV}  # as a worker on another machine
        try:
            for _ in range(local):
                procs.append(spawn([sys.executable, "-m", "draguard.harness.load.locustmain",
                                    "--worker", f"{_ALL_INTERFACES.get(bind, bind)}:{port}"],
                                   stdin=subprocess.DEVNULL, env=child_env))  # fmt: skip
            _wait_for_workers(runner, procs, remote, float(s.get("worker_timeout", DEFAULT_WORKER_TIMEOUT)), where)
        except BaseException:
            runner.quit()
            for p in procs:
                p.terminate()
            _stop_workers(procs, 10)
            raise
    else:
        runner = env.create_local_runner()
    writer = StatsCSVFileWriter(env, PERCENTILES, str(report / "locust"), full_history=True)
    csv_loop = gevent.spawn(writer)
    started = time.monotonic()
    runner.start(int(s["users"]), spawn_rate=max(1.0, float(s["users"])))
    lost = False
    while time.monotonic() < started + float(s["duration"]):
        gevent.sleep(min(0.5, max(0.0, started + float(s["duration"]) - time.monotonic())))
        if seen and runner.worker_count == 0:
            lost = True
            print("draguard: error: every locust worker left before the load's end", file=sys.stderr, flush=True)
            break
    # Stop starting operations; those in flight finish (their deletion and release are measured).
    deadline = time.monotonic() + float(s["op_timeout"]) * 2 + 10
    if seen:
        # Each worker is told to quit, not to stop: locust's worker answers "stop" by sleeping stop_timeout in its
        # message loop, deaf to a later "quit" until then. On "quit" it stops its users (those in flight finish)
        # and sends a last report, with user_count 0 once they all have: the master waits for that from each.
        quitting[0] = True
        for client_id in seen:
            runner.send_message("quit", client_id=client_id)
        last = deadline + 2 * WORKER_REPORT_INTERVAL
        while not lost and not seen <= done and time.monotonic() < last and runner.worker_count > 0:
            gevent.sleep(0.2)
    else:
        runner.stop()
        while runner.user_count > 0 and time.monotonic() < deadline:
            gevent.sleep(0.2)
    wall = time.monotonic() - started
    summary = _summary(env, wall, len(seen))
    runner.quit()
    csv_loop.kill()
    _finish_csv(writer)
    _stop_workers(procs, 20)
    (report / "locust.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(child_main(main))
