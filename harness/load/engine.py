"""Run a claim-churn load against a cluster and judge the invariants during and after it.

:func:`run_load` creates the load's ResourceClaimTemplate, starts the locust process
(:mod:`.locustmain`, its own process: locust patches sockets with gevent), judges the continuous
invariants (``claim-atomic``, ``no-double-allocation``, ``topology``) every ``judge_interval``
seconds from the API while it runs, then, once everything the load created is deleted and gone,
``no-leak`` against the device inventory seen before the load. The summary (``summary.json`` in
its output folder ``out_dir``, beside locust's CSV files) has per operation kind and phase the p50, p90, p99
and max times, the errors, the target and the achieved operation rate, whether the load fell
behind, and the invariants' verdicts.

With ``workers`` or ``expect_workers`` the locust process is a master that waits for that many
workers (those on this machine it starts; the others are started by hand with
:data:`WORKER_COMMAND`, on other machines) and listens on ``master_bind``:``master_port``; a load
whose workers do not all connect within ``worker_timeout``, or whose master cannot listen, does not
start (:class:`HarnessError`).

Used by ``draguard load`` and by the ``load`` chaos step (a churn phase inside a scenario).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from draguard.harness.core.errors import EXIT_USAGE, HarnessError
from ..invariants import DeviceId, Snapshot, evaluate
from ..kube import RUN_LABEL, Kube, Obj

LOAD_LABEL = "draguard.dev/load"
"""Every object of one load carries it, with the load's id as value."""

__all__ = ["LOAD_LABEL", "LoadConfig", "LoadResult", "run_load", "load_settings", "KINDS", "BEHIND_RATIO", "CONTINUOUS",
           "MAX_DEFAULT_USERS", "WORKER_COMMAND", "DEFAULT_MASTER_BIND", "DEFAULT_MASTER_PORT",
           "DEFAULT_WORKER_TIMEOUT"]

KINDS = ("gang", "template", "shared")
BEHIND_RATIO = 0.9
"""The load fell behind when it started fewer than this share of the operations its target asks for."""
CONTINUOUS = ("claim-atomic", "no-double-allocation", "topology")
"""Judged while the load runs (``no-leak`` is judged after it stops and everything is gone)."""
MAX_DEFAULT_USERS = 500
"""The default user count is the rate times 4 (about 4 s per operation), at least 2 and at most this."""
CANNOT_START = EXIT_USAGE
"""The locust process's exit code when the load could not start (its last ``draguard: error:`` line says why)."""
WORKER_COMMAND = "python -m draguard.harness.load.locustmain --worker"
"""How a worker is started on another machine (then ``MASTER:PORT``)."""
DEFAULT_MASTER_BIND = "127.0.0.1"
DEFAULT_MASTER_PORT = 5557
DEFAULT_WORKER_TIMEOUT = 60.0


@dataclass(frozen=True)
class LoadConfig:
    kubeconfig: str
    namespace: str
    device_class: str
    out_dir: Path
    """Where its files go (``summary.json``, locust's CSV files and log): ``draguard load --report-dir``,
    or for a ``load`` step a folder in the run's record."""
    context: str | None = None
    rate: float = 5.0
    """Target operations per second (all kinds together)."""
    duration: float = 30.0
    kinds: tuple[str, ...] = KINDS
    gang_size: int = 2
    """Pods per ``gang`` and per ``shared`` operation."""
    devices_per_claim: int = 1
    users: int | None = None
    """Concurrent locust users (default: enough for the rate at about 4 s per operation)."""
    workers: int = 0
    """Locust worker processes on this machine (0 and no ``expect_workers``: one local runner)."""
    expect_workers: int = 0
    """Locust workers started by hand (on other machines) that the master waits for, besides ``workers``."""
    master_bind: str = DEFAULT_MASTER_BIND
    """The interface the locust master listens on for its workers (``0.0.0.0``: all)."""
    master_port: int = DEFAULT_MASTER_PORT
    worker_timeout: float = DEFAULT_WORKER_TIMEOUT
    """Seconds the master waits for its workers to connect before the load is given up."""
    op_timeout: float = 60.0
    judge_interval: float = 1.0
    cleanup_timeout: float = 60.0
    image: str = "registry.k8s.io/pause:3.10"
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    """The load's id (label ``draguard.dev/load``): what it selects, deletes and waits for."""
    shared_config: tuple[Obj, ...] = ()
    """Device config entries (``spec.devices.config``) of each ``shared`` claim: the sharing strategy
    several pods on one claim need (sharing-explicit); empty for a driver without one."""
    run_label: str | None = None
    """Value of the run label (``draguard.dev/run``) on what it creates (default: ``run``); a load
    inside a scenario uses the scenario run's, so the run's cleanup also finds its leftovers."""

    @property
    def user_count(self) -> int:
        return self.users or max(2, min(MAX_DEFAULT_USERS, int(self.rate * 4 + 0.999)))

    @property
    def distributed(self) -> bool:
        return self.workers + self.expect_workers > 0


