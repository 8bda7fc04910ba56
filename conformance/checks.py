"""The check engine shared by the sanity suite (gRPC contract) and the cluster suite (conformance).

A check is a function of one context, registered in :data:`draguard.harness.core.registry.CHECKS` under a
stable dotted id with its one-line rule and source. It passes by returning, fails by raising
:class:`CheckFailed` (through :func:`expect`), and skips by raising :class:`Skip` with the reason.
Anything else it raises is an ``error`` of that check, never a crash. :func:`run_entry` runs one
check in a worker thread bounded by a timeout and always returns a
:class:`~draguard.harness.result.CheckResult`; the suites' ``run_check`` wrap it with their context.
:func:`restart_command` is the one place a ``--restart-command`` gets its ``{node}`` (both suites
and ``certify`` run it through here).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from draguard.harness.core.commands import NODE_PLACEHOLDER, restart_command, run_restart_command
from draguard.harness.core.errors import ContractViolation
from draguard.harness.grpcapi.plugin import PluginCallError
from draguard.harness.core.registry import Entry
from draguard.harness.result import CheckResult, Evidence

__all__ = ["Skip", "CheckFailed", "expect", "run_entry", "restart_command", "run_restart_command", "NODE_PLACEHOLDER"]


class Skip(Exception):
    """The check does not apply; the message is the reason."""


class CheckFailed(ContractViolation):
    """The driver broke the check's rule; ``evidence`` says how."""

    def __init__(self, message: str, evidence: Sequence[Evidence] = ()) -> None:
        super().__init__(message)
        self.evidence = list(evidence) or [Evidence(message)]


def expect(condition: bool, message: str, objects: Sequence[str] = (), devices: Sequence[str] = ()) -> None:
    """Fail the running check with ``message`` (what the driver did against what the rule wants)."""
    if not condition:
        raise CheckFailed(message, [Evidence(message, tuple(objects), tuple(devices))])


def run_entry(ctx: Any, entry: Entry[Any], timeout: float, cleanup: Callable[[], list[str]]) -> CheckResult:
    """Run ``entry`` on ``ctx`` within ``timeout`` seconds, then ``cleanup``; a result whatever happens."""
    meta = entry.meta
    result = CheckResult(entry.name, entry.summary, str(meta.get("source", "")), "error")
    outcome: dict[str, BaseException | None] = {}

    def body() -> None:
        try:
            entry.target(ctx)
            outcome["exc"] = None
        except BaseException as exc:  # reported as the check's result
            outcome["exc"] = exc

    start = time.monotonic()
    worker = threading.Thread(target=body, name=f"check-{entry.name}", daemon=True)
    worker.start()
    worker.join(timeout)
    result.duration = time.monotonic() - start
    if worker.is_alive():
        result.status, result.reason = "error", f"the check did not end within {timeout:.0f}s"
        result.evidence.append(Evidence(result.reason))
        return result  # its calls have deadlines: the thread ends on its own; cleanup would race it
    exc = outcome.get("exc")
    if exc is None:
        result.status = "passed"
    elif isinstance(exc, Skip):
        result.status, result.reason = "skipped", str(exc)
    elif isinstance(exc, CheckFailed):
        result.status, result.reason, result.evidence = "failed", str(exc), list(exc.evidence)
    elif isinstance(exc, PluginCallError):
        # A call that failed as a whole where the rule wants an answer: the driver's failure.
        result.status, result.reason = "failed", f"the call failed as a whole: {exc}"
        result.evidence.append(Evidence(result.reason))
    else:
        result.status, result.reason = "error", f"{type(exc).__name__}: {exc}"
        result.evidence.append(Evidence(result.reason))
    for problem in cleanup():
        result.evidence.append(Evidence(f"cleanup: {problem}"))
    return result

