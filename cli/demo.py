"""``draguard demo``: the README's main command: a local cluster, the demo run, a report path."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from rich.console import Console

from draguard.harness.cluster.local import LocalCluster
from draguard.harness.selfcheck import run_allocation_check

from .cluster import print_check

__all__ = ["command"]


@click.command("demo")
@click.option("--report-dir", type=click.Path(file_okay=False), default="draguard-report", show_default=True)
@click.option("--bin-dir", envvar="DRAGUARD_BIN_DIR", help="Directory with the control-plane binaries.")
def command(report_dir: str, bin_dir: str | None) -> None:
    """Bring up a local control plane, run the DRA allocation check, tear down, print the report path."""
    err = Console(stderr=True)
    started = time.monotonic()
    with LocalCluster(f"demo-{int(time.time())}", bin_dir=bin_dir, progress=lambda m: err.print(f"[dim]{m}[/dim]")) as cluster:
        err.print(f"local control plane up in {time.monotonic() - started:.1f}s")
        result = run_allocation_check(cluster.kube())
    cluster.down(remove=True)
    print_check(result)
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "selfcheck.json").write_text(json.dumps(result.as_dict(), indent=2) + "\n")
    click.echo(f"report: {(out / 'selfcheck.json').resolve()}")
    if not result.ok:
        sys.exit(1)
