"""``certify --verify`` runs the verify-conformance bot's checks and the AI-conformance programme's on a
bundle, without a cluster: a verified bundle is edited in each way the bot catches (and re-signed, so
the manifest is not what catches it) and --verify names what is wrong; a failed MUST check is named as
the requirement it leaves unmet while the bundle itself still verifies."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from draguard.cli.main import main
from draguard.conformance.certify import parse_programmes, required_checks, verify
from draguard.conformance.programmes import programme
from draguard.conformance.programmes.ai_conformance import FRAGMENT, REQUIREMENTS, checklist_for
from draguard.harness.core.errors import UsageError
from draguard.harness.result import CheckResult, RunResult
from draguard.reports.bundle import MANIFEST, write_bundle

PRODUCT = {"vendor": "Example", "name": "GPU driver", "version": "1.2.3", "type": "DRA driver",
           "description": "A DRA driver for Example GPUs.", "website_url": "https://example.com",
           "documentation_url": "https://example.com/docs", "contact_email_address": "dra@example.com",
           "driver_image": "registry.example.com/gpu:1.2.3"}
PROFILES = ("core", "sharing", "gang")


def _result(failing: str | None = None) -> RunResult:
    ids = sorted({c for r in REQUIREMENTS for c in r.checks} | set(required_checks(PROFILES, True)))
    r = RunResult(run_id="certify-t", environment={"kubernetes": "v1.37.2"})
    for cid in ids:
        status = "failed" if cid == failing else "skipped" if cid.startswith("conformance.topology.") else "passed"
        r.checks.append(CheckResult(cid, "a rule", "a source", status,  # type: ignore[arg-type]
                                    "the device went to two claims" if status == "failed" else
                                    "needs a shared attribute" if status == "skipped" else ""))
    return r


def _bundle(tmp_path: Path, failing: str | None = None) -> Path:
    out = tmp_path / "bundle"
    result = _result(failing)
    submission = {"kubernetesVersion": "v1.37.2", "release": "v1.37", "profiles": list(PROFILES), "sanity": True,
                  "requiredChecks": required_checks(PROFILES, True), "programmes": ["ai-conformance"]}
    files = programme("ai-conformance").render(result, PRODUCT, submission)
    write_bundle(result, out, PRODUCT, environment={"kubernetes": "v1.37.2"}, submission=submission, rendered=files)
    return out


def _drop_entry(path: Path, rid: str) -> None:
    yaml = YAML()
    data = yaml.load(path.read_text())
    for items in data["spec"].values():
        items[:] = [e for e in items if e["id"] != rid]
    with path.open("w") as f:
        yaml.dump(data, f)


def _edit_entry(path: Path, rid: str, **fields: object) -> None:
    yaml = YAML()
    data = yaml.load(path.read_text())
    (entry,) = [e for items in data["spec"].values() for e in items if e["id"] == rid]
    for key, value in fields.items():
        if callable(value):
            entry[key] = value(entry[key])
        else:
            entry[key] = value
    with path.open("w") as f:
        yaml.dump(data, f)


def _resign(out: Path) -> None:
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != MANIFEST)
    (out / MANIFEST).write_text("".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(out).as_posix()}\n"
                                        for p in files))


def _edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, count))


def test_an_intact_bundle_verifies_with_the_bot_and_programme_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _bundle(tmp_path)
    v = verify(out)
    assert v.ok and not v.problems and not v.requirements, (v.problems, v.requirements)
    assert verify(tmp_path / "bundle.tar.gz").ok
    assert main(["certify", "--verify", str(out)]) == 0
    assert "verified; every check passed" in capsys.readouterr().out
    assert "INFO: e2e test version: v1.37.2" in (out / "e2e.log").read_text()


EDITS = {
    "drop the version line": (lambda out: _edit(out / "e2e.log", "INFO: e2e test version: v1.37.2\n", ""),
                              "e2e.log: no 'e2e test version: vX.Y.Z' line"),
    "another version": (lambda out: _edit(out / "e2e.log", "version: v1.37.2", "version: v1.36.4"),
                        "e2e.log: 'e2e test version: v1.36.4' is not the submission's version v1.37"),
    "rename a test in junit": (lambda out: _edit(out / "junit_01.xml", 'name="sanity.prepare.idempotent"',
                                                 'name="sanity.prepare.idempotent-renamed"'),
                               "junit_01.xml names sanity.prepare.idempotent-renamed but e2e.log does not"),
    "remove a PRODUCT.yaml field": (lambda out: _edit(out / "PRODUCT.yaml", "contact_email_address: dra@example.com\n", ""),
                                    "PRODUCT.yaml: missing field 'contact_email_address'"),
    "malform a URL": (lambda out: _edit(out / "PRODUCT.yaml", "documentation_url: https://example.com/docs",
                                        "documentation_url: example.com/docs"),
                      "PRODUCT.yaml: field 'documentation_url' is not a URL: 'example.com/docs'"),
    "mark a required check skipped": (
        lambda out: (_edit(out / "junit_01.xml", 'name="conformance.core.reuse" time="0.000">',
                           'name="conformance.core.reuse" time="0.000"><skipped message="cannot run"/>'),
                     _edit(out / "e2e.log", "[PASSED] conformance.core.reuse", "[SKIPPED] conformance.core.reuse")),
        "required check conformance.core.reuse was skipped: cannot run"),
    "empty a required file": (lambda out: (out / "README.md").write_text(""),
                              "README.md: empty (a conformance submission's README.md must not be)"),
    "drop a required file": (lambda out: (out / "junit_01.xml").unlink(),
                             "junit_01.xml: missing (a conformance submission must have it)"),
    "downgrade a MUST to a SHOULD": (
        lambda out: _edit_entry(out / FRAGMENT, "gang_scheduling", level="SHOULD", status="N/A"),
        f"{FRAGMENT}: gang_scheduling says level 'SHOULD'; the v1.37 checklist says 'MUST'"),
    "drop a requirement": (lambda out: _drop_entry(out / FRAGMENT, "secure_accelerator_access"),
                           f"{FRAGMENT}: secure_accelerator_access (MUST on the v1.37 checklist) is missing"),
    "reword a description": (lambda out: _edit(out / FRAGMENT, "ensures all-or-nothing scheduling",
                                               "ensures mostly-all scheduling"),
                             f"{FRAGMENT}: gang_scheduling's description is not the checklist's"),
    "link another product's folder": (
        lambda out: _edit(out / FRAGMENT, "file://v1.37/gpu-driver/junit_01.xml#conformance.gang.spread",
                          "file://v1.37/other-driver/junit_01.xml#conformance.gang.spread"),
        f"{FRAGMENT}: gang_scheduling: evidence link 'file://v1.37/other-driver/junit_01.xml#conformance.gang.spread' "
        "names the submission folder v1.37/other-driver/, not this bundle's v1.37/gpu-driver/"),
    "malform an evidence link": (lambda out: _edit(out / FRAGMENT, "junit_01.xml#conformance.gang.spread",
                                                   "junit_01.xml#conformance.gang.sprawl"),
                                 f"{FRAGMENT}: gang_scheduling: evidence link 'file://v1.37/gpu-driver/junit_01.xml#conformance"
                                 ".gang.sprawl' names no testcase of junit_01.xml"),
}


@pytest.mark.parametrize("how", sorted(EDITS))
def test_verify_names_each_edit_the_bot_catches(tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _bundle(tmp_path)
    assert verify(out).ok
    edit, expected = EDITS[how]
    edit(out)
    tampered = verify(out)
    assert tampered.exit_code == 1
    if (out / "junit_01.xml").exists():
        assert any("changed since the bundle was written" in p for p in tampered.problems), tampered.problems
    _resign(out)  # the manifest now agrees: only the bot's own check can see the edit
    assert main(["certify", "--verify", str(out)]) == 1
    printed = capsys.readouterr().out
    assert f"BUNDLE   {expected}" in printed, printed
    assert "changed since the bundle was written" not in printed and "NOT verified" in printed


def test_a_failed_must_check_is_the_requirement_it_leaves_unmet_while_the_bundle_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out = _bundle(tmp_path, failing="sanity.prepare.device-in-use")
    v = verify(out)
    assert not v.problems, v.problems
    assert v.exit_code == 1 and v.failed_checks[0].startswith("sanity.prepare.device-in-use")
    assert v.requirements == ["secure_accelerator_access (MUST): not met: sanity.prepare.device-in-use failed: "
                              "a rule: the device went to two claims"]
    assert main(["certify", "--verify", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "UNMET    secure_accelerator_access (MUST): not met: sanity.prepare.device-in-use failed" in printed
    assert "verified; 1 requirement(s) not met" in printed and "NOT verified" not in printed
    entry = _fragment_entries(out)["secure_accelerator_access"]
    assert entry["status"] == "Not Implemented" and "sanity.prepare.device-in-use failed" in entry["notes"]


def test_a_fragment_that_claims_more_than_its_evidence_is_a_bundle_problem(tmp_path: Path) -> None:
    out = _bundle(tmp_path, failing="conformance.gang.spread")
    _edit(out / FRAGMENT, "status: Not Implemented", "status: Implemented")
    _resign(out)
    v = verify(out)
    assert any("gang_scheduling says 'Implemented' but its evidence conformance.gang.spread failed" in p
               for p in v.problems), v.problems
    assert any(r.startswith("gang_scheduling (MUST): not met") for r in v.requirements)


def test_a_failed_check_is_the_requirement_it_leaves_unmet_even_when_the_fragment_does_not_link_it(
    tmp_path: Path,
) -> None:
    """The fragment is edited to drop the failed check's link and claim the requirement: --verify reads
    the requirement's checks in junit_01.xml itself, so it is still unmet, and the edit is named."""
    out = _bundle(tmp_path, failing="sanity.prepare.device-in-use")
    _edit_entry(out / FRAGMENT, "secure_accelerator_access", status="Partially Implemented",
                evidence=lambda links: [x for x in links if not x.endswith("#sanity.prepare.device-in-use")])
    _resign(out)
    v = verify(out)
    assert any(r.startswith("secure_accelerator_access (MUST): not met: sanity.prepare.device-in-use failed")
               for r in v.requirements), v.requirements
    assert (f"{FRAGMENT}: secure_accelerator_access does not link its failed check(s) sanity.prepare.device-in-use"
            in v.problems), v.problems


