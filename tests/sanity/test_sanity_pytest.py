"""``pytest --pyargs draguard.conformance.sanity``: one test per check with the CLI's options; skips
carry their reason and failures their evidence. Run with pytester against the fake driver's servers
in process (no API server: the checks that need claims end as failures naming the cause)."""

from __future__ import annotations

from pathlib import Path

import pytest

from draguard.conformance.sanity import sanity_checks
from draguard.harness.driver.service import PluginServer
from draguard.harness.core.paths import DEFAULT_DRIVER

from .conftest import NODE


def test_without_options_every_check_is_skipped_saying_what_is_missing(pytester: pytest.Pytester) -> None:
    run = pytester.runpytest("--pyargs", "draguard.conformance.sanity", "-rs", "-p", "no:cacheprovider")
    run.assert_outcomes(skipped=len(sanity_checks()))
    run.stdout.fnmatch_lines(["*needs --registration-socket, --kubeconfig, --driver*"])


def test_with_the_options_each_check_is_a_test_named_by_its_id(
    pytester: pytest.Pytester, fake_server: PluginServer, kubeconfig: Path
) -> None:
    run = pytester.runpytest(
        "--pyargs", "draguard.conformance.sanity", "-v", "-p", "no:cacheprovider",
        "--registration-socket", str(fake_server.registration_socket), "--kubeconfig", str(kubeconfig),
        "--driver", DEFAULT_DRIVER, "--node", NODE, "-k", "registration or advertised or stream or unknown or published",
    )
    run.stdout.fnmatch_lines([
        "*test_check?sanity.registration.info? PASSED*",
        "*test_check?sanity.unprepare.unknown-claim? PASSED*",
        "*test_check?sanity.health.advertised? PASSED*",
    ])
    # Without an API server the published devices are unknown: that check fails, naming the cause.
    run.stdout.fnmatch_lines(["*sanity.health.published-devices error*", "*cannot reach the API server*"])
    assert run.parseoutcomes() == {"passed": 8, "failed": 2, "deselected": len(sanity_checks()) - 10}, (
        run.stdout.str()[-3000:])


def test_capabilities_make_checks_not_applicable_in_pytest_too(
    pytester: pytest.Pytester, fake_server: PluginServer, kubeconfig: Path
) -> None:
    caps = pytester.path / "caps.yaml"
    caps.write_text("healthStream: false\n")
    run = pytester.runpytest(
        "--pyargs", "draguard.conformance.sanity", "-rs", "-p", "no:cacheprovider",
        "--registration-socket", str(fake_server.registration_socket), "--kubeconfig", str(kubeconfig),
        "--driver", DEFAULT_DRIVER, "--node", NODE, "--capabilities", str(caps), "--idempotent-count", "2",
        "-k", "health",
    )
    run.stdout.fnmatch_lines(["*not applicable: the driver does not declare a health stream*"])
    assert run.parseoutcomes() == {"passed": 1, "skipped": 3, "deselected": len(sanity_checks()) - 4}, (
        run.stdout.str()[-3000:])
