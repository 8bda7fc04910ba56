"""``sanity.prepare.admin-access`` (capability ``adminAccess``, KEP-5018) through ``draguard sanity``
against the fake driver on the real local control plane: the correct driver prepares a device another
claim holds for an admin-access claim and keeps the holder prepared after unpreparing it; a driver that
does not declare admin access gets not-applicable, and a namespace without the admin-access label
(given with --namespace) makes it a skip saying so, since the API server refuses such claims there."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.cli.main import main
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs
from draguard.harness.kube import Kube

from .conftest import fake_driver_node

pytestmark = pytest.mark.cluster

CHECK = "sanity.prepare.admin-access"


@pytest.fixture
def driver(draguard_cluster: Any) -> Iterator[tuple[Path, str]]:
    with fake_driver_node(draguard_cluster, "dg-aa") as (_, root, node):
        yield root, node


def _check(draguard_cluster: Any, root: Path, node: str, out: Path, *extra: str) -> dict[str, Any]:
    dirs = NodeDirs(root, node)
    main(["sanity", "--registration-socket", str(dirs.registration_socket(DEFAULT_DRIVER)), "--kubeconfig",
          str(draguard_cluster.kubeconfig), "--driver", DEFAULT_DRIVER, "--node", node, "--cdi-dir", str(dirs.cdi),
          "--check", CHECK, "--idempotent-count", "2", "--out", str(out), *extra])
    (check,) = json.loads((out / "verdict.json").read_text())["checks"]
    return dict(check)


def test_admin_access(draguard_cluster: Any, driver: tuple[Path, str], tmp_path: Path,
                      capsys: pytest.CaptureFixture[str]) -> None:
    root, node = driver
    kube: Kube = draguard_cluster.kube()
    passed = _check(draguard_cluster, root, node, tmp_path / "own")
    calls = [json.loads(line) for line in (tmp_path / "own" / "grpc-calls.jsonl").read_text().splitlines()]
    caps = tmp_path / "caps.yaml"
    caps.write_text("adminAccess: false\n")
    na = _check(draguard_cluster, root, node, tmp_path / "na", "--capabilities", str(caps))
    ns = f"users-{uuid.uuid4().hex[:6]}"
    kube.create_namespace(ns, {"team": "someone-else"})
    try:
        skipped = _check(draguard_cluster, root, node, tmp_path / "ns", "--namespace", ns)
    finally:
        kube.delete("Namespace", ns)
    capsys.readouterr()
    assert passed["status"] == "passed", passed
    prepared = [c["name"] for call in calls if call["method"] == "NodePrepareResources" for c in call["claims"]]
    assert len(set(prepared)) == 2, prepared  # the holder and the admin-access claim, both prepared
    assert na["status"] == "not-applicable" and "admin access (adminAccess)" in na["reason"], na
    assert skipped["status"] == "skipped", skipped
    assert f"namespace {ns} lacks the label resource.kubernetes.io/admin-access=true" in skipped["reason"], skipped