def _fragment_entries(out: Path) -> dict[str, dict[str, object]]:
    data = YAML(typ="safe").load((out / FRAGMENT).read_text())
    entries = [e for items in data["spec"].values() for e in items] + list(data.get("outsideChecklist") or ())
    return {e["id"]: e for e in entries}


def test_the_fragment_statuses_say_what_the_run_shows(tmp_path: Path) -> None:
    entries = _fragment_entries(_bundle(tmp_path))
    # Full coverage, but the run skipped match-attribute: that part is unseen, and the notes say so.
    assert entries["dra_support"]["status"] == "Partially Implemented"
    assert "conformance.topology.match-attribute (skipped: needs a shared attribute)" in str(entries["dra_support"]["notes"])
    assert "Not on the v1.37 checklist" in str(entries["dra_support"]["notes"])
    assert entries["gang_scheduling"]["status"] == "Partially Implemented"
    assert "installs no gang scheduler" in str(entries["gang_scheduling"]["notes"])
    assert entries["gpu_sharing"]["level"] == "SHOULD"
    for e in entries.values():
        assert e["evidence"] and all(re.fullmatch(r"file://v1\.37/gpu-driver/(junit_01\.xml#[a-z.-]+|e2e\.log)", str(x))
                                     for x in e["evidence"]), e  # type: ignore[union-attr]


