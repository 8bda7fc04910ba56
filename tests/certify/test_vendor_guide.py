"""docs/vendor-guide.md, step by step: the product block passes draguard's validator; the kind cluster's
and the GPU command lines parse with draguard's own command line (no GPU here; tests/kind/test_kind_certify.py
runs the kind step's certify and verify lines in a kind cluster against the upstream test driver);
the laptop's certify and verify lines run as written against the fake driver on the local backend, and the
submission block, run on that bundle, lays out a folder in which every evidence link resolves the way
the AI-conformance programme's validator resolves it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from ruamel.yaml import YAML

from draguard.cli.cluster import command as cluster_group
from draguard.cli.conformance import certify_command
from draguard.cli.main import main
from draguard.conformance.programmes import BundleView
from draguard.conformance.programmes.ai_conformance import FRAGMENT
from draguard.reports.bundle import validate_product

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "vendor-guide.md"


def block(marker: str) -> str:
    found = re.search(rf"<!-- {marker}:.*?-->\n\s*```\w+\n(.*?)\s*```", GUIDE.read_text(), re.S)
    assert found, f"docs/vendor-guide.md lost its {marker} block"
    return "\n".join(line.strip() for line in found.group(1).splitlines() if line.strip())


def sh_blocks() -> list[str]:
    """Every command of the guide's sh blocks (a line each)."""
    blocks = re.findall(r"```sh\n(.*?)```", GUIDE.read_text(), re.S)
    return [line.strip() for b in blocks for line in b.splitlines() if line.strip()]


def test_the_product_block_passes_the_validator() -> None:
    product = validate_product(YAML(typ="safe").load(block("vendor-product")), "docs/vendor-guide.md")
    assert product["type"] and product["contact_email_address"].endswith("@example.com")


def _parse(group_or_command: click.Command, args: list[str]) -> click.Context:
    return group_or_command.make_context(group_or_command.name or "draguard", args)


def test_the_kind_and_gpu_command_lines_parse(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\n")
    env = {"KUBECONFIG": str(kubeconfig), "NODE": "gpu-node-1", "NS": "nvidia-dra-driver-gpu"}
    gpu = shlex.split(block("vendor-gpu").replace("$KUBECONFIG", env["KUBECONFIG"]).replace("$NODE", env["NODE"])
                      .replace("$NS", env["NS"]))
    assert gpu[:2] == ["draguard", "certify"]
    ctx = _parse(certify_command, gpu[2:])
    assert ctx.params["restart_command"].endswith("--field-selector spec.nodeName={node}")
    assert ctx.params["driver_name"] == "gpu.nvidia.com" and ctx.params["programmes"] == ("ai-conformance",)
    kind = [c for c in sh_blocks() if c.startswith(("export KUBECONFIG=$(draguard cluster", "draguard cluster"))]
    assert len(kind) == 2, kind
    for line in kind:
        args = shlex.split(line.split("$(", 1)[-1].rstrip(")"))
        sub = cluster_group.get_command(click.Context(cluster_group), args[2])
        assert sub is not None
        assert _parse(sub, args[3:]).params["backend"] == "kind"


def test_the_kind_step_names_the_test_that_runs_its_commands() -> None:
    text = GUIDE.read_text()
    kind_step = text[text.index("## 2. On a laptop with kind"):text.index("## 3. ")]
    named = re.findall(r"`(tests/kind/test_\w+\.py)`[\s>]*\(`(test_\w+)`\)", kind_step)
    assert named, "the kind step names no test in tests/kind/"
    for path, name in named:
        source = (GUIDE.parents[1] / path).read_text()
        assert f"def {name}(" in source and 'guide_block("vendor-laptop")' in source, f"{path}::{name}"
    assert "tests/kind/test_kind_certify.py" in re.search(r"<!-- vendor-laptop:(.*?)-->", text).group(1)  # type: ignore[union-attr]


@pytest.mark.cluster
def test_the_laptop_commands_and_the_submission_layout(
    make_fleet: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "product.yaml").write_text(block("vendor-product") + "\n")
    commands = block("vendor-laptop").splitlines()
    with make_fleet(nodes=2) as f:
        monkeypatch.setenv("KUBECONFIG", str(f.kubeconfig))
        monkeypatch.setenv("DRIVER", f.driver)
        monkeypatch.setenv("DEVICE_CLASS", f.device_class)
        codes = [main(shlex.split(os.path.expandvars(c))[1:]) for c in commands]
    printed = capsys.readouterr().out
    assert codes == [0, 0], printed
    links = [str(x) for e in _entries(tmp_path / "bundle" / FRAGMENT) for x in e["evidence"]]
    first = re.fullmatch(r"file://(v\d+\.\d+)/([^/]+)/.*", links[0])
    assert first, links
    release, product_dir = first.groups()
    assert product_dir == "example-gpu-dra-driver"
    subprocess.run(["bash", "-euc", block("vendor-submit")], check=True, cwd=tmp_path,
                   env={**os.environ, "RELEASE": release, "PRODUCT_DIR": product_dir})
    folder = tmp_path / "submission" / release / product_dir
    cases = BundleView(folder).cases or {}
    for link in links:  # resolved as cncf/k8s-ai-conformance's validator does (PR #141)
        path, _, case = link.removeprefix("file://").removeprefix(f"{release}/{product_dir}/").partition("#")
        assert (folder / path).is_file(), link
        assert not case or cases[case].status == "passed", link
    assert (folder / "dra-entries.yaml").read_text() == (tmp_path / "bundle" / FRAGMENT).read_text()


def _entries(path: Path) -> list[dict[str, Any]]:
    data = YAML(typ="safe").load(path.read_text())
    return [e for items in data["spec"].values() for e in items] + list(data.get("outsideChecklist") or ())
