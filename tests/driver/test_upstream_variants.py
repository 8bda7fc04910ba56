"""The upstream test driver's variants: each planted edit applies to the pinned module's file, the overlay
build serves the edited file in its place, the environment variable selects the binary, and
docs/upstream-kill-matrix.md is rendered from its JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from draguard.harness.core.errors import DefinitionError, HarnessError, UsageError
from draguard.harness.driver import upstream_variants as uv
from draguard.harness.driver.external import find_test_driver
from draguard.reports.upstream_kill_matrix import render_markdown

DOCS = Path(__file__).resolve().parents[2] / "docs"
SEVEN = {"cdi-left-behind", "non-idempotent-prepare", "forget-before-cleanup", "unknown-unprepare-error",
         "lock-across-slow-prepare", "cdi-wrong-device", "batch-abort"}

needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="no Go toolchain to read the module or build")


@pytest.fixture(scope="module")
def module() -> Path:
    return uv.module_dir()


def test_the_seven_bugs_of_the_issue_are_registered_each_with_its_sentence() -> None:
    assert set(uv.VARIANTS) == SEVEN
    for cls in uv.VARIANTS.values():
        assert cls.describe().endswith(".") and cls.edits
    assert len({cls.digest() for cls in uv.VARIANTS.values()}) == 7
    with pytest.raises(UsageError, match="unknown upstream test driver variant 'nope'; known: unmodified, batch-abort"):
        uv.get_variant("nope")


def test_the_registry_rejects_a_duplicate_an_undocumented_or_an_empty_variant() -> None:
    with pytest.raises(DefinitionError, match="already taken"):
        uv.variant("batch-abort")(type("Dup", (uv.Variant,), {"__doc__": "x.", "edits": (("a", "b"),)}))
    with pytest.raises(DefinitionError, match="docstring"):
        uv.variant("undocumented")(type("NoDoc", (uv.Variant,), {"edits": (("a", "b"),)}))
    with pytest.raises(DefinitionError, match="at least one edit"):
        uv.variant("no-edit")(type("NoEdit", (uv.Variant,), {"__doc__": "x."}))
    assert not {"undocumented", "no-edit"} & set(uv.VARIANTS)


@needs_go
def test_each_edit_applies_once_to_the_pinned_module_file_and_changes_it(module: Path) -> None:
    original = (module / uv.PLUGIN_FILE).read_text()
    for name, cls in uv.VARIANTS.items():
        edited = uv.apply_edits(original, cls)
        assert edited != original, name
        for old, new in cls.edits:
            assert original.count(old) == 1 and new in edited, (name, old)
    broken = type("Broken", (uv.Variant,), {"name": "broken", "edits": (("no such snippet", "x"),)})
    with pytest.raises(HarnessError, match="expects its snippet once, found it 0 time"):
        uv.apply_edits(original, broken)


@needs_go
def test_every_variant_builds_and_its_overlay_serves_the_edited_file(module: Path) -> None:
    released = find_test_driver()
    original = (module / uv.PLUGIN_FILE).read_text()
    for name, cls in uv.VARIANTS.items():
        binary = uv.build_variant(name, progress=lambda _: None)  # cached: a second call does not build
        assert binary == uv.variant_binary(name) and binary.stat().st_size > 1_000_000
        folder = binary.parent
        assert folder.name == f"{name}-{cls.digest()}"
        edited = (folder / "kubeletplugin.go").read_text()
        assert edited == uv.apply_edits(original, cls) != original
        replace = json.loads((folder / "overlay.json").read_text())["Replace"]
        served = {Path(k).name: Path(v) for k, v in replace.items()}
        assert served["kubeletplugin.go"] == folder / "kubeletplugin.go"
        assert served["main.go"] == folder / "main.go"
        others = {n: p for n, p in served.items() if n not in ("kubeletplugin.go", "main.go")}
        assert others and all(p.parent == module / Path(uv.PLUGIN_FILE).parent for p in others.values()), others
        meta = json.loads((folder / "variant.json").read_text())
        assert meta["digest"] == cls.digest() and meta["name"] == name
        assert binary.read_bytes() != released.read_bytes()


@needs_go
def test_the_environment_variable_picks_the_variant_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(uv.VARIANT_ENV, "batch-abort")
    assert find_test_driver() == uv.build_variant("batch-abort", progress=lambda _: None)
    monkeypatch.setenv(uv.VARIANT_ENV, "unmodified")
    assert find_test_driver().parent.name != "batch-abort"
    monkeypatch.setenv(uv.VARIANT_ENV, "nope")
    with pytest.raises(UsageError, match="unknown upstream test driver variant"):
        find_test_driver()


def test_the_doc_is_rendered_from_its_json() -> None:
    data = json.loads((DOCS / "upstream-kill-matrix.json").read_text())
    assert (DOCS / "upstream-kill-matrix.md").read_text() == render_markdown(data, "upstream-kill-matrix.json")
    assert {r["variant"] for r in data["variants"]} == SEVEN


def test_a_suite_catches_a_variant_only_by_what_the_released_driver_does_not_fail() -> None:
    from draguard.conformance.upstream_matrix import caught

    def lib(**scenarios: dict[str, object]) -> dict[str, object]:
        base = {"violated": [], "unmet": [], "failedSteps": [], "unmetExpectations": [], "error": None}
        return {"library": {"scenarios": {k: {**base, **v} for k, v in scenarios.items()}}}

    released = {"sanity": {"checks": {"a": "failed", "b": "passed"}},  # s2: not met on the released driver too
                **lib(s1={"outcome": "met"}, s2={"outcome": "not-met", "violated": ["no-leak"], "unmet": ["no-leak"]},
                      s3={"outcome": "met"}, s4={"outcome": "not-applicable"})}
    variant = {"sanity": {"checks": {"a": "failed", "b": "error"}},
               **lib(s1={"outcome": "not-met", "violated": ["lock-free-handlers"], "unmet": ["lock-free-handlers"]},
                     s2={"outcome": "not-met", "violated": ["no-leak"], "unmet": ["no-leak"]},
                     s3={"outcome": "not-met", "unmetExpectations": ["progress next Running"]},
                     s4={"outcome": "not-applicable"})}
    assert caught(variant, released, "sanity") == ["b"]
    assert caught(released, released, "sanity") == []
    assert caught(variant, released, "library") == ["s1 (lock-free-handlers)", "s3 (progress next Running)"]
    assert caught(variant, released, "library", without=["lock-free-handlers"]) == ["s3 (progress next Running)"]
    worse = {**lib(s2={"outcome": "not-met", "violated": ["no-leak", "unprepare-unknown"],
                       "unmet": ["no-leak", "unprepare-unknown"]})}
    assert caught(worse, released, "library") == ["s2 (unprepare-unknown)"], "more than the released driver fails"