@dataclass
class LoadResult:
    summary: dict[str, Any]
    violations: dict[str, list[str]]
    behind: bool
    error: str | None = None

    @property
    def ok(self) -> bool:
        return not self.error and not any(self.violations.values()) and not self.behind


def _claim_spec(config: LoadConfig) -> Obj:
    return {"devices": {"requests": [{"name": "devices", "exactly": {
        "deviceClassName": config.device_class, "allocationMode": "ExactCount", "count": config.devices_per_claim}}]}}


def _shared_claim_spec(config: LoadConfig) -> Obj:
    spec = _claim_spec(config)
    if config.shared_config:
        spec["devices"]["config"] = [dict(c) for c in config.shared_config]
    return spec


def _snapshot(kube: Kube, namespace: str, inventory: frozenset[DeviceId], t0: float) -> Snapshot:
    return Snapshot(
        time=time.monotonic() - t0,
        pods=tuple(kube.items("Pod", namespace)),
        claims=tuple(kube.items("ResourceClaim")),
        slices=tuple(kube.items("ResourceSlice")),
        device_classes=tuple(kube.items("DeviceClass")),
        initial_inventory=inventory,
    )


def _available(snapshot: Snapshot) -> frozenset[DeviceId]:
    allocated = {d for _, _, d in snapshot.allocated()}
    return frozenset(set(snapshot.devices) - allocated)


def load_settings(config: LoadConfig) -> dict[str, Any]:
    """What the locust process and each of its workers need: plain JSON (the master forwards it to
    workers in locust's messages), nothing else."""
    prefix = f"load-{config.run}"
    return {
        "kubeconfig": config.kubeconfig, "context": config.context, "namespace": config.namespace,
        "run": config.run, "run_label": config.run_label or config.run, "prefix": prefix,
        "template": f"{prefix}-tpl", "claim_spec": _claim_spec(config), "shared_claim_spec": _shared_claim_spec(config),
        "rate": config.rate, "users": config.user_count, "duration": config.duration, "kinds": list(config.kinds),
        "gang_size": config.gang_size, "op_timeout": config.op_timeout, "workers": config.workers,
        "expect_workers": config.expect_workers, "master_bind": config.master_bind, "master_port": config.master_port,
        "worker_timeout": config.worker_timeout, "image": config.image, "out_dir": str(config.out_dir),
    }  # fmt: skip


