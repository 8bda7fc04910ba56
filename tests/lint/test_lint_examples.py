"""Every rule has good and bad examples: each bad one gives exactly one finding, of its rule, on the
line marked ``# expect``; each good one gives none. A first-line ``# lint: --target-release X.Y``
sets the release the example is linted for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from draguard.conformance.lint import RULES, lint, parse_release

EXAMPLES = Path(__file__).with_name("examples")
_RELEASE = re.compile(r"^# lint: --target-release (\S+)", re.MULTILINE)


def _examples(prefix: str) -> list[Path]:
    return sorted(p for p in EXAMPLES.glob(f"*/{prefix}*") if p.suffix in (".yaml", ".yml", ".json"))


def _release(text: str) -> tuple[int, int]:
    match = _RELEASE.search(text)
    return parse_release(match[1]) if match else (1, 37)


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@pytest.mark.parametrize("path", _examples("bad"), ids=_id)
def test_bad_example_gives_one_finding_of_its_rule_on_the_marked_line(path: Path) -> None:
    text = path.read_text()
    marked = [i for i, line in enumerate(text.splitlines(), 1) if line.rstrip().endswith("# expect")]
    assert len(marked) == 1, f"{path}: mark exactly one line with '# expect'"
    report = lint([path], _release(text))
    found = [(f.rule, f.line, f.message) for f in report.findings]
    assert [(rule, line) for rule, line, _ in found] == [(path.parent.name, marked[0])], found


@pytest.mark.parametrize("path", _examples("good"), ids=_id)
def test_good_example_gives_no_finding(path: Path) -> None:
    report = lint([path], _release(path.read_text()))
    assert [str(f) for f in report.findings] == []


def test_every_static_rule_has_good_and_bad_examples() -> None:
    static = {r.id for r in RULES.values() if not r.needs_server}
    bad = {p.parent.name for p in _examples("bad")}
    good = {p.parent.name for p in _examples("good")}
    assert static - bad == set(), "rules without a bad example"
    assert static - good == set(), "rules without a good example"
    assert (bad | good) - static == set(), "example folders named after no rule"
