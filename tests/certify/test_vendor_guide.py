"""docs/vendor-guide.md, step by step: the product block passes draguard's validator; every draguard
command of the guide parses with draguard's own command line, the GPU step's among them (no GPU here;
tests/kind/test_kind_certify.py runs the kind step's certify and verify lines in a kind cluster against
the upstream test driver);
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

from draguard.cli.main import cli, main
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


def _parse(args: list[str]) -> tuple[click.Command, click.Context]:
    """``draguard ARGS`` parsed by draguard's own command line down to the command it names (its options
    and values converted, as a run would see them); raises click's usage error otherwise."""
    assert args[0] == "draguard", args
    command: click.Command = cli
    ctx = click.Context(cli, info_name="draguard")
    rest = args[1:]
    while isinstance(command, click.Group):
        name, sub, rest = command.resolve_command(ctx, rest)
        assert sub is not None and name is not None, args
        command = sub
        ctx = sub.make_context(name, list(rest), parent=ctx)
        rest = [*ctx._protected_args, *ctx.args]
    return command, ctx


def _commands(env: dict[str, str]) -> list[list[str]]:
    """Every draguard command of the guide's sh blocks (the inner one of ``$(draguard ...)`` too), with
    the guide's shell variables set as a reader sets them."""
    out = []
    for line in sh_blocks():
        found = re.search(r"(?:^|\$\()(draguard [^)]*)", line)
        if found:
            out.append(shlex.split(re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), m.group(0)), found.group(1))))
    return out


def test_every_draguard_command_of_the_guide_parses_with_draguards_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Steps no test here can run (a GPU cluster, the least-privilege account) are at least commands
    draguard accepts: every option and value in them is one it knows."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\n")
    monkeypatch.chdir(GUIDE.parents[1])  # the repository: scenarios/ as the guide names it
    env = {"KUBECONFIG": str(kubeconfig), "NODE": "gpu-node-1", "NS": "nvidia-dra-driver-gpu",
           "DRIVER": "test-driver.cdi.k8s.io", "DEVICE_CLASS": "draguard-test-driver"}
    parsed = [(c, *_parse(c)) for c in _commands(env)]
    names = [f"{ctx.parent.info_name if ctx.parent and ctx.parent.parent else ''} {ctx.info_name}".strip()
             for _, _, ctx in parsed]
    assert names == ["cluster up", "certify", "certify", "cluster down", "certify", "certify", "run", "results", "certify"], names
    gpu = next(ctx for args, _, ctx in parsed if "gpu.nvidia.com" in args)
    assert gpu.params["restart_command"] == ("kubectl -n nvidia-dra-driver-gpu delete pod -l "
                                            "dra-driver-nvidia-gpu-component=kubelet-plugin "
                                            "--field-selector spec.nodeName={node}")
    assert gpu.params["driver_name"] == "gpu.nvidia.com" and gpu.params["programmes"] == ("ai-conformance",)
    assert gpu.params["node"] == "gpu-node-1" and gpu.params["cdi_dir"] == Path("/var/run/cdi")
    assert all(ctx.params["backend"] == "kind" for args, _, ctx in parsed if args[1] == "cluster")
    assert [ctx.params["bundle"] for args, _, ctx in parsed if "--verify" in args] == [
        Path("bundle"), Path("bundle.tar.gz"), Path("results/bundle.tar.gz")]
    results = next(ctx for args, _, ctx in parsed if args[1] == "results")
    assert results.params["output"] == Path("results") and results.params["namespace"] == "draguard-certify"


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
