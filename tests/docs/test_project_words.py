"""The project speaks of itself alone: no words about how its work was organised, and no people who do
not exist, in any tracked or new text file. History goes to the commit log.

The words are assembled from fragments below, so that this file does not itself contain what it looks
for. The patterns are precise on purpose: a pytest or process session, and a process being stopped,
are left alone; only the work-process uses are matched.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

W_STOP, W_SESSION, W_SPRINT, W_ENGINEER, W_MINE = "st" + "op", "sess" + "ion", "spr" + "int", "engin" + "eer", "m" + "ine"
W_PEOPLE = ("coll" + "eague", "team" + "mate", "co" + "worker")

PATTERNS = {
    "a numbered stop of work": rf"\b{W_STOP}s?[ -]?\d+\b",
    "a stop of work by position": rf"\b(?:this|that|previous|next|last) {W_STOP}\b(?! (?:signal|the|it|them|and|or))"
                                  rf"|\bthe {W_STOP}'s\b|\b(?:start|end) of (?:the|this) {W_STOP}\b",
    "a session of work":
        rf"\b(?:other|two|three|four|several|concurrent|parallel|another|previous|earlier|next|later) {W_SESSION}s?\b"
        rf"|\bby (?:a|another|the other) {W_SESSION}\b|\b{W_SESSION}s? \d+\b",
    "a planning period": rf"\b{W_SPRINT}s?\b",
    "people sharing the machine": rf"\b{W_ENGINEER}s?\b",
    "people who do not exist": r"\b(?:" + "|".join(f"{w}s?" for w in W_PEOPLE) + r")\b",
    "first person about the work": rf"\bof {W_MINE}\b",
}
"""What each pattern stands for, and the pattern (case-insensitive)."""

ALLOWED: dict[str, str] = {}
"""Paths where a match is expected, each with the reason."""

SKIP_SUFFIXES = (".png", ".jpg", ".gz", ".so", ".pyc", ".sum")
"""Binary files, and go.sum (upstream module hashes)."""


def _files() -> list[str]:
    """Tracked files and new ones not ignored: a file written but not yet committed is checked too."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        pytest.fail("git ls-files failed: the words check needs the repository's file list")
    return sorted({f for f in out.splitlines() if f and not f.endswith(SKIP_SUFFIXES) and (REPO / f).is_file()})


def _matches(text: str) -> list[tuple[int, str, str]]:
    found = []
    for what, pattern in PATTERNS.items():
        for m in re.finditer(pattern, text, re.IGNORECASE):
            found.append((text.count("\n", 0, m.start()) + 1, what, m.group(0)))
    return found


def test_no_file_speaks_of_work_sessions_stops_or_people() -> None:
    problems = []
    files = _files()
    assert "README.md" in files and any(f.startswith("docs/") for f in files) and any(f.startswith("harness/") for f in files)
    for path in files:
        if path in ALLOWED:
            continue
        try:
            text = (REPO / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        problems += [f"{path}:{line}: {word!r} ({what})" for line, what, word in _matches(text)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("text", [
    f"Since {W_STOP} 29 a round finds changed claims", f"the {W_STOP}-29 run reported all 60", f"({W_STOP} 30)",
    f"shared with three other {W_ENGINEER}s", f"the 2-core machine (shared with three other {W_SESSION}s)",
    f"issue 26: filed by a {W_SESSION}", f"nothing else of {W_MINE} running", f"the code before this {W_STOP}'s changes",
    f"one {W_SPRINT} later", f"as a {W_PEOPLE[0]} found",
])  # fmt: skip
def test_the_patterns_catch_the_work_process_words(text: str) -> None:
    assert _matches(text), text


@pytest.mark.parametrize("text", [
    "draguard_cluster (session scope, a ready cluster)", "every process starts in its own session",
    "the session's run label", "session-scoped fixture", "SIGSTOP", "the feed told the truth the stop",
    "between the stop and the start", "a test session ended by SIGTERM", "stop the cluster 3 times",
    "Workers are told to stop", "kill -W_STOP",
])  # fmt: skip
def test_the_patterns_leave_sessions_and_stops_of_processes_alone(text: str) -> None:
    assert not _matches(text), text


def test_every_allowed_path_exists() -> None:
    assert all((REPO / p).is_file() for p in ALLOWED), ALLOWED
