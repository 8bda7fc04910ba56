"""The README's command blocks, and a small shell that runs them as a user would.

Every fenced block of commands in README.md is preceded by a marker ``<!-- NAME-commands: TEST-FILE
... -->`` naming the test that runs it; :func:`blocks` reads them. :class:`Shell` runs one command
line at a time as ``python -m draguard.cli.main`` in a folder of the test's own: environment variables
are expanded, ``export NAME=$(draguard ...)`` sets one from a command's output, and a line ending in
``&`` starts a command that keeps running until :meth:`Shell.close`."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

MARKER = re.compile(r"<!-- ([a-z-]+)-commands: (\S+)[^>]*-->\n```(\w+)\n(.*?)```", re.DOTALL)
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
COMMAND = re.compile(r"^(?:\$ )?(?:export \w+=\$\()?(?:draguard|make|pip|python|pytest) ")


@dataclass(frozen=True)
class Block:
    name: str
    test: str
    lines: tuple[str, ...]
    """The block's command lines: continuations joined, comments and console output dropped."""


def _lines(kind: str, body: str) -> tuple[str, ...]:
    joined = re.sub(r"\\\n\s*", "", body)
    out = []
    for line in joined.splitlines():
        if kind == "console":
            if line.startswith("$ "):
                out.append(line[2:].strip())
            continue
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if line:
            out.append(line)
    return tuple(out)


def blocks(text: str | None = None) -> dict[str, Block]:
    """Every marked block of the README, by marker name."""
    found: dict[str, Block] = {}
    for m in MARKER.finditer(README.read_text() if text is None else text):
        assert m[1] not in found, f"two README blocks are marked {m[1]}-commands"
        found[m[1]] = Block(m[1], m[2], _lines(m[3], m[4]))
    return found


def unmarked_commands(text: str | None = None) -> list[str]:
    """Command lines of README blocks that no marker names a test for."""
    text = README.read_text() if text is None else text
    marked = {m.start(4) for m in MARKER.finditer(text)}
    out = []
    for m in BLOCK.finditer(text):
        if m.start(2) not in marked:
            out += [line for line in _lines(m[1], m[2]) if COMMAND.match(line)]
    return out


@dataclass
class Shell:
    """Runs README lines in ``cwd`` with ``env`` (the test's environment plus what it sets)."""

    cwd: Path
    env: dict[str, str]
    background: list[tuple[str, subprocess.Popen[str]]] = field(default_factory=list)
    logs: list[TextIO] = field(default_factory=list)

    def argv(self, line: str) -> list[str]:
        words = shlex.split(line)
        assert words and words[0] == "draguard", f"not a draguard command: {line}"
        return [sys.executable, "-m", "draguard.cli.main", *(self.expand(w) for w in words[1:])]

    def expand(self, word: str) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda m: self.env[m[1]], word)

    def run(self, line: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """A foreground line; ``export NAME=$(...)`` also sets NAME to the command's output."""
        export = re.fullmatch(r"export (\w+)=\$\((.*)\)", line)
        command = export[2] if export else line
        assert not command.endswith("&"), f"a background line: use start(): {line}"
        done = subprocess.run(self.argv(command), cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=timeout)  # fmt: skip
        if export and done.returncode == 0:
            self.env[export[1]] = done.stdout.strip()
        return done

    def start(self, line: str) -> subprocess.Popen[str]:
        """A line ending in ``&``: started in a process group of its own, stopped by :meth:`close`."""
        assert line.endswith("&"), line
        log = open(self.cwd / f"background-{len(self.background)}.log", "w")  # noqa: SIM115 (closed by close())
        self.logs.append(log)
        proc = subprocess.Popen(self.argv(line[:-1].strip()), cwd=self.cwd, env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
        self.background.append((line, proc))
        return proc

    def log(self, index: int) -> str:
        return (self.cwd / f"background-{index}.log").read_text()

    def close(self) -> None:
        """SIGTERM each background command (last started first), SIGKILL what is left after 30 s."""
        for _, proc in reversed(self.background):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
        self.background.clear()
        for log in self.logs:
            log.close()
        self.logs.clear()
