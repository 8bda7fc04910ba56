"""``draguard cluster up|down|status|kubeconfig|build|restart``: the local backend from the command line."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from draguard.harness.campaign.selfcheck import run_allocation_check
from draguard.harness.cluster import binaries as bins
from draguard.harness.cluster.kind import engine, quirks
from draguard.harness.cluster.kind.cluster import KindCluster, ensure_node_image, list_kind_clusters
from draguard.harness.cluster.kind.draguardimage import draguard_image
from draguard.harness.cluster.kind.driverimage import fake_driver_image
from draguard.harness.cluster.kind.image import upstream_driver_image
from draguard.harness.cluster.local import (
    COMPONENT_ORDER,
    DEFAULT_CLIENT_BURST,
    DEFAULT_CLIENT_QPS,
    ClusterConfig,
    LocalCluster,
    list_clusters,
)
from draguard.harness.core.errors import UsageError
from draguard.harness.core.process import interrupt_on_sigterm
from draguard.harness.kube import Kube
from draguard.reports.console import print_allocation_check, print_cluster_status
from draguard.reports.files import write_json

from . import options
from .options import KubeTarget

__all__ = ["command"]

_err = Console(stderr=True)
COMMAND = ("draguard", "draguard.cli")
"""The draguard image's launcher: ``/usr/local/bin/draguard`` runs ``python3 -m draguard.cli``."""


def _progress(message: str) -> None:
    _err.print(f"[dim]{message}[/dim]")


