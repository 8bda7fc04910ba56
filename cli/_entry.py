"""Running one click command as a program: library errors become one line and an exit code.

Shared by ``draguard`` itself and by the commands that can run on their own
(``python -m draguard.cli.driver``, ``python -m draguard.cli.nodes``), which skip importing every
other command to start fast. draguard's own children use harness entry points instead
(:func:`draguard.harness.core.process.child_main`).
"""

from __future__ import annotations

import click

from draguard.harness.core.errors import EXIT_USAGE, DraguardError
from draguard.harness.core.process import tune_gc

__all__ = ["invoke"]


def invoke(command: click.Command, argv: list[str] | None, prog_name: str) -> int:
    tune_gc()
    try:
        result = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("draguard: interrupted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE if exc.exit_code not in (0, 1) else exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except DraguardError as exc:
        click.echo(f"draguard: error: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("draguard: interrupted", err=True)
        return 130
    return result if isinstance(result, int) else 0
