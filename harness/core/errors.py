"""The one error hierarchy of draguard, and the exit codes the CLI maps it to.

    DraguardError                 base; never raised itself
    ├── UsageError                bad user input: flags, scenario or topology files, manifests  -> exit 2
    │   └── ScenarioError         a scenario file is invalid; carries every problem of the file
    ├── HarnessError              the environment: binaries, ports, processes, the cluster      -> exit 2
    ├── DefinitionError           a plugin author's mistake (duplicate fault name, bad model)    -> exit 2
    └── ContractViolation         a DRA driver broke a rule of the protocol                      -> exit 1

Library code raises these and chains causes (``raise ... from exc``); only the CLI and the pytest
plugin turn them into exit codes or test outcomes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "DraguardError",
    "UsageError",
    "ScenarioError",
    "Problem",
    "HarnessError",
    "DefinitionError",
    "ContractViolation",
]

EXIT_OK = 0
"""Everything ran and every expectation held."""
EXIT_FAILED = 1
"""Everything ran, and an expectation, a check or a lint rule failed."""
EXIT_USAGE = 2
"""Invalid input or an unusable environment: nothing was judged."""


class DraguardError(Exception):
    """Base of every error draguard raises on purpose."""

    exit_code = EXIT_USAGE


class UsageError(DraguardError):
    """The user gave something draguard cannot use (a flag, a file, a value)."""


@dataclass(frozen=True)
class Problem:
    """One problem in an input file, located for a human and for an editor."""

    file: str
    line: int
    column: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class ScenarioError(UsageError):
    """A scenario file is invalid; ``problems`` lists all of its problems, in file order."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems, key=lambda p: (p.file, p.line, p.column))
        super().__init__("\n".join(str(p) for p in self.problems))


class HarnessError(DraguardError):
    """The environment cannot do what was asked: a missing binary, a taken port, a dead process."""


class DefinitionError(DraguardError):
    """A fault, invariant or check was defined wrongly by its author."""


class ContractViolation(DraguardError):
    """A DRA driver broke a rule of the kubelet plugin contract."""

    exit_code = EXIT_FAILED
