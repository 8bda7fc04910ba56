"""Backend kind trusts its cluster to be draguard's own (steps pause its nodes and patch the installed
driver's DaemonSet without --allow-context): a scenario on backend kind given the kubeconfig of another
cluster is refused before anything runs, with one line naming the kubeconfig (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.harness.core.errors import UsageError
from draguard.harness.runner.setup import kubeconfig_of
from draguard.harness.scenario.loader import parse_scenario
from fleet.test_installed_fleet import SCENARIO

FOREIGN = ("apiVersion: v1\nkind: Config\ncurrent-context: prod\nclusters: [{name: c, cluster: {server: "
           "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: prod, context: "
           "{cluster: c, user: u}}]\n")


@pytest.mark.parametrize("cluster_option", [[], ["--cluster", "kind"]], ids=["scenario-backend", "cluster-option"])
def test_backend_kind_with_another_clusters_kubeconfig_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], cluster_option: list[str]) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(FOREIGN)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    code = main(["run", str(scenario), "--kubeconfig", str(config), "--dry-run", *cluster_option])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"backend kind: kubeconfig {config} is not one of draguard's kind clusters" in err
    assert "Traceback" not in err


def test_the_runner_refuses_it_too(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(FOREIGN)
    with pytest.raises(UsageError, match="is not one of draguard's kind clusters"):
        kubeconfig_of(parse_scenario(SCENARIO, "s.yaml"), "kind", str(config))
    assert kubeconfig_of(parse_scenario(SCENARIO, "s.yaml"), "kubeconfig", str(config)) == str(config)
