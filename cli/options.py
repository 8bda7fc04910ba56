"""Options several commands share, each declared once here and applied as a decorator.

- :func:`kube_target`: the cluster a command points at, ``--kubeconfig`` with ``--context`` and
  ``--allow-context``, handed to the command as one :class:`~draguard.harness.cluster.target.KubeTarget`
  (the one client configuration for every command, as dra-example-driver's ``pkg/flags/kubeclient.go``
  gives every binary);
- :func:`bin_dir`: where the control-plane binaries are (``$DRAGUARD_BIN_DIR``);
- :func:`report_dir`: where a command's reports go;
- :func:`report_formats`: which report formats, repeatable or comma-separated, checked as they are parsed.

Help texts show defaults as a user would type them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from draguard import reports
from draguard.harness.cluster.target import KubeTarget

__all__ = ["KubeTarget", "kube_target", "bin_dir", "report_dir", "report_formats", "split_formats", "as_given"]

F = TypeVar("F", bound=Callable[..., Any])


def kube_target(help: str = "Kubeconfig of the cluster [default: $KUBECONFIG or ~/.kube/config].", *,
                required: bool = False, exists: bool = True, context: bool = True,
                allow: bool = False) -> Callable[[F], F]:
    """``--kubeconfig`` (with ``--context`` unless ``context`` is False, and ``--allow-context`` when
    ``allow``), given to the command as its ``kube`` parameter.

    ``exists``: refuse a kubeconfig that is not a file as the options are parsed (exit 2); a command that
    records such an error in its verdict (``draguard run``) checks it itself."""

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def command(*args: Any, kubeconfig: Path | None, context: str | None = None,
                    allow_context: str | None = None, **kwargs: Any) -> Any:
            return f(*args, kube=KubeTarget(kubeconfig, context, allow_context), **kwargs)

        options = [click.option("--kubeconfig", type=click.Path(exists=exists, dir_okay=False, path_type=Path),
                                required=required, help=help)]
        if context:
            options.append(click.option("--context", metavar="CONTEXT",
                                        help="Context in the kubeconfig [default: its current context]."))
        if allow:
            options.append(click.option("--allow-context", metavar="CONTEXT",
                                        help="Allow what touches more than a run's own objects (load, drain-node, "
                                             "device-taint) on this kubeconfig context; a local draguard cluster "
                                             "is always allowed."))
        wrapped: Any = command
        for option in reversed(options):
            wrapped = option(wrapped)
        return wrapped  # type: ignore[no-any-return]

    return decorate


def as_given(kube: KubeTarget, bin_dir: str | None = None) -> list[str]:
    """The cluster options as the user gave them, to write into a command that plays a run again."""
    out: list[str] = []
    for flag, value in (("--kubeconfig", kube.kubeconfig), ("--context", kube.context),
                        ("--allow-context", kube.allow_context), ("--bin-dir", bin_dir)):
        if value is not None:
            out += [flag, str(value)]
    return out


def bin_dir(help: str = "Directory with the control-plane binaries [default: draguard's cache, filled by "
                        "`draguard cluster build`].") -> Callable[[F], F]:
    """``--bin-dir DIR`` (or ``$DRAGUARD_BIN_DIR``), a ``str`` or None."""
    return click.option("--bin-dir", envvar="DRAGUARD_BIN_DIR", show_envvar=True, metavar="DIR",
                        type=click.Path(file_okay=False), help=help)


def report_dir(default: str = "draguard-report", help: str = "Where the reports go.") -> Callable[[F], F]:
    """``--report-dir DIR``, a :class:`~pathlib.Path`."""
    return click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path), default=default,
                        show_default=True, metavar="DIR", help=help)


def split_formats(formats: Sequence[str]) -> list[str]:
    """``--report a --report b,c`` → ``[a, b, c]``."""
    return [f.strip() for item in formats for f in item.split(",") if f.strip()]


def report_formats(*decls: str, default: Sequence[str] = reports.DEFAULT_FORMATS,
                   help: str = "Report formats") -> Callable[[F], F]:
    """A repeatable, comma-separated report format option (``--report json,html``), given to the command
    as the list of formats, known and deduplicated (an unknown one: exit 2 listing the known ones)."""

    def check(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[str]:
        return reports.check_formats(split_formats(value) or list(default))

    shown = f" [default: {','.join(default)}]" if default else ""
    return click.option(*decls, "formats", multiple=True, metavar="FORMAT[,FORMAT...]", callback=check,
                        help=f"{help}, repeatable or comma-separated: {', '.join(reports.REPORTS.names())}{shown}.")
