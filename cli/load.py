"""``draguard load``: claim churn at a target rate with locust, invariants judged during and after.

    draguard load [--cluster NAME | --kubeconfig F [--context C] --allow-context C]
                  --rate 20 --duration 60s [--kinds gang,template,shared] [--workers N] --report-dir out
                  [--expect-workers K --master-bind 0.0.0.0 [--master-port 5557] [--worker-timeout 60]]

``--workers N`` starts N locust workers on this machine; ``--expect-workers K`` waits for K more,
started by hand on other machines with ``python -m draguard.harness.load.locustmain --worker
MASTER:PORT [--kubeconfig F]``, before the load starts (the master listens on ``--master-bind``,
127.0.0.1 unless given, so workers elsewhere need an address they reach).

A local draguard cluster (``draguard cluster up``, or ``--kubeconfig`` pointing at one of its
kubeconfigs) is always allowed; any other cluster is refused unless ``--allow-context`` names the
kubeconfig context the load would use. Exit 0: every operation finished, no invariant violated and
the target rate was kept; 1: an invariant was violated, an operation failed or the load fell behind
(achieved < 90% of the target); 2: bad input, unusable cluster, nothing allocatable (checked before
anything starts: no DeviceClass ``--device-class``, or no published device it selects), or the load
could not start (the master's port in use or its address not bindable, fewer workers than expected within
``--worker-timeout``); 130: interrupted.
"""

from __future__ import annotations

from pathlib import Path

import click

from draguard.harness.cluster.local import LocalCluster
from draguard.harness.core.errors import UsageError
from draguard.harness.cluster.preflight import require_allocatable
from draguard.harness.kube import RUN_LABEL, Kube
from draguard.harness.load.engine import (
    DEFAULT_MASTER_BIND,
    DEFAULT_MASTER_PORT,
    DEFAULT_WORKER_TIMEOUT,
    KINDS,
    MAX_DEFAULT_USERS,
    WORKER_COMMAND,
    LoadConfig,
    run_load,
)
from draguard.harness.scenario.format import parse_duration
from draguard.reports.console import print_load

from . import options
from .options import KubeTarget

__all__ = ["command"]


@click.command("load")
@click.option("--cluster", "cluster_name", default=None, help="A local draguard cluster by name [default: default].")
@options.kube_target("Any cluster's kubeconfig (refused unless --allow-context names its context, or it is local).",
                     allow=True)
@click.option("--namespace", default=None, help="Namespace for the load [default: a new one, deleted afterwards].")
@click.option("--device-class", default="gpu.draguard.dev", show_default=True, help="DeviceClass the claims request.")
@click.option("--devices-per-claim", type=click.IntRange(1, 128), default=1, show_default=True)
@click.option("--rate", type=click.FloatRange(0.01, 10_000), default=5.0, show_default=True,
              help="Target operations per second, all kinds together.")
@click.option("--duration", default="30s", show_default=True, help="How long operations are started (e.g. 60s, 5m).")
@click.option("--kinds", default=",".join(KINDS), show_default=True,
              help="Operation kinds: gang (pods with template claims), template (one pod), shared (pods sharing one claim).")
@click.option("--gang-size", type=click.IntRange(1, 64), default=2, show_default=True, help="Pods per gang/shared operation.")
@click.option("--users", type=click.IntRange(1, 10_000), default=None,
              help=f"Concurrent locust users [default: rate x 4, at least 2, at most {MAX_DEFAULT_USERS}].")
@click.option("--workers", type=click.IntRange(0, 64), default=0, show_default=True,
              help="Locust worker processes on this machine (locust's distributed mode).")
@click.option("--expect-workers", type=click.IntRange(0, 1024), default=0, show_default=True,
              help=f"Locust workers to wait for besides --workers, started by hand (other machines): "
                   f"{WORKER_COMMAND} MASTER:PORT.")
@click.option("--master-bind", default=None,
              help=f"Address the locust master listens on for workers (0.0.0.0: all) [default: {DEFAULT_MASTER_BIND}].")
