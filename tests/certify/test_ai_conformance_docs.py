"""docs/ai-conformance.md is the programme module's map: its table is generated from it, it quotes the
programme's wording of every requirement draguard maps, and it names every other requirement of the
newest checklist as one draguard does not check."""

from __future__ import annotations

import re
from pathlib import Path

from draguard.conformance.programmes.ai_conformance import OTHER_REQUIREMENTS, REQUIREMENTS, mapping_table

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ai-conformance.md"


def _text() -> str:
    return DOCS.read_text()


def test_the_docs_table_is_the_programme_module() -> None:
    table = re.search(r"<!-- ai-conformance-table:.*?-->\n(.*?)<!-- /ai-conformance-table -->", _text(), re.S)
    assert table and table.group(1) == mapping_table(), "docs/ai-conformance.md's table is stale: paste mapping_table()"


def test_the_docs_quote_the_programme_for_each_mapped_requirement() -> None:
    flat = " ".join(_text().split())
    for req in REQUIREMENTS:
        opening = " ".join(req.description.split())[:70]
        assert f'"{opening}' in flat, f"docs/ai-conformance.md does not quote {req.id}'s wording: {opening!r}"
        assert f"**`{req.id}`**" in flat and req.kar in flat


def test_the_docs_name_every_other_requirement_as_not_checked() -> None:
    section = _text().split("## What the programme asks that draguard does not check", 1)[1].split("\n## ", 1)[0]
    for rid in OTHER_REQUIREMENTS:
        assert f"**`{rid}`**" in section, f"{rid} is not in the docs' not-checked list"
    assert not {r.id for r in REQUIREMENTS} & set(OTHER_REQUIREMENTS)


def test_every_scenario_the_map_names_is_in_the_library() -> None:
    library = Path(__file__).resolve().parents[2] / "scenarios"
    for req in REQUIREMENTS:
        for name in req.scenarios:
            assert (library / f"{name}.yaml").is_file(), f"{req.id} names scenario {name}, not in scenarios/"
