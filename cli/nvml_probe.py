"""``draguard nvml-probe``: print what NVML (or a fake node's device truth) reports about the GPUs.

Exit 0 when devices were probed; 2 when there is nothing to probe (no NVML library, no driver, no
GPU) or NVML failed, with one line saying which.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from draguard.harness.core.errors import EXIT_OK, EXIT_USAGE
from draguard.harness.devices.probe import DeviceProbe, FakeProbe, NvmlProbe
from draguard.harness.devices.truth import DeviceTruth

__all__ = ["command"]


@click.command("nvml-probe")
@click.option("--library", default=None, help="NVML library to load instead of libnvidia-ml.so.1")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="probe a fake node's device truth under this root instead (with --node)")  # fmt: skip
@click.option("--node", default=None, help="the fake node (with --root)")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def command(library: str | None, root: Path | None, node: str | None, as_json: bool) -> None:
    """Show every GPU with its uuid, memory, compute processes and MIG devices."""
    if (root is None) != (node is None):
        raise click.UsageError("--root and --node go together")
    probe: DeviceProbe = FakeProbe(DeviceTruth(root, node)) if root is not None and node is not None else NvmlProbe(library)
    result = probe.probe()
    click.echo(json.dumps(result.as_dict(), indent=1) if as_json else result.render())
    raise SystemExit(EXIT_OK if result.ok else EXIT_USAGE)
