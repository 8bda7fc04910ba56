"""Two sanity checks aimed at driver bugs a node reboot and a damaged checkpoint expose, against draguard's
fake driver: sanity.cdi.recreated-on-reprepare (the CDI specs of a prepared claim removed, as a reboot's
empty tmpfs does, then the repeated prepare must write them again) and sanity.restart.corrupt-checkpoint
(killed, its checkpoint truncated, started: it must still release what it had prepared). The correct
driver passes both; cdi-not-recreated and discard-corrupt-checkpoint each fail the check aimed at them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.conformance.sanity import SanityConfig, run_sanity
from draguard.conformance.sanity.hooks import FakeDriverHooks
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

from .conftest import cluster_node, fake_driver_node

pytestmark = pytest.mark.cluster

CHECKS = ("sanity.cdi.recreated-on-reprepare", "sanity.restart.corrupt-checkpoint")


@pytest.fixture(scope="module")
def node(draguard_cluster: Any) -> Iterator[str]:
    with cluster_node(draguard_cluster, "dg-rb") as name:
        yield name


def _statuses(cluster: Any, node: str, mutant: str | None) -> dict[str, tuple[str, str]]:
    kubeconfig = Path(cluster.kubeconfig)
    with fake_driver_node(cluster, "", node=node, mutant=mutant) as (proc, root, _):
        dirs = NodeDirs(root, node)
        config = SanityConfig(registration_socket=dirs.registration_socket(DEFAULT_DRIVER), kubeconfig=kubeconfig,
                              driver=DEFAULT_DRIVER, plugin_socket=dirs.dra_socket(DEFAULT_DRIVER), node=node,
                              cdi_dir=dirs.cdi, call_timeout=10.0, select=CHECKS)
        result = run_sanity(config, FakeDriverHooks(root, node, process=proc))
        return {c.id: (c.status, c.reason) for c in result.checks if c.id in CHECKS}


def test_the_correct_driver_passes_both(draguard_cluster: Any, node: str) -> None:
    got = _statuses(draguard_cluster, node, None)
    assert got == {c: ("passed", got[c][1]) for c in CHECKS}, got


@pytest.mark.parametrize(("mutant", "check", "words"), [
    ("cdi-not-recreated", "sanity.cdi.recreated-on-reprepare", "were gone and it was prepared again"),
    ("discard-corrupt-checkpoint", "sanity.restart.corrupt-checkpoint", "the driver forgot what it had prepared"),
])
def test_each_mutant_fails_the_check_aimed_at_it(draguard_cluster: Any, node: str, mutant: str, check: str,
                                                 words: str) -> None:
    status, reason = _statuses(draguard_cluster, node, mutant)[check]
    assert status == "failed" and words in reason, (status, reason)