def _parse_pairs(values: tuple[str, ...], what: str, boolean: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        for part in item.split(","):
            if not part:
                continue
            key, sep, value = part.partition("=")
            if not sep or not key:
                raise UsageError(f"{what} {part!r}: expected KEY=VALUE")
            if boolean:
                if value.lower() not in ("true", "false"):
                    raise UsageError(f"{what} {part!r}: value must be true or false")
                out[key] = value.lower() == "true"
            else:
                out[key] = value
    return out


name_option = click.option("--name", default="default", show_default=True, help="Cluster name (several may run at once).")
backend_option = click.option("--backend", type=click.Choice(["local", "kind"]), default="local", show_default=True,
                              help="local: processes on this machine; kind: real nodes (kubelet, containerd, runc) in containers.")


@click.group("cluster")
def command() -> None:
    """Run a real local control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager)."""


@command.command("up")
@name_option
@options.bin_dir()
@click.option("--feature-gates", multiple=True, help="KEY=true|false[,...] for every component, e.g. GenericWorkload=true.")
@click.option("--runtime-config", multiple=True, help="GROUP/VERSION=true[,...] API versions to serve.")
@click.option("--kube-api-qps", "qps", type=click.IntRange(1, 100_000), default=DEFAULT_CLIENT_QPS, show_default=True,
              help="Client rate limit of the scheduler and the controller manager (upstream defaults: 50, 20).")
@click.option("--kube-api-burst", "burst", type=click.IntRange(1, 100_000), default=DEFAULT_CLIENT_BURST,
              show_default=True, help="Client burst of the scheduler and the controller manager.")
@click.option("--max-requests-inflight", "inflight", type=click.IntRange(2, 100_000), default=None,
              help="kube-apiserver --max-requests-inflight (mutating: half) [default: the apiserver's, 400/200].")
@click.option("--wait/--no-wait", default=False, help="Stay in the foreground until Ctrl-C, then tear down.")
@backend_option
@click.option("--workers", type=click.IntRange(0, 10), default=2, show_default=True, help="kind: worker nodes beside the control plane.")
def up(name: str, bin_dir: str | None, feature_gates: tuple[str, ...], runtime_config: tuple[str, ...], qps: int,
       burst: int, inflight: int | None, wait: bool, backend: str, workers: int) -> None:  # fmt: skip
    """Start a cluster and print its kubeconfig path."""
    if backend == "kind":
        _kind_up(name, workers, feature_gates, runtime_config, wait)
        return
    config = ClusterConfig(
        feature_gates=_parse_pairs(feature_gates, "feature gate", True),
        runtime_config=_parse_pairs(runtime_config, "runtime config", False),
        client_qps=qps,
        client_burst=burst,
        max_requests_inflight=inflight,
    )
    cluster = LocalCluster(name, config, bin_dir=bin_dir, die_with_parent=wait, progress=_progress)
    started = time.monotonic()
    # Ctrl-C during start-up must not leave half a cluster behind: up() tears down on any exception.
    interrupt_on_sigterm()
    cluster.up()
    _err.print(f"cluster [bold]{name}[/bold] ready in {time.monotonic() - started:.1f}s ({bins.K8S_VERSION})")
    _hold(cluster, wait)


def _hold(cluster: LocalCluster | KindCluster, wait: bool) -> None:
    """Print the kubeconfig; with ``--wait``, keep the cluster until Ctrl-C, then take it down."""
    click.echo(str(cluster.kubeconfig))
    if not wait:
        return
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.down()


@command.command("down")
@name_option
@click.option("--all", "all_", is_flag=True, help="Stop every local cluster.")
@click.option("--purge", is_flag=True, help="Also remove the run directory (logs, certificates, etcd data).")
@backend_option
def down(name: str, all_: bool, purge: bool, backend: str) -> None:
    """Stop a cluster; no process and no port is left behind."""
    if backend == "kind":
        _kind_down(name, all_)
        return
    names = list_clusters() if all_ else [name]
    for n in names:
        if purge and LocalCluster.remove_stopped(n):  # stopped earlier by a plain down: only its directory is left
            _err.print(f"cluster [bold]{n}[/bold] was stopped; its run directory is removed")
            continue
        LocalCluster.attach(n).down(remove=purge)
        _err.print(f"cluster [bold]{n}[/bold] stopped")


def _kind_up(name: str, workers: int, feature_gates: tuple[str, ...], runtime_config: tuple[str, ...], wait: bool) -> None:
    if feature_gates or runtime_config:
        raise UsageError("--feature-gates and --runtime-config apply to --backend local only")
    cluster = KindCluster(name, workers, progress=_progress)
    started = time.monotonic()
    interrupt_on_sigterm()
    cluster.up()
    _err.print(f"kind cluster [bold]{name}[/bold] ready in {time.monotonic() - started:.1f}s "
               f"(1 control plane + {workers} worker(s), {bins.K8S_VERSION})")
    _hold(cluster, wait)


def _kind_down(name: str, all_: bool) -> None:
    for n in (list_kind_clusters() or [name]) if all_ else [name]:
        for line in KindCluster(n, 0, progress=_progress).down():
            _progress(line)
        _err.print(f"kind cluster [bold]{n}[/bold] deleted")


@command.command("kind-image")
def kind_image() -> None:
    """Build (offline) or reuse the kind node image, and print its tag."""
    started = time.monotonic()
    eng = engine.find(quirks.detect(offline_image=True), progress=_progress)
    try:
        tag, _ = ensure_node_image(eng, _progress)
    finally:
        if eng.private and not list_kind_clusters():  # started only for this: leave nothing running
            engine.PrivateDockerd().stop(_progress)
    _err.print(f"node image ready in {time.monotonic() - started:.1f}s")
    click.echo(tag)


@command.command("kind-driver-image")
@name_option
@click.option("--driver", "which", type=click.Choice(["test", "fake"]), default="test", show_default=True,
              help="test: the upstream DRA test driver (deploy/dra-test-driver.yaml); fake: draguard's fake driver "
                   "(deploy/fake-driver.yaml), Debian's python3 and the wheel of this checkout, built offline and cached.")
def kind_driver_image(name: str, which: str) -> None:
    """Build a driver's image and load it into a kind cluster's nodes; print its tag."""
    cluster = KindCluster(name, progress=_progress)
    if KindCluster.of_kubeconfig(cluster.kubeconfig) is None:
        raise UsageError(f"kind cluster {name!r} is not up; `draguard cluster up --backend kind --name {name}` first")
    if which == "fake":
        t0 = time.monotonic()
        image, stages = fake_driver_image(progress=_progress)
        _progress(f"fake driver image {image.keyed_tag} in {time.monotonic() - t0:.1f}s "
                  + ("(cached)" if len(stages) == 1 else "(" + ", ".join(f"{k} {v}" for k, v in stages.items()) + ")"))
        cluster.load_image_archive(image.tarball)
        click.echo(image.tag)
        return
    with tempfile.TemporaryDirectory() as tmp:
        tag, archive = upstream_driver_image(Path(tmp) / "dra-test-driver.tar", progress=_progress)
        cluster.load_image_archive(archive)
    click.echo(tag)


@command.command("draguard-image")
@name_option
@click.option("--load/--no-load", default=True, show_default=True,
              help="Load the image into kind cluster NAME's nodes (--no-load: only build it and print its archive).")
def draguard_image_command(name: str, load: bool) -> None:
    """Build draguard's own image (the whole CLI, for deploy/draguard-certify-job.yaml and deploy/sonobuoy-plugin.yaml)
    offline, cached by its content; load it into a kind cluster; print its tag."""
    cluster = KindCluster(name, progress=_progress)
    if load and KindCluster.of_kubeconfig(cluster.kubeconfig) is None:
        raise UsageError(f"kind cluster {name!r} is not up; `draguard cluster up --backend kind --name {name}` first, "
                         "or --no-load")
    t0 = time.monotonic()
    image, stages = draguard_image(COMMAND, progress=_progress)
    _progress(f"draguard image {image.keyed_tag} in {time.monotonic() - t0:.1f}s "
              + ("(cached)" if len(stages) == 1 else "(" + ", ".join(f"{k} {v}" for k, v in stages.items()) + ")"))
    if load:
        cluster.load_image_archive(image.tarball)
        click.echo(image.tag)
    else:
        click.echo(f"{image.tag} {image.tarball}")


@command.command("status")
@name_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(name: str, as_json: bool) -> None:
    """Show each component's pid, liveness and readiness. Exit 1 if any is down."""
    cluster = LocalCluster.attach(name)
    st = cluster.status()
    if as_json:
        click.echo(json.dumps({"name": name, "kubeconfig": str(cluster.kubeconfig), "components": st}, indent=2))
    else:
        print_cluster_status(name, st, COMPONENT_ORDER)
    if not all(s["ready"] for s in st.values()):
        sys.exit(1)



@command.command("kubeconfig")
@name_option
@backend_option
def kubeconfig(name: str, backend: str) -> None:
    """Print the path of the cluster's admin kubeconfig."""
    if backend == "kind":
        path = KindCluster(name, progress=lambda s: None).kubeconfig
        if KindCluster.of_kubeconfig(path) is None:
            raise UsageError(f"kind cluster {name!r} is not up; `draguard cluster up --backend kind --name {name}` first")
        click.echo(str(path))
        return
    click.echo(str(LocalCluster.attach(name).kubeconfig))


@command.command("restart")
@name_option
@click.argument("component", type=click.Choice(["etcd", "apiserver", "scheduler", "controller-manager", *COMPONENT_ORDER]))
def restart(name: str, component: str) -> None:
    """Restart one component of a running cluster."""
    LocalCluster.attach(name).restart(component)
    _err.print(f"{component} restarted")


@command.command("build")
@click.option("--force", is_flag=True, help="Rebuild even if the cache has the binaries.")
@click.option("--download/--no-download", default=True, help="Try the official release binaries first.")
@click.option("--scheduler-perf", is_flag=True,
              help="Also build upstream scheduler_perf's DRA test binary (optional; `draguard bench dra-throughput` runs it).")
def build(force: bool, download: bool, scheduler_perf: bool) -> None:
    """Fetch or build the control-plane binaries (and draguard-kubelet) into the cache and print their directory."""
    entry = bins.cache_entry()
    if force and entry.exists():

        shutil.rmtree(entry)
    found = bins.resolve(allow_download=download, progress=_progress)
    bins.ensure_built(found, (bins.KUBELET,), progress=_progress)  # the hollow DRA kubelet, beside the control plane
    if scheduler_perf:
        bins.ensure_built(found, (bins.SCHEDULER_PERF,), progress=_progress)
    click.echo(str(found.directory))


@command.command("check")
@name_option
@options.kube_target("Check this cluster instead of a local one.", context=False)
@options.report_dir(help="Where selfcheck.json goes.")
def check(name: str, kube: KubeTarget, report_dir: Path) -> None:
    """Run the DRA allocation self-check against a cluster; exit 1 if a step fails."""
    client = Kube.from_kubeconfig(kube.kubeconfig) if kube.kubeconfig else LocalCluster.attach(name).kube()
    result = run_allocation_check(client)
    print_check(result)
    click.echo(str(write_json(report_dir / "selfcheck.json", result.as_dict()).resolve()))
    if not result.ok:
        sys.exit(1)


def print_check(result: Any) -> None:
    print_allocation_check(result.steps, result.ok, result.seconds, _err)
