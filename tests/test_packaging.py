"""The design's folders install under namespaced import names, from a wheel and editable."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import click
import pytest

import draguard.harness
from draguard.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]


def test_editable_install_maps_each_folder_to_its_namespaced_package() -> None:
    import draguard.chaos
    import draguard.conformance
    import draguard.reports

    assert Path(draguard.harness.__file__).resolve() == ROOT / "harness" / "__init__.py"

    assert Path(draguard.chaos.__file__).resolve().parent == ROOT / "chaos"
    assert Path(draguard.conformance.__file__).resolve().parent == ROOT / "conformance"
    assert Path(draguard.reports.__file__).resolve().parent == ROOT / "reports"


def test_a_wheel_installs_namespaced_packages_with_their_data(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("draguard-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "draguard/harness/__init__.py",
        "draguard/chaos/__init__.py",
        "draguard/conformance/plugin.py",
        "draguard/reports/__init__.py",
        "draguard/cli/main.py",
        "draguard/harness/cluster/gomod/go.mod",
        "draguard/harness/cluster/gomod/go.sum",
        "draguard/harness/grpcapi/proto/dra_v1.proto",
    ):
        assert expected in names, expected
    assert not any(n.startswith(("harness/", "tests/")) for n in names)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)], check=True)
    out = subprocess.run(
        [sys.executable, "-c", "import draguard.harness.kube as k, draguard.cli.main; print(k.__file__)"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().startswith(str(target))
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "draguard = draguard.cli.main:main" in text
    assert "draguard = draguard.conformance.plugin" in text


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in group.commands.items():
        out.append((*prefix, name))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*prefix, name))
    return out


@pytest.mark.parametrize("path", _commands(cli), ids=" ".join)
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output and path[-1] in result.output


def test_building_the_package_prints_no_setuptools_warnings(tmp_path: Path) -> None:
    """A new user's first screen: no license-table deprecation, no data folders 'ignored as packages'."""
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, check=True,
    )
    output = proc.stdout + proc.stderr
    for warning in ("Package would be ignored", "is absent from the `packages` configuration",
                    "`project.license` as a TOML table is deprecated", "SetuptoolsDeprecationWarning"):
        assert warning not in output, warning


def test_every_third_party_module_the_package_imports_is_a_runtime_dependency() -> None:
    """A module imported by the installed package (at any depth, lazily too) comes from a distribution in
    ``project.dependencies``: a user's ``pip install draguard`` gets no ModuleNotFoundError at start-up
    (``draguard explore`` needs Hypothesis, which was once a dev-only dependency)."""
    import ast
    import importlib.metadata as md
    import re
    import tomllib

    declared = {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].lower().replace("_", "-")
                for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    providers = md.packages_distributions()
    folders = ("harness", "chaos", "conformance", "reports", "cli", "scenarios")
    stdlib = set(sys.stdlib_module_names)
    # Modules that only ever run inside a tool that brings the import: the pytest plugin and the sanity
    # suite's pytest module run under pytest; regenerating the gRPC stubs needs grpcio-tools (dev extra).
    inside_their_tool = {"conformance/plugin.py": "pytest", "conformance/sanity/test_sanity.py": "pytest",
                         "harness/grpcapi/regen.py": "grpc_tools"}
    missing: dict[str, set[str]] = {}
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            brought = inside_their_tool.get(str(path.relative_to(ROOT)))
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
                for name in names:
                    top = name.split(".")[0]
                    if top in stdlib or top in ("draguard", "__future__") or top == brought:
                        continue
                    dists = {d.lower().replace("_", "-") for d in providers.get(top, [])}
                    if not dists & declared:
                        missing.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    assert not missing, {k: sorted(v)[:3] for k, v in missing.items()}
