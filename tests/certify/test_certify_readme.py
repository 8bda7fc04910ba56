"""The README's two certification commands, run as written against the local backend with the fake
driver installed: the bundle is written, verifies, and shows the API-observable checks passing."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from draguard.cli.main import main

pytestmark = pytest.mark.cluster

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_commands() -> list[str]:
    text = README.read_text()
    block = re.search(r"<!-- certify-commands:.*?-->\n```sh\n(.*?)```", text, re.S)
    assert block, "README.md lost its certify-commands block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_shows_two_commands() -> None:
    commands = readme_commands()
    assert len(commands) == 2 and all(c.startswith("draguard certify ") for c in commands)


def test_the_readme_commands_produce_and_verify_a_bundle(
    make_fleet: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "product.yaml").write_text(
        "vendor: draguard\nname: fake GPU driver\nversion: '0.1'\ntype: DRA driver\ndescription: a fake driver\n"
        "website_url: https://example.com\ndocumentation_url: https://example.com/docs\n"
        "contact_email_address: dra@example.com\ndriver_version: fake\n")
    with make_fleet() as f:
        monkeypatch.setenv("KUBECONFIG", str(f.kubeconfig))
        monkeypatch.setenv("DRIVER", f.driver)
        monkeypatch.setenv("DEVICE_CLASS", f.device_class)
        codes = [main(shlex.split(os.path.expandvars(c))[1:]) for c in readme_commands()]
    out = capsys.readouterr().out
    assert codes == [0, 0], out
    verdict = json.loads((tmp_path / "bundle" / "verdict.json").read_text())
    statuses = {c["id"]: c["status"] for c in verdict["checks"]}
    assert statuses["conformance.core.template-claim"] == "passed"
    assert statuses["conformance.chaos.taint-eviction"] == "passed"
    assert statuses["conformance.core.force-delete"] == "skipped"  # node-side only: no node access given
    env = json.loads((tmp_path / "bundle" / "environment.json").read_text())
    assert env["kubernetes"].startswith("v1.37") and env["draguardVersion"] and f.nodes[0] in env["nodes"]
    evidence = tmp_path / "bundle" / "evidence"
    assert json.loads((evidence / "slices.json").read_text())
    claims = json.loads((evidence / "checks" / "conformance.core.template-claim" / "resourceclaims.json").read_text())
    assert claims and claims[0]["status"]["allocation"]
    assert "draguard certify --kubeconfig" in (tmp_path / "bundle" / "README.md").read_text()


def test_certify_with_the_driver_sockets_runs_sanity_too_and_bundles_the_grpc_trace(
    make_fleet: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    from draguard.harness.core.paths import NodeDirs

    product = tmp_path / "product.yaml"
    product.write_text("vendor: draguard\nname: fake\nversion: '0.1'\ntype: DRA driver\ndescription: a fake driver\n"
                       "website_url: https://example.com\ndocumentation_url: https://example.com/docs\n"
                       "contact_email_address: dra@example.com\ndriver_image: example/fake:0.1\n")
    with make_fleet(nodes=1) as f:
        node = f.nodes[0]
        dirs = NodeDirs(f.root, node)
        code = main(["certify", "--kubeconfig", str(f.kubeconfig), "--driver", f.driver, "--device-class", f.device_class,
                     "--profile", "core", "--product", str(product), "--out", str(tmp_path / "b"),
                     "--registration-socket", str(dirs.registration_socket(f.driver)), "--node", node,
                     "--cdi-dir", str(dirs.cdi), "--fake-driver-root", str(f.root)])
    out = capsys.readouterr().out
    verdict = json.loads((tmp_path / "b" / "verdict.json").read_text())
    ids = [c["id"] for c in verdict["checks"]]
    assert any(i.startswith("sanity.") for i in ids) and any(i.startswith("conformance.core.") for i in ids)
    assert not any(i.startswith("conformance.chaos.") for i in ids)
    assert {c["id"]: c["status"] for c in verdict["checks"]}["conformance.core.force-delete"] == "passed"
    assert (tmp_path / "b" / "evidence" / "grpc-calls.jsonl").read_text()
    assert code == (0 if verdict["ok"] else 1), out
    assert main(["certify", "--verify", str(tmp_path / "b.tar.gz")]) == code
