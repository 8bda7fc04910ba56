"""The load process: locust as a library, headless, in its own process (``import locust`` patches
sockets with gevent for the whole process, so it never runs inside the caller).

    python -m draguard.harness.load.locustmain CONFIG.json              # local runner, or master with workers
    python -m draguard.harness.load.locustmain CONFIG.json --worker HOST:PORT

With ``workers`` > 0 in the config the process is locust's master and starts that many worker
processes on this machine (locust's own distributed mode: the same users in each, stats merged in
the master); workers on other machines are started the same way with ``--worker MASTER:PORT``.
Writes ``<report>/locust_stats.csv``, ``_stats_history.csv``, ``_failures.csv``, ``_exceptions.csv``
and ``locust.json`` (per request type and name: count, failures, p50/p90/p99/max in ms; operations
started and finished; the run's wall time).
"""

from __future__ import annotations

import os
import sys

from .users import CONFIG_ENV

if __name__ == "__main__":
    os.environ.setdefault(CONFIG_ENV, os.path.abspath(sys.argv[1]))

import json  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
from locust.env import Environment  # noqa: E402
from locust.stats import StatsCSVFileWriter  # noqa: E402

from .users import ChurnUser, settings  # noqa: E402

PERCENTILES = [0.5, 0.9, 0.99, 1.0]


def _summary(env: Environment, wall: float) -> dict[str, Any]:
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
    return {"wall_s": wall, "operations_started": started, "operations_finished": finished,
            "entries": entries, "errors": errors}  # fmt: skip


def _finish_csv(writer: StatsCSVFileWriter) -> None:
    """One last write of the per-request, failure and exception files, then close them all."""
    import csv

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


def main(argv: list[str]) -> int:
    s = settings()
    report = Path(s["report_dir"])
    report.mkdir(parents=True, exist_ok=True)
    if len(argv) > 2 and argv[2] == "--worker":
        host, port = argv[3].rsplit(":", 1)
        env = Environment(user_classes=[ChurnUser], stop_timeout=float(s["op_timeout"]) * 2 + 10)
        env.create_worker_runner(host, int(port))
        assert env.runner is not None
        env.runner.greenlet.join()
        return 0
    # stop_timeout: operations in flight at the end finish (deletion and release included).
    env = Environment(user_classes=[ChurnUser], stop_timeout=float(s["op_timeout"]) * 2 + 10)
    workers: list[subprocess.Popen[bytes]] = []
    runner: Any
    if int(s.get("workers", 0)) > 0:
        runner = env.create_master_runner("127.0.0.1", int(s.get("master_port", 5557)))
        for _ in range(int(s["workers"])):
            workers.append(subprocess.Popen([sys.executable, "-m", "draguard.harness.load.locustmain", argv[1],
                                             "--worker", f"127.0.0.1:{runner.master_bind_port}"]))  # fmt: skip
        deadline = time.monotonic() + 60
        while runner.worker_count < len(workers) and time.monotonic() < deadline:
            gevent.sleep(0.1)
        if runner.worker_count < len(workers):
            print(f"only {runner.worker_count} of {len(workers)} locust workers connected", file=sys.stderr)
    else:
        runner = env.create_local_runner()
    writer = StatsCSVFileWriter(env, PERCENTILES, str(report / "locust"), full_history=True)
    csv_loop = gevent.spawn(writer)
    started = time.monotonic()
    runner.start(int(s["users"]), spawn_rate=max(1.0, float(s["users"])))
    gevent.sleep(float(s["duration"]))
    # Stop starting operations; those in flight finish (their deletion and release are measured).
    runner.stop()
    deadline = time.monotonic() + float(s["op_timeout"]) * 2 + 10
    while runner.user_count > 0 and time.monotonic() < deadline:
        gevent.sleep(0.2)
    wall = time.monotonic() - started
    summary = _summary(env, wall)
    runner.quit()
    csv_loop.kill()
    _finish_csv(writer)
    for w in workers:
        try:
            w.wait(20)
        except subprocess.TimeoutExpired:
            w.kill()
    (report / "locust.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
