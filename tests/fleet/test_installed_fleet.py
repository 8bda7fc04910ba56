"""The installed fleet's pieces that need no cluster: the DaemonSet exclusion and its exact undo, what
a run on each backend lacks, and the scenario checks of ``backend: kind`` and ``driver.daemonSet``.

Against a kind cluster with real kubelets: tests/kind/test_kind_chaos.py."""

from __future__ import annotations

from typing import Any

import pytest

import draguard.chaos  # noqa: F401  (registers the faults)
from draguard.harness.campaign.retarget import ClusterFacts, RunTarget, decide, retarget
from draguard.harness.fleet.installed import InstalledFleet, _exclusion
from draguard.harness.scenario.checks import lacking
from draguard.harness.scenario.loader import parse_scenario, problems_of

EXCLUDE = {"key": "metadata.name", "operator": "NotIn", "values": ["w1", "w2"]}


def test_an_exclusion_is_added_to_every_term_and_the_original_is_untouched() -> None:
    assert _exclusion(None, {"w2", "w1"}) == {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [EXCLUDE]}]}}}
    original: dict[str, Any] = {
        "podAntiAffinity": {"x": 1},
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["w1", "w3"]}]}]}}}
    got = _exclusion(original, {"w1", "w2"})
    terms = got["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0] == {"matchExpressions": [{"key": "gpu", "operator": "Exists"}], "matchFields": [EXCLUDE]}
    assert terms[1]["matchFields"][-1] == EXCLUDE and len(terms[1]["matchFields"]) == 2  # terms are ORed: each excludes
    assert got["podAntiAffinity"] == {"x": 1}
    assert len(original["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]) == 1


@pytest.mark.parametrize("affinity, strategy, restored_affinity, restored_strategy", [
    (None, {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}, None,
     {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}),
    ({"podAntiAffinity": {"x": 1}}, {"type": "OnDelete"}, {"nodeAffinity": None}, {"type": "OnDelete", "rollingUpdate": None}),
    ({"nodeAffinity": {"a": 1}}, None,  # no required terms: the ones the exclusion added go
     {"nodeAffinity": {"a": 1, "requiredDuringSchedulingIgnoredDuringExecution": None}}, {"type": "RollingUpdate"}),
])
def test_the_restoring_merge_patch_puts_back_exactly_what_was_there(
        affinity: Any, strategy: Any, restored_affinity: Any, restored_strategy: Any) -> None:
    fleet = InstalledFleet()
    fleet._original = {"affinity": affinity, "updateStrategy": strategy}
    patch = fleet._restore_patch()
    assert patch == {"spec": {"updateStrategy": restored_strategy, "template": {"spec": {"affinity": restored_affinity}}}}


def test_what_an_external_driver_lacks_on_each_backend() -> None:
    assert {"restart-driver", "kill-node"} <= lacking("external", "kubeconfig", False).keys()
    assert "restart-driver" not in lacking("external", "kubeconfig", False, daemon_set=True)
    assert "kill-node" in lacking("external", "kubeconfig", False, daemon_set=True)
    on_kind = lacking("external", "kind", False)
    assert not {"restart-driver", "kill-node"} & on_kind.keys()
    assert {"fake-driver", "fake-nodes", "local-backend"} <= on_kind.keys()
    assert "kill-node" not in lacking("external", "local", False)  # draguard's own node agents
    assert not {"restart-driver", "kill-node"} & lacking("fake", "kubeconfig", False).keys()
    # A restart command restarts an installed driver; it cannot keep one down.
    commanded = lacking("external", "kubeconfig", False, restart_command=True)
    assert "restart-driver" not in commanded and "stop-driver" in commanded
    assert "stop-driver" not in lacking("external", "kubeconfig", False, daemon_set=True)
    assert not {"restart-driver", "stop-driver"} & lacking("external", "local", False).keys()  # draguard's processes


def test_a_restart_command_makes_driver_restart_apply_and_not_driver_down() -> None:
    from pathlib import Path

    from draguard.harness.scenario.loader import load_scenario

    library = Path(__file__).resolve().parents[2] / "scenarios"
    restart = load_scenario(library / "driver-restart-mid-gang.yaml")
    down = load_scenario(library / "driver-down-until-cleanup.yaml")
    target = RunTarget("test-driver.cdi.k8s.io", "cls", allow_destructive=True, restart_command="systemctl restart drv")
    reasons, plan = decide(restart, target, _facts(None, False))
    assert plan is not None, reasons
    assert retarget(restart, target, plan).driver.restart_command == "systemctl restart drv"
    reasons, plan = decide(down, target, _facts(None, False))
    assert plan is None and any("keeps the driver down for a while" in r for r in reasons), reasons
    # In a scenario file: validated with the driver it restarts, refused where draguard runs the driver.
    text = SCENARIO.replace("backend: kind", "backend: kubeconfig").replace(
        "deviceClass: draguard-test-driver}", "deviceClass: draguard-test-driver, restartCommand: 'true'}")
    problems, _ = problems_of(text, "s.yaml")
    assert [str(p) for p in problems if "driver-down" in str(p) and "stop-driver" in str(p)], problems
    problems, _ = problems_of(text.replace("backend: kubeconfig", "backend: local"), "s.yaml")
    assert any("'restartCommand' restarts a driver installed in a cluster" in str(p) for p in problems), problems


SCENARIO = """apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {name: s}
spec:
  cluster: {backend: kind}
  driver: {kind: external, name: test-driver.cdi.k8s.io, deviceClass: draguard-test-driver}
  nodes:
    - name: w1
  workloads:
    - name: llm
      replicas: 1
      claims:
        - name: gpus
          requests: [{name: gpu, deviceClassName: draguard-test-driver, count: 1}]
  timeline:
    - name: down
      at: 1s
      fault: driver-down
      target: {node: w1}
      params: {duration: 5s}
    - name: lost
      at: 2s
      fault: node-loss
      target: {node: w1}
      params: {duration: 5s}
"""


def test_driver_and_node_chaos_validate_on_kind_and_are_refused_on_kubeconfig_with_the_reason() -> None:
    sc = parse_scenario(SCENARIO, "s.yaml")
    assert sc.cluster.backend == "kind" and sc.cluster.kind_cluster == "default"
    problems, _ = problems_of(SCENARIO.replace("backend: kind", "backend: kubeconfig"), "s.yaml")
    text = [str(p) for p in problems]
    assert any(p.startswith("s.yaml:18:14: spec.timeline[0].fault: fault 'driver-down' cannot run here: it needs "
                            "stop-driver") for p in text), text
    assert any(p.startswith("s.yaml:23:14: spec.timeline[1].fault: fault 'node-loss' cannot run here: it needs "
                            "kill-node, but spec.cluster.backend is kubeconfig") for p in text), text
    named = SCENARIO.replace("backend: kind", "backend: kubeconfig").replace(
        "deviceClass: draguard-test-driver}", "deviceClass: draguard-test-driver,\n           daemonSet: {namespace: ns, name: drv}}")
    problems, _ = problems_of(named, "s.yaml")
    assert [str(p) for p in problems if "driver-down" in str(p)] == []
    assert parse_scenario(named.replace("\n    - name: lost\n      at: 2s\n      fault: node-loss\n      target: {node: w1}\n"
                                        "      params: {duration: 5s}\n", "\n"), "s.yaml").driver.daemon_set == ("ns", "drv")


def test_backend_kind_refuses_the_fake_driver_and_a_daemonset_of_the_fake_driver() -> None:
    fake = SCENARIO.replace("  driver: {kind: external, name: test-driver.cdi.k8s.io, deviceClass: draguard-test-driver}\n", "")
    problems, _ = problems_of(fake, "s.yaml")
    assert any("spec.cluster.backend: backend kind runs a driver installed in the kind cluster" in str(p) for p in problems), problems
    local = SCENARIO.replace("backend: kind", "backend: local").replace(
        "deviceClass: draguard-test-driver}", "deviceClass: draguard-test-driver, daemonSet: {namespace: a, name: b}}")
    problems, _ = problems_of(local, "s.yaml")
    assert any("'daemonSet' names a driver installed in a cluster" in str(p) for p in problems), problems


def _facts(daemonset: str | None, kind: bool) -> ClusterFacts:
    devices = {"w1": tuple(f"d{i}" for i in range(8)), "w2": tuple(f"d{i}" for i in range(8))}
    return ClusterFacts(devices, frozenset(), {"w1": frozenset(), "w2": frozenset()}, False, daemonset, kind)


@pytest.mark.parametrize("name, needs", [("driver-restart-mid-gang", "restart-driver"), ("node-loss-returns", "kill-node")])
def test_a_library_scenario_with_driver_or_node_chaos_applies_where_the_cluster_offers_it(name: str, needs: str) -> None:
    from pathlib import Path

    from draguard.harness.scenario.loader import load_scenario

    sc = load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / f"{name}.yaml")
    target = RunTarget("test-driver.cdi.k8s.io", "cls", allow_destructive=True)
    without, _ = decide(sc, target, _facts(None, False))
    assert any(needs in r or ("restart" in r if needs == "restart-driver" else "node" in r) for r in without), without
    offered = _facts("ns/drv", True)
    assert needs in offered.offers()
    with_it, _ = decide(sc, target, offered)
    assert not [r for r in with_it if "DaemonSet" in r or "its own nodes" in r], with_it


def test_a_destructive_step_on_a_cluster_draguard_did_not_bring_up_needs_allow_context(tmp_path: Any) -> None:
    from draguard.harness.campaign.retarget import refuse_destructive
    from draguard.harness.cluster.target import KubeTarget
    from draguard.harness.core.errors import UsageError

    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\ncurrent-context: prod\nclusters: [{name: c, cluster: {server: "
                      "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: prod, context: "
                      "{cluster: c, user: u}}]\n")
    text = SCENARIO.replace("backend: kind", "backend: kubeconfig").replace(
        "deviceClass: draguard-test-driver}", "deviceClass: draguard-test-driver, daemonSet: {namespace: ns, name: drv}}")
    text = text.replace("    - name: lost\n      at: 2s\n      fault: node-loss\n      target: {node: w1}\n"
                        "      params: {duration: 5s}\n", "")
    sc = parse_scenario(text, "s.yaml")
    with pytest.raises(UsageError) as refused:
        refuse_destructive([sc], KubeTarget(config))
    assert "refusing to disturb context 'prod'" in str(refused.value)
    assert "step down (driver-down) patches the installed driver's DaemonSet" in str(refused.value)
    assert "--allow-context prod" in str(refused.value)
    with pytest.raises(UsageError):
        refuse_destructive([sc], KubeTarget(config, allow_context="staging"))
    refuse_destructive([sc], KubeTarget(config, allow_context="prod"))  # allowed: nothing raised


def test_a_dry_run_names_the_blast_radius_of_each_step() -> None:
    """--dry-run lists what each step may touch: the node(s), the run's pods, an installed driver's pods."""
    from draguard.harness.campaign.dry_run import plan_of

    sc = parse_scenario(SCENARIO, "s.yaml")
    plan = plan_of(sc, driver_pods={"w1": ("drivers/drv-abc",), "w2": ("drivers/drv-def",)}, backend="kind")
    assert plan.backend == "kind"
    down, lost = plan.steps
    assert down.touches == ("node w1", "the driver's pod(s) drivers/drv-abc")
    assert lost.touches == ("node w1",)  # a node loss touches no driver pod itself
    member = parse_scenario(SCENARIO.replace("      target: {node: w1}\n      params: {duration: 5s}\n    - name: lost",
                                             "      target: {workload: llm, member: random}\n      params: {duration: 5s}\n"
                                             "    - name: lost"), "s.yaml")
    (down, _) = plan_of(member, driver_pods={"w1": ("drivers/drv-abc",)}).steps
    assert down.touches == ("the node of one of llm-0, among w1", "one of the run's pods llm-0 (in the run's namespace)",
                            "the driver's pod(s) drivers/drv-abc")