def test_a_should_requirement_with_no_check_run_is_na_with_the_reason(tmp_path: Path) -> None:
    result = RunResult(run_id="r", environment={"kubernetes": "v1.35.1"})
    result.checks = [CheckResult("conformance.sharing.shared-claim", "r", "s", "skipped", "needs two devices")]
    data = YAML(typ="safe").load(programme("ai-conformance").render(
        result, PRODUCT, {"kubernetesVersion": "v1.35.1"})[FRAGMENT])
    entries = {e["id"]: e for items in data["spec"].values() for e in items}
    assert data["metadata"]["kubernetesVersion"] == "v1.35" and "outsideChecklist" not in data
    assert entries["gpu_sharing"]["status"] == "N/A" and "needs two devices" in entries["gpu_sharing"]["notes"]
    assert entries["dra_support"]["level"] == "MUST" and entries["dra_support"]["status"] == ""
    assert "no evidence for this MUST" in entries["dra_support"]["notes"]


def test_checklists_and_bad_programme_input() -> None:
    assert checklist_for("v1.37") == "v1.37" and checklist_for("v1.40") == "v1.37" and checklist_for("v1.34") == "v1.34"
    with pytest.raises(UsageError, match="older than the programme's first checklist"):
        checklist_for("v1.31")
    with pytest.raises(UsageError, match="unknown programme 'iso-9001'; known: ai-conformance, verify-conformance"):
        parse_programmes(("ai-conformance,iso-9001",))


def test_an_unknown_programme_is_exit_2_before_the_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    product = tmp_path / "product.yaml"
    YAML().dump(PRODUCT, product)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("not read\n")
    code = main(["certify", "--kubeconfig", str(kubeconfig), "--driver", "d", "--device-class", "c", "--product",
                 str(product), "--out", str(tmp_path / "b"), "--programme", "ai-conformance", "--programme", "nope"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown programme 'nope'" in err and "Traceback" not in err


def test_a_requirement_is_implemented_only_when_every_one_of_its_checks_passed(tmp_path: Path) -> None:
    """A check skipped in the run (a driver without device attributes skips match-attribute) leaves that
    part of the requirement unseen: the status is Partially Implemented and the notes name what was
    not checked and why, never the requirement's full wording of what draguard covers."""
    req = next(r for r in REQUIREMENTS if r.id == "dra_support")
    skipped = req.checks[-1]
    result = RunResult(run_id="r", environment={"kubernetes": "v1.37.2"})
    result.checks = [CheckResult(cid, "r", "s", "skipped" if cid == skipped else "passed",
                                 "the driver publishes no device attributes" if cid == skipped else "")
                     for cid in req.checks]
    data = YAML(typ="safe").load(programme("ai-conformance").render(
        result, PRODUCT, {"kubernetesVersion": "v1.37.2"})[FRAGMENT])
    entries = {e["id"]: e for items in data["spec"].values() for e in items}
    entries.update({e["id"]: e for e in data.get("outsideChecklist") or ()})
    dra = entries["dra_support"]
    assert dra["status"] == "Partially Implemented", dra
    assert skipped in dra["notes"] and "no device attributes" in dra["notes"], dra
    assert req.covered not in dra["notes"]
    result.checks = [CheckResult(cid, "r", "s", "passed", "") for cid in req.checks]
    data = YAML(typ="safe").load(programme("ai-conformance").render(
        result, PRODUCT, {"kubernetesVersion": "v1.37.2"})[FRAGMENT])
    entries = {e["id"]: e for e in data.get("outsideChecklist") or ()}
    assert entries["dra_support"]["status"] == "Implemented"
