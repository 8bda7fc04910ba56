"""The sanity suite as pytest: ``pytest --pyargs draguard.conformance.sanity --registration-socket S
--kubeconfig F --driver NAME [--plugin-socket P] [--node N] [--cdi-dir D] [--restart-command CMD]
[--capabilities FILE] [--idempotent-count N]``.

One test per check, named by its id; a check's skip is a pytest skip with the reason, a failure a
pytest failure with the evidence. The options are registered by the draguard pytest plugin.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from draguard.conformance.sanity import CommandHooks, FakeDriverHooks, SanityConfig, SanityContext, open_context
from draguard.conformance.sanity.capabilities import load_capabilities
from draguard.conformance.sanity.suite import run_check, sanity_checks
from draguard.harness.core.registry import CHECKS

IDS = [e.name for e in sanity_checks()]


@pytest.fixture(scope="module")
def sanity_context(request: pytest.FixtureRequest) -> Iterator[SanityContext]:
    opt = request.config.getoption
    missing = [f for f in ("--registration-socket", "--kubeconfig", "--driver") if not opt(f)]
    if missing:
        pytest.skip(f"the sanity suite needs {', '.join(missing)}")

    def path(flag: str) -> Path | None:
        value = opt(flag)
        return Path(value).absolute() if value else None

    config = SanityConfig(
        registration_socket=Path(opt("--registration-socket")).absolute(),
        kubeconfig=Path(opt("--kubeconfig")),
        driver=opt("--driver"),
        plugin_socket=path("--plugin-socket"),
        node=opt("--node"),
        cdi_dir=path("--cdi-dir"),
        context=opt("--context"),
        idempotent_count=opt("--idempotent-count"),
        capabilities=load_capabilities(Path(opt("--capabilities"))) if opt("--capabilities") else None,
    )
    restart = CommandHooks(opt("--restart-command"), node=opt("--node")) if opt("--restart-command") else None
    hooks: object = restart
    if opt("--fake-driver-root"):
        hooks = FakeDriverHooks(opt("--fake-driver-root"), opt("--node"), opt("--driver"), process=restart)
    with open_context(config, hooks) as ctx:
        yield ctx


@pytest.mark.parametrize("check_id", IDS)
def test_check(sanity_context: SanityContext, check_id: str) -> None:
    result = run_check(sanity_context, CHECKS.get(check_id))
    if result.status in ("skipped", "not-applicable"):
        pytest.skip(result.reason if result.status == "skipped" else f"not applicable: {result.reason}")
    if result.status != "passed":
        evidence = "\n".join(f"  - {e.message}" for e in result.evidence)
        pytest.fail(f"{check_id} {result.status}: {result.rule}\n{result.reason}\n{evidence}", pytrace=False)
