"""The hollow kubelet's Go sources: gofmt-clean, and `go vet` plus the Go unit tests (one per
delegated DRA method, and the CDI-enforcing runtime) pass in the pinned module. Skipped, saying so,
where there is no Go toolchain (the binary itself then comes from DRAGUARD_BIN_DIR)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from draguard.harness.cluster import binaries as bins

GO = shutil.which("go")
needs_go = pytest.mark.skipif(GO is None, reason="no Go toolchain on PATH")


@needs_go
def test_the_go_sources_are_gofmt_clean() -> None:
    gofmt = Path(str(GO)).with_name("gofmt")
    out = subprocess.run([str(gofmt), "-l", str(bins.KUBELET_SRC)], capture_output=True, text=True, check=True)
    assert out.stdout == "", f"not gofmt-clean: {out.stdout}"


@needs_go
def test_go_vet_and_the_go_unit_tests_pass(tmp_path: Path) -> None:
    work = bins.stage_module(tmp_path, tests=True)
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
    for cmd in (["vet", "-trimpath", "./kubelet"], ["test", "-trimpath", "-count=1", "./kubelet"]):
        proc = subprocess.run([str(GO), *cmd], cwd=work, env=env, capture_output=True, text=True, timeout=1500)
        assert proc.returncode == 0, f"go {' '.join(cmd)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
