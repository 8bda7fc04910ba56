"""The ``draguard`` command: parses options and delegates; the one place that wires packages together.

Exit codes (documented in the README): 0 all expectations held, 1 an expectation, check or lint rule
failed, 2 invalid input or unusable environment, 130 interrupted.
"""

from __future__ import annotations

import importlib
import sys

import click

from ._entry import invoke

__all__ = ["main", "cli"]

# Each module defines one click command or group named ``command``.
COMMAND_MODULES = ("demo", "cluster", "driver", "nodes", "proxy", "lint", "scenario", "run", "bench", "driver_external", "sanity", "report", "kill_matrix", "load", "nvml_probe", "conformance", "explore", "incluster")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="draguard")
def cli() -> None:
    """Chaos and conformance testing for Kubernetes Dynamic Resource Allocation."""


for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(f"draguard.cli.{_name}")
    except ModuleNotFoundError as _exc:  # a command still being written on this branch
        if _exc.name != f"draguard.cli.{_name}":
            raise
        continue
    for _cmd in getattr(_module, "COMMANDS", [getattr(_module, "command", None)]):
        if _cmd is not None:
            cli.add_command(_cmd)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; library errors become one clear line and an exit code, never a traceback."""
    return invoke(cli, argv, "draguard")


if __name__ == "__main__":
    sys.exit(main())