def _error_line(log: Path, start: int) -> str | None:
    """The last ``draguard: error:`` line the locust process wrote to its log from ``start`` on."""
    try:
        with log.open("rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    found = [line.split("draguard: error: ", 1)[1].strip() for line in text.splitlines() if "draguard: error: " in line]
    return found[-1] if found else None


def run_load(config: LoadConfig, kube: Kube | None = None, progress: Callable[[str], None] = lambda m: None) -> LoadResult:
    """Run the load to its end (blocking); raises HarnessError when it cannot start (after deleting what it
    created)."""
    kube = kube or Kube.from_kubeconfig(config.kubeconfig, config.context)
    report = Path(config.out_dir)
    report.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    labels = {RUN_LABEL: config.run_label or config.run, LOAD_LABEL: config.run}
    template = f"load-{config.run}-tpl"
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": template, "namespace": config.namespace, "labels": labels},
                 "spec": {"metadata": {"labels": labels}, "spec": _claim_spec(config)}})  # fmt: skip
    inventory = _available(_snapshot(kube, config.namespace, frozenset(), t0))
    settings_file = report / "load-config.json"
    settings_file.write_text(json.dumps(load_settings(config), indent=2) + "\n")
    violations: dict[str, dict[str, str]] = {}
    stop = threading.Event()

    def judge(names: tuple[str, ...], snap: Snapshot) -> None:
        for name, found in evaluate(snap, names).items():
            for v in found:
                violations.setdefault(name, {}).setdefault(v.message, f"{v.time:.1f}s: {v.message}")

    def judge_loop() -> None:
        while not stop.wait(config.judge_interval):
            try:
                judge(CONTINUOUS, _snapshot(kube, config.namespace, inventory, t0))
            except HarnessError as exc:
                progress(f"invariants: cannot read the cluster: {exc}")

    judging = threading.Thread(target=judge_loop, name="load-invariants", daemon=True)
    judging.start()
    workers = config.workers + config.expect_workers
    progress(f"load: {config.rate:g} operations/s ({', '.join(config.kinds)}) for {config.duration:g}s with "
             f"{config.user_count} users" + (f" on {workers} workers" if workers else ""))  # fmt: skip
    if config.expect_workers:
        progress(f"load: waiting up to {config.worker_timeout:g}s for {config.expect_workers} more worker(s) at "
                 f"{config.master_bind}:{config.master_port}; start each with: "
                 f"{WORKER_COMMAND} HOST:{config.master_port}")  # fmt: skip
    log_path = report / "locust.log"
    log = log_path.open("ab")
    log_start = log.tell()
    error = None
    cannot_start = None
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "draguard.harness.load.locustmain", str(settings_file)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "DRAGUARD_LOAD_CONFIG": str(settings_file)},
            timeout=config.duration + 2 * config.op_timeout + 120
            + (config.worker_timeout if config.distributed else 0),
        )  # fmt: skip
        if proc.returncode == CANNOT_START:
            cannot_start = _error_line(log_path, log_start) or f"the locust process exited with {CANNOT_START}"
            error = f"the load did not start: {cannot_start} (see {log_path})"
        elif proc.returncode != 0:
            why = _error_line(log_path, log_start)
            error = f"the locust process exited with {proc.returncode}{': ' + why if why else ''} (see {log_path})"
    except subprocess.TimeoutExpired:
        error = "the locust process did not end in time"
    finally:
        log.close()
        stop.set()
        judging.join(timeout=30)
    # Everything the load made goes; then nothing may be left behind.
    selector = f"{LOAD_LABEL}={config.run}"
    for kind in ("Pod", "ResourceClaim", "ResourceClaimTemplate"):
        for obj in kube.items(kind, config.namespace, label_selector=selector):
            kube.delete(kind, obj["metadata"]["name"], config.namespace, grace_seconds=0)
    deadline = time.monotonic() + config.cleanup_timeout
    while time.monotonic() < deadline:
        if not kube.items("Pod", config.namespace, label_selector=selector) and not any(
            c["metadata"].get("labels", {}).get(LOAD_LABEL) == config.run
            for c in kube.items("ResourceClaim", config.namespace)
        ):
            break
        time.sleep(0.5)
    if cannot_start is not None:
        raise HarnessError(f"the load did not start: {cannot_start} (see {log_path})")
    judge(("no-leak",), _snapshot(kube, config.namespace, inventory, t0))
    summary_path = report / "locust.json"
    locust = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    started = int(locust.get("operations_started", 0))
    achieved = started / config.duration if config.duration else 0.0
    behind = achieved < BEHIND_RATIO * config.rate
    result = LoadResult(
        summary={
            "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()},
            "target_rate": config.rate, "achieved_rate": round(achieved, 3), "fell_behind": behind,
            "locust": locust, "invariants": {n: sorted(v.values()) for n, v in violations.items()},
            "checked": [*CONTINUOUS, "no-leak"], "error": error,
        },  # fmt: skip
        violations={n: sorted(v.values()) for n, v in violations.items()},
        behind=behind,
        error=error,
    )
    (report / "summary.json").write_text(json.dumps(result.summary, indent=2) + "\n")
    return result
