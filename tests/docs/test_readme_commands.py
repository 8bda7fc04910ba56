"""Every command the README shows is run by a test: each block of commands carries a marker naming the
test file that runs it, and that file names the marker (so moving a block or a test cannot leave a
command unrun). The commands that need no cluster are checked here; the others in the files named."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from readme_blocks import REPO, blocks, unmarked_commands

EXPECTED = {"make", "install", "scenario", "mutants", "explore", "driver", "certify", "retarget", "lint", "cluster", "load",
            "bench", "incluster"}
"""The README's blocks of commands, by marker name: one per command group of the guide."""


def test_every_block_of_commands_names_the_test_that_runs_it() -> None:
    assert unmarked_commands() == [], "a README block of commands without a `<!-- NAME-commands: TEST -->` marker"
    found = blocks()
    assert set(found) == EXPECTED
    for block in found.values():
        test = REPO / block.test
        assert test.is_file(), f"{block.name}-commands names {block.test}, which does not exist"
        assert f"{block.name}-commands" in test.read_text(), f"{block.test} does not run the {block.name}-commands block"
        assert block.lines, f"the {block.name}-commands block is empty"


def test_every_draguard_command_has_its_example() -> None:
    shown = {" ".join(line.split()[1:3]) if line.startswith("draguard driver") else line.split()[1]
             for b in blocks().values() for line in b.lines if line.startswith("draguard ")}  # fmt: skip
    shown |= {"demo"}  # what `make demo` runs (tests/docs/test_readme_demo.py)
    shown |= {re.search(r"\$\(draguard (\w+)", line)[1] for b in blocks().values() for line in b.lines  # type: ignore[index]
              if line.startswith("export ")}  # fmt: skip
    help_text = subprocess.run([sys.executable, "-m", "draguard.cli.main", "--help"], cwd=REPO, capture_output=True,
                               text=True).stdout  # fmt: skip
    commands = set(re.findall(r"^  ([a-z][a-z-]+)  ", help_text, re.MULTILINE))
    assert commands, help_text
    missing = commands - {c.split()[0] for c in shown}
    assert not missing, f"draguard commands the README shows no example of: {sorted(missing)}"


def test_the_marker_parser_sees_blocks_and_unmarked_commands() -> None:
    text = ("<!-- x-commands: tests/a.py runs it -->\n```sh\ndraguard run a \\\n  --seed 1   # why\n```\n"
            "```sh\ndraguard validate b\n```\n```console\n$ draguard lint c\noutput\n```\n")
    assert blocks(text)["x"].lines == ("draguard run a --seed 1",)
    assert blocks(text)["x"].test == "tests/a.py"
    assert unmarked_commands(text) == ["draguard validate b", "draguard lint c"]


def test_make_test_is_what_ci_runs_and_make_demo_runs_draguard_demo() -> None:
    assert blocks()["make"].lines == ("make demo", "make test")
    assert re.search(r"^make test$", (REPO / ".ci" / "run").read_text(), re.MULTILINE)
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^demo: binaries\n\t\$\(BIN\)/draguard demo\n", makefile, re.MULTILINE)


def test_the_install_block_is_what_make_does() -> None:
    assert blocks()["install"].lines == ("pip install -e .", "draguard cluster build")
    makefile = (REPO / "Makefile").read_text()
    assert "pip install -q -e '.[dev]'" in makefile and "$(BIN)/draguard cluster build" in makefile
