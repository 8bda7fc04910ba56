"""docs/conformance.md's check table is the registry's (id, rule, source, mutants aimed at, needs)."""

from __future__ import annotations

import re
from pathlib import Path

from draguard.conformance.cluster import PROFILES, cluster_checks
from draguard.conformance.cluster.suite import checks_table

DOCS = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def test_the_docs_table_is_the_registry() -> None:
    table = re.search(r"<!-- checks-table:.*?-->\n(.*?)<!-- /checks-table -->", DOCS.read_text(), re.S)
    assert table and table.group(1) == checks_table(), "docs/conformance.md's table is stale: paste checks_table()"


def test_every_profile_has_checks_and_every_check_says_its_source() -> None:
    entries = cluster_checks()
    assert {e.meta["profile"] for e in entries} == set(PROFILES)
    assert all(e.summary and e.meta.get("source") for e in entries)
    assert len({e.name for e in entries}) == len(entries) >= 13