@click.option("--master-port", type=click.IntRange(1, 65535), default=None,
              help=f"Port the locust master listens on for workers [default: {DEFAULT_MASTER_PORT}].")
@click.option("--worker-timeout", type=click.FloatRange(1, 3600), default=None,
              help=f"Seconds to wait for every worker to connect before giving up with exit 2 "
                   f"[default: {DEFAULT_WORKER_TIMEOUT:g}].")
@click.option("--op-timeout", type=click.FloatRange(1, 3600), default=60.0, show_default=True,
              help="Seconds an operation may take to run, and again to be released.")
@options.report_dir("draguard-load", help="Where summary.json and the load's reports go.")
def command(cluster_name: str | None, kube: KubeTarget, namespace: str | None, device_class: str, devices_per_claim: int, rate: float, duration: str, kinds: str,
            gang_size: int, users: int | None, workers: int, expect_workers: int, master_bind: str | None,
            master_port: int | None, worker_timeout: float | None, op_timeout: float, report_dir: Path) -> int:  # fmt: skip
    """Churn DRA claims at a target rate (locust, headless) and judge the invariants during and after."""
    kubeconfig, context = kube.kubeconfig, kube.context
    if kubeconfig is not None and cluster_name is not None:
        raise UsageError("--cluster and --kubeconfig: give one of them")
    try:
        seconds = parse_duration(duration).total_seconds()
    except ValueError as exc:
        raise UsageError(f"--duration: {exc}") from None
    if seconds <= 0:
        raise UsageError("--duration: must be positive")
    chosen = tuple(k.strip() for k in kinds.split(",") if k.strip())
    unknown = sorted(set(chosen) - set(KINDS))
    if not chosen or unknown:
        raise UsageError(f"--kinds: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(KINDS)}")
    distributed = {"--master-bind": master_bind, "--master-port": master_port, "--worker-timeout": worker_timeout}
    given = [name for name, value in distributed.items() if value is not None]
    if given and not (workers or expect_workers):
        raise UsageError(f"{', '.join(given)}: only with --workers or --expect-workers (locust's distributed mode)")
    if kubeconfig is None:
        kubeconfig = LocalCluster.attach(cluster_name or "default").kubeconfig
    elif not kube.is_local():
        active = kube.active_context()
        if kube.allow_context != active:
            raise UsageError(f"{kubeconfig} (context {active!r}) is not a local draguard cluster: load is refused "
                             f"unless --allow-context {active} names it")  # fmt: skip
    client = Kube.from_kubeconfig(kubeconfig, context)
    client.server_version()
    require_allocatable(client, device_class, where=str(kubeconfig))  # pre-flight: else every operation waits --op-timeout for nothing
    config = LoadConfig(kubeconfig=str(kubeconfig), context=context, namespace=namespace or "", rate=rate,
                        duration=seconds, kinds=chosen, gang_size=gang_size, devices_per_claim=devices_per_claim,
                        users=users, workers=workers, op_timeout=op_timeout, device_class=device_class,
                        out_dir=report_dir, expect_workers=expect_workers,
                        master_bind=master_bind or DEFAULT_MASTER_BIND, master_port=master_port or DEFAULT_MASTER_PORT,
                        worker_timeout=worker_timeout or DEFAULT_WORKER_TIMEOUT)  # fmt: skip
    own_namespace = namespace is None
    if own_namespace:
        namespace = f"dg-load-{config.run}"
        client.create_namespace(namespace, {RUN_LABEL: config.run})
    config = LoadConfig(**{**config.__dict__, "namespace": namespace})
    try:
        result = run_load(config, client, progress=lambda m: click.echo(m, err=True))
    finally:
        if own_namespace:
            client.delete("Namespace", str(namespace))
    print_load(result.summary)
    click.echo(str(report_dir / "summary.json"))
    return 0 if result.ok and not _failed(result.summary) else 1


def _failed(summary: dict[str, object]) -> bool:
    locust = summary.get("locust") or {}
    assert isinstance(locust, dict)
    return any(e.get("failures") for e in locust.get("entries", []))

