"""A user's command that restarts a driver on a node (``--restart-command``): one home for the ``{node}``
placeholder and for running it, used by the conformance suites and by the run's driver steps.

The command is a shell line (``kubectl -n gpu delete pod -l app=driver --field-selector spec.nodeName={node}
--wait && ...``); every ``{node}`` is replaced by the node's name. It is expected to return once the driver
is back (or to fail, non-zero)."""

from __future__ import annotations

import subprocess

from .errors import UsageError

__all__ = ["NODE_PLACEHOLDER", "restart_command", "run_restart_command"]

NODE_PLACEHOLDER = "{node}"


def restart_command(command: str, node: str | None) -> str:
    """``command`` for ``node``: every ``{node}`` replaced by the node's name.

    :class:`UsageError` when the command names ``{node}`` and the node is not known.
    """
    if NODE_PLACEHOLDER in command:
        if not node:
            raise UsageError(f"--restart-command {command!r} names {NODE_PLACEHOLDER} but the driver's node is "
                             "not known (give --node)")
        return command.replace(NODE_PLACEHOLDER, node)
    return command


def run_restart_command(command: str, node: str | None, timeout: float) -> None:
    """Run ``--restart-command`` for ``node``; RuntimeError with its output when it exits non-zero."""
    done = subprocess.run(restart_command(command, node), shell=True, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"--restart-command exited with {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()[-400:]}")
