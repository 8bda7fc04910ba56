"""The certification bundle without a cluster: product validation (exit 2 naming the field), the bundle's
files and manifest, and ``certify --verify`` on intact, tampered, failed and non-bundles."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.harness.core.errors import UsageError
from draguard.harness.result import CheckResult, Evidence, RunResult
from draguard.reports.bundle import load_product, validate_product, verify_bundle, write_bundle

PRODUCT = {"vendor": "Example", "name": "GPU driver", "version": "1.2.3", "type": "DRA driver",
           "description": "A DRA driver for Example GPUs.", "website_url": "https://example.com",
           "documentation_url": "https://example.com/docs", "contact_email_address": "dra@example.com",
           "driver_image": "registry.example.com/gpu:1.2.3"}


def _result(status: str = "passed") -> RunResult:
    r = RunResult(run_id="certify-t", environment={"kubernetes": "v1.37.2"})
    r.checks = [CheckResult("conformance.core.template-claim", "a rule", "KEP-4381", "passed", duration=1.0),
                CheckResult("conformance.chaos.taint-eviction", "taints evict", "KEP-5055", status,
                            "pod not evicted" if status == "failed" else "", [Evidence("pod p still runs", ("Pod ns/p",))]),
                CheckResult("conformance.gang.spread", "gangs", "KEP-4381", "skipped", "needs two nodes")]
    return r


def _bundle(tmp_path: Path, status: str = "passed") -> Path:
    out = tmp_path / "bundle"
    archive = write_bundle(_result(status), out, PRODUCT, environment={"kubernetes": "v1.37.2"},
                           evidence={"slices.json": "[]", "grpc-calls.jsonl": b"{}\n"}, reproduce="draguard certify ...",
                           submission={"kubernetesVersion": "v1.37.2", "requiredChecks": ["conformance.core.template-claim"],
                                       "programmes": []})
    assert archive == tmp_path / "bundle.tar.gz"
    return out


@pytest.mark.parametrize("field", ["vendor", "name", "version", "type", "description", "website_url",
                                   "documentation_url", "contact_email_address"])
def test_a_missing_product_field_is_refused_naming_it(field: str) -> None:
    with pytest.raises(UsageError, match=f"missing field '{field}'"):
        validate_product({k: v for k, v in PRODUCT.items() if k != field}, "product.yaml")


def test_the_driver_image_or_version_is_required_and_urls_are_urls() -> None:
    with pytest.raises(UsageError, match="driver_image"):
        validate_product({k: v for k, v in PRODUCT.items() if k != "driver_image"}, "p")
    assert validate_product({**{k: v for k, v in PRODUCT.items() if k != "driver_image"}, "driver_version": "v1"}, "p")
    with pytest.raises(UsageError, match="'website_url' is not a URL"):
        validate_product({**PRODUCT, "website_url": "example.com"}, "p")
    with pytest.raises(UsageError, match="'repo_url' is not a URL"):
        validate_product({**PRODUCT, "repo_url": "https:// spaced.example.com"}, "p")
    with pytest.raises(UsageError, match="'contact_email_address' is not an email address"):
        validate_product({**PRODUCT, "contact_email_address": "dra at example"}, "p")
    with pytest.raises(UsageError, match="not a product description"):
        validate_product(["vendor"], "p")


def test_certify_exits_2_naming_the_missing_field_before_touching_the_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    product = tmp_path / "product.yaml"
    product.write_text("vendor: Example\nname: GPU\nversion: '1'\ntype: driver\ndescription: d\n"
                       "website_url: https://e.com\ncontact_email_address: a@e.com\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("not used: the product is read first\n")
    code = main(["certify", "--kubeconfig", str(kubeconfig), "--driver", "d", "--device-class", "c",
                 "--product", str(product), "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert code == 2 and "documentation_url" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()
    with pytest.raises(UsageError, match="cannot read"):
        load_product(tmp_path / "nope.yaml")


def test_the_bundle_has_the_submission_files_and_a_manifest_sha256sum_can_check(tmp_path: Path) -> None:
    out = _bundle(tmp_path)
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert {"PRODUCT.yaml", "junit_01.xml", "e2e.log", "verdict.json", "environment.json", "README.md",
            "sha256sum.txt", "evidence/slices.json", "evidence/grpc-calls.jsonl"} <= names
    for line in (out / "sha256sum.txt").read_text().splitlines():
        digest, name = line.split("  ", 1)
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    assert "vendor: Example" in (out / "PRODUCT.yaml").read_text()
    assert 'name="conformance.chaos.taint-eviction"' in (out / "junit_01.xml").read_text()
    log = (out / "e2e.log").read_text()
    assert "[SKIPPED] conformance.gang.spread" in log and "reason: needs two nodes" in log and log.endswith("PASS\n")
    assert json.loads((out / "verdict.json").read_text())["ok"] is True
    with tarfile.open(tmp_path / "bundle.tar.gz") as tar:
        assert "bundle/sha256sum.txt" in tar.getnames()


def test_verify_passes_an_intact_bundle_folder_and_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _bundle(tmp_path)
    assert verify_bundle(out).ok and verify_bundle(tmp_path / "bundle.tar.gz").ok
    assert main(["certify", "--verify", str(tmp_path / "bundle.tar.gz")]) == 0
    assert "verified; every check passed (2 passed, 1 skipped, 0 failed)" in capsys.readouterr().out


@pytest.mark.parametrize("victim", ["e2e.log", "verdict.json", "evidence/slices.json"])
def test_verify_fails_a_tampered_bundle_naming_the_file(tmp_path: Path, victim: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _bundle(tmp_path)
    (out / victim).write_text((out / victim).read_text().replace("e", "E", 1) + " ")
    assert main(["certify", "--verify", str(out)]) == 1
    printed = capsys.readouterr().out
    assert f"TAMPERED {victim}: changed since the bundle was written" in printed and "NOT verified" in printed


def test_verify_fails_an_added_or_removed_file_and_a_bundle_whose_check_failed(tmp_path: Path) -> None:
    out = _bundle(tmp_path)
    (out / "evidence" / "extra.txt").write_text("x")
    (out / "evidence" / "grpc-calls.jsonl").unlink()
    v = verify_bundle(out)
    assert v.exit_code == 1 and any("extra.txt: not listed" in p for p in v.problems)
    assert any("grpc-calls.jsonl: listed in sha256sum.txt but missing" in p for p in v.problems)
    failed = _bundle(tmp_path / "f", status="failed")
    v = verify_bundle(failed)
    assert v.exit_code == 1 and not v.problems and v.failed_checks[0].startswith("conformance.chaos.taint-eviction")


def test_verify_exits_2_on_what_is_not_a_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("hello")
    for target in (tmp_path / "empty", tmp_path / "file.txt", tmp_path / "missing"):
        assert main(["certify", "--verify", str(target)]) == 2
        err = capsys.readouterr().err
        assert "not a certification bundle" in err and "Traceback" not in err


def test_certify_without_verify_names_the_missing_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certify", "--driver", "d"]) == 2
    assert "--kubeconfig" in capsys.readouterr().err


def test_an_unknown_profile_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--profile", "core,bogus", "--list"]) == 2
    assert "'bogus'" in capsys.readouterr().err


def test_an_unreachable_cluster_is_exit_2_naming_the_kubeconfig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n")
    assert main(["conformance", "--kubeconfig", str(kubeconfig), "--driver", "d", "--device-class", "c"]) == 2
    err = capsys.readouterr().err
    assert str(kubeconfig) in err and "cannot reach the API server" in err and "Traceback" not in err
