"""``certify --programme ai-conformance`` against the fake driver on the local backend: the bundle verifies
(manifest, verdict, the verify-conformance bot's checks, the programme's), every MUST requirement
draguard covers links at least one passing testcase, and every link resolves inside the bundle. Against a
mutant that fails a MUST check, the bundle still verifies as a bundle and --verify names the requirement
and the check that leaves it unmet."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from draguard.cli.main import main
from draguard.conformance.certify import verify
from draguard.conformance.programmes import BundleView
from draguard.conformance.programmes.ai_conformance import FRAGMENT, REQUIREMENTS
from draguard.harness.core.paths import NodeDirs

pytestmark = pytest.mark.cluster

PRODUCT = ("vendor: draguard\nname: fake GPU driver\nversion: '0.1'\ntype: DRA driver\n"
           "description: draguard's fake DRA driver\nwebsite_url: https://example.com\n"
           "documentation_url: https://example.com/docs\ncontact_email_address: dra@example.com\n"
           "driver_version: fake\n")


def _certify(f: Any, tmp_path: Path, profiles: str) -> tuple[int, Path]:
    (tmp_path / "product.yaml").write_text(PRODUCT)
    node = f.nodes[0]
    dirs = NodeDirs(f.root, node)
    out = tmp_path / "bundle"
    code = main(["certify", "--kubeconfig", str(f.kubeconfig), "--driver", f.driver, "--device-class", f.device_class,
                 "--profile", profiles, "--product", str(tmp_path / "product.yaml"), "--out", str(out),
                 "--registration-socket", str(dirs.registration_socket(f.driver)), "--node", node,
                 "--cdi-dir", str(dirs.cdi), "--fake-driver-root", str(f.root), "--programme", "ai-conformance"])
    return code, out


def _entries(out: Path) -> dict[str, dict[str, Any]]:
    data = YAML(typ="safe").load((out / FRAGMENT).read_text())
    found = [e for items in data["spec"].values() for e in items] + list(data.get("outsideChecklist") or ())
    return {e["id"]: e for e in found}


def test_the_fragment_from_the_fake_driver_links_passing_evidence_that_resolves(
    make_fleet: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    with make_fleet(nodes=2) as f:
        code, out = _certify(f, tmp_path, "core,topology,sharing,gang")
    printed = capsys.readouterr().out
    assert code == 0, printed
    v = verify(out)
    assert v.ok, (v.problems, v.failed_checks, v.requirements)
    submission = json.loads((out / "submission.json").read_text())
    assert submission["programmes"] == ["ai-conformance"] and submission["release"] == "v1.37"
    assert "conformance.core.template-claim" in submission["requiredChecks"]
    view = BundleView(out)
    cases = view.cases or {}
    entries = _entries(out)
    covered_musts = [r for r in REQUIREMENTS if "MUST" in r.levels.values()]
    assert {r.id for r in covered_musts} <= set(entries)
    for req in covered_musts:
        links = entries[req.id]["evidence"]
        named = []
        for link in links:
            m = re.fullmatch(r"file://v1\.37/fake-gpu-driver/([^#]+)(?:#(.+))?", link)
            assert m, link
            assert (out / m.group(1)).is_file(), link  # resolves inside the bundle
            if m.group(2):
                assert m.group(2) in cases, link
                named.append(cases[m.group(2)])
        assert any(c.status == "passed" for c in named), (req.id, links)
        assert all(c.status == "passed" for c in named), (req.id, named)
    assert entries["dra_support"]["status"] == "Implemented"
    assert entries["secure_accelerator_access"]["status"] == "Partially Implemented"
    assert entries["gang_scheduling"]["status"] == "Partially Implemented"
    assert main(["certify", "--verify", str(out.with_name("bundle.tar.gz"))]) == 0


def test_a_mutant_failing_a_must_check_verifies_as_a_bundle_but_not_the_requirement(
    make_fleet: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    with make_fleet("double-allocation", nodes=1) as f:
        code, out = _certify(f, tmp_path, "core")
    assert code == 1
    capsys.readouterr()
    v = verify(out)
    assert not v.problems, v.problems  # the bundle itself is sound
    assert any(c.startswith("sanity.prepare.device-in-use") for c in v.failed_checks), v.failed_checks
    unmet = [r for r in v.requirements if r.startswith("secure_accelerator_access (MUST): not met:")]
    assert unmet and "sanity.prepare.device-in-use failed" in unmet[0], v.requirements
    assert main(["certify", "--verify", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "UNMET    secure_accelerator_access (MUST): not met: sanity.prepare.device-in-use failed" in printed
    assert "BUNDLE" not in printed and "TAMPERED" not in printed
    assert _entries(out)["secure_accelerator_access"]["status"] == "Not Implemented"
