"""The project speaks of itself alone: no words about how its work was organised (numbered stops,
sessions of work, sprints), no people who do not exist (engineers sharing the machine, colleagues),
in any tracked or new text file. History goes to the commit log.

The patterns are precise on purpose: "session" alone is a pytest session or a process session
(``setsid``), "stop" alone is a process being stopped; only their work-process uses are matched.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PATTERNS = {
    "a numbered stop of work (`stop 29`, `stop-29`)": r"\bstops?[ -]?\d+\b",
    "a stop of work (`this stop`, `the stop's changes`)": r"\b(?:this|that|previous|next|last) stop\b(?! (?:signal|the|it|them|and|or))|\bthe stop's\b|\b(?:start|end) of (?:the|this) stop\b",
    "a session of work (`three other sessions`, `filed by a session`)":
        r"\b(?:other|two|three|four|several|concurrent|parallel|another|previous|earlier|next|later) sessions?\b"
        r"|\bby (?:a|another|the other) session\b|\bsessions? \d+\b",
    "a sprint": r"\bsprints?\b",
    "engineers (`shared with three other engineers`)": r"\bengineers?\b",
    "people who do not exist": r"\b(?:colleagues?|teammates?|coworkers?)\b",
    "first person about the work (`nothing else of mine running`)": r"\bof mine\b",
}
"""What each pattern stands for, and the pattern (case-insensitive)."""

ALLOWED: dict[str, str] = {
    "tests/docs/test_project_words.py": "this file: it spells the patterns out",
}
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
    "Since stop 29 a round finds changed claims", "the stop-29 run reported all 60", "(stop 30)",
    "shared with three other engineers", "the 2-core machine (shared with three other sessions)",
    "issue 26: filed by a session", "nothing else of mine running", "the code before this stop's changes",
    "one sprint later", "as a colleague found",
])  # fmt: skip
def test_the_patterns_catch_the_work_process_words(text: str) -> None:
    assert _matches(text), text


@pytest.mark.parametrize("text", [
    "draguard_cluster (session scope, a ready cluster)", "every process starts in its own session",
    "the session's run label", "session-scoped fixture", "SIGSTOP", "the feed told the truth the stop",
    "between the stop and the start", "a test session ended by SIGTERM", "stop the cluster 3 times",
    "Workers are told to stop", "kill -STOP",
])  # fmt: skip
def test_the_patterns_leave_sessions_and_stops_of_processes_alone(text: str) -> None:
    assert not _matches(text), text


def test_every_allowed_path_exists() -> None:
    assert all((REPO / p).is_file() for p in ALLOWED), ALLOWED
