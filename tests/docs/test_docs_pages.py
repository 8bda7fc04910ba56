"""The user's guide and the docs pages stay true of the code: every link between them resolves (to a
file, and to a heading where it names one), and the reference pages name every registered fault kind,
invariant and mutant."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import draguard.chaos  # noqa: F401  (registers the fault kinds)
import draguard.harness.invariants  # noqa: F401  (registers the invariants)
from draguard.harness.core.registry import FAULTS, INVARIANTS
from draguard.harness.driver.mutants import MUTANTS

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_anchor(m[1]) for m in re.finditer(r"^#+ (.*)$", page.read_text(), re.MULTILINE)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_the_scenario_format_names_every_fault_kind_and_invariant() -> None:
    text = (REPO / "docs" / "scenario-format.md").read_text()
    steps = text[text.index("## Chaos steps"):text.index("## Expectations")]
    assert not [e.name for e in FAULTS if f"`{e.name}`" not in steps], "fault kinds missing from Chaos steps"
    table = text[text.index("## Invariants"):text.index("## Bounds")]
    assert not [e.name for e in INVARIANTS if f"| `{e.name}` |" not in table], "invariants missing from the table"


def test_the_fake_fleet_page_names_every_mutant() -> None:
    text = (REPO / "docs" / "fake-fleet.md").read_text()
    assert not [m for m in MUTANTS if f"| `{m}` |" not in text], "mutants missing from docs/fake-fleet.md"


def test_the_anchor_rule() -> None:
    assert _anchor("`draguard bench`") == "draguard-bench"
    assert _anchor("Device truth, CDI and the NVML probe") == "device-truth-cdi-and-the-nvml-probe"
    assert _anchor("Real nodes: `--backend kind`") == "real-nodes---backend-kind"
