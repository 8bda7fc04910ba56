"""The embedding example of docs/sanity.md ("From your own pytest run") runs as written, in a pytest
run of its own (pytester), against the fake driver's servers in process: one test per check, the
registration checks pass, a check that cannot start is a skip with its reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from draguard.conformance.sanity import sanity_checks
from draguard.harness.core.paths import DEFAULT_DRIVER
from draguard.harness.driver.service import PluginServer

from .conftest import NODE

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sanity.md"


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    (example,) = [b for b in blocks if b.startswith("# test_dra_contract.py")]
    return example


def test_the_embedding_example_in_the_docs_runs_the_suite_as_the_vendors_own_tests(
    pytester: pytest.Pytester, fake_server: PluginServer, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_dra_contract=_example())
    monkeypatch.setenv("DRIVER_REGISTRATION_SOCKET", str(fake_server.registration_socket))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("DRIVER_NAME", DEFAULT_DRIVER)
    monkeypatch.setenv("DRIVER_NODE", NODE)
    monkeypatch.delenv("DRIVER_RESTART_COMMAND", raising=False)
    run = pytester.runpytest("-v", "-rs", "-p", "no:cacheprovider", "-k", "registration or restart")
    run.stdout.fnmatch_lines([
        "*test_dra_contract?sanity.registration.info? PASSED*",
        "*test_dra_contract?sanity.registration.versions? PASSED*",
        # No restart hook: skipped before it starts, saying why.
        "*SKIPPED*needs the 'restart' hook*no hooks were given*",
    ])
    outcomes = run.parseoutcomes()
    restart = len(sanity_checks(("sanity.restart.*",)))  # each needs a hook the example does not give
    assert outcomes.get("passed") == 5 and outcomes.get("skipped") == restart and "failed" not in outcomes, outcomes
