"""``draguard proxy``: run the gRPC interposer between fake nodes and real plugins until SIGTERM or Ctrl-C."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from draguard.harness.core.process import wait_for_signal
from draguard.harness.proxy import FaultSet, Interposer

__all__ = ["command"]


@click.command("proxy")
@click.option(
    "--plugin-root", required=True, type=click.Path(exists=True, file_okay=False),
    help="Where the real plugins keep <node>/plugins_registry and <node>/plugins.",
)
@click.option(
    "--node-root", required=True, type=click.Path(file_okay=False),
    help="Where the fake nodes look (the proxy's sockets go here).",
)
@click.option(
    "--faults", type=click.Path(exists=True, dir_okay=False),
    help="YAML/JSON fault rules; re-read whenever the file changes.",
)
@click.option(
    "--record", type=click.Path(dir_okay=False),
    help="Write all call records to this file [default: <node-root>/<node>/proxy-calls.jsonl].",
)
@click.option("--run-label", help="Tag every call record with this run id.")
@click.option("-v", "--verbose", is_flag=True, help="Log plugins as they come and go, and fault reloads.")
def command(
    plugin_root: str, node_root: str, faults: str | None, record: str | None, run_label: str | None, verbose: bool
) -> None:
    """Proxy every plugin's registration and DRA sockets, recording calls and injecting faults."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    fault_set = FaultSet(Path(faults)) if faults else FaultSet()
    interposer = Interposer(
        Path(plugin_root), Path(node_root), fault_set, Path(record) if record else None, run_label
    ).start()
    try:
        click.echo(f"draguard proxy: {plugin_root} -> {node_root}", err=True)
        wait_for_signal()
    finally:
        interposer.stop()
