"""Which library scenarios apply to an installed driver, and why the others do not (``draguard run --driver``).

Table-driven over the real files in scenarios/: every file must be listed here, so a new scenario is
classified on purpose. The driver is modelled on the upstream DRA test driver as the end-to-end test
runs it: two nodes with four devices each, no attributes, no PodGroup API."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import draguard.chaos  # noqa: F401  (registers the fault kinds)
from draguard.harness.runner import deploy
from draguard.harness.campaign.retarget import (
    NOT_JUDGED,
    coverage,
    ClusterFacts,
    RunTarget,
    decide,
    not_applicable_result,
    pinned_nodes,
    retarget,
)
from draguard.harness.result import RunResult
from draguard.harness.scenario.loader import load_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"
DRIVER = "test-driver.cdi.k8s.io"
FOUR = tuple(f"device-0{i}" for i in range(4))
FACTS = ClusterFacts({"n0": FOUR, "n1": FOUR}, frozenset(), {"n0": frozenset({"cpu"}), "n1": frozenset({"cpu"})}, False)
TARGET = RunTarget(DRIVER, "test-class", allow_destructive=True)

FAKE_FAULT = "is a fault of draguard's fake driver"
NO_DAEMONSET = ("restarts the driver, which draguard does through the driver's DaemonSet or a --restart-command; none "
                "runs this driver (no DaemonSet mounts its plugin directory) and no --restart-command was given")
NO_STOP = ("keeps the driver down for a while, which draguard does through the driver's DaemonSet; none runs this "
           "driver (no DaemonSet mounts its plugin directory)")
NOT_OURS = "restarts or loses a node, which draguard does only to its own nodes"
MUTANT = "it runs the fake driver's mutant"
NO_RPC_FAULTS = ("makes the driver's calls fail, which needs the gRPC interposer in front of its sockets, which are "
                 "on the cluster's nodes")
ATTRIBUTE = f"which driver {DRIVER} does not publish; driver {DRIVER} publishes no attributes"
APPLICABLE = None

CASES: dict[str, tuple[str | None, ...]] = {
    # generic steps (preempt) and plain requests: they run on any driver
    "cdi-devices-correct-driver": (APPLICABLE,),
    "preempt-gang-member": (APPLICABLE,),
    # the fake driver's faults
    "crash-during-prepare-force-delete": ("step 0-driver-crash (driver-crash) " + FAKE_FAULT,),
    "device-failure-correct-driver": ("step fail (device-failure) " + FAKE_FAULT,),
    "node-reboot-correct-driver": ("step reboot (node-reboot) " + FAKE_FAULT,),
    "node-reboot-cdi-not-recreated": (MUTANT + " 'cdi-not-recreated'", "step reboot (node-reboot) " + FAKE_FAULT),
    "checkpoint-corrupt-correct-driver": ("step corrupt (checkpoint-corrupt) " + FAKE_FAULT,
                                          "it needs 1 node(s) with exactly 2 device(s) each"),
    "checkpoint-corrupt-discarded": (MUTANT + " 'discard-corrupt-checkpoint'",
                                     "step corrupt (checkpoint-corrupt) " + FAKE_FAULT),
    "driver-rolling-update-correct-driver": ("step update (driver-rolling-update) " + FAKE_FAULT,),
    "driver-rolling-update-ignores-claims": (MUTANT + " 'ignore-predecessor-claims'",
                                             "step update (driver-rolling-update) " + FAKE_FAULT),
    "gpu-faults-correct-driver": ("step off-bus (device-failure) " + FAKE_FAULT,),
    "gpu-faults-silent-health": (MUTANT + " 'silent-health'", "step off-bus (device-failure) " + FAKE_FAULT),
    "driver-crash-before-prepare-reply": ("step 0-driver-crash (driver-crash) " + FAKE_FAULT,),
    "driver-down-until-cleanup": ("step 0-driver-down (driver-down) " + NO_STOP,),
    "driver-restart-mid-gang": ("step 0-driver-restart (driver-restart) " + NO_DAEMONSET,),
    "driver-restart-under-churn": ("step restart-drivers (driver-restart) " + NO_DAEMONSET,
                                   "it needs 2 node(s) with at least 8 device(s) each; devices per node: n0: 4, n1: 4"),
    "drain-node-unprepare-failure": ("step 0-unprepare-failure (unprepare-failure) " + NO_RPC_FAULTS,),
    "evict-before-prepare-succeeded": ("step 0-prepare-failure (prepare-failure) " + NO_RPC_FAULTS,),
    "evict-during-prepare": ("step 0-prepare-hang (prepare-hang) " + NO_RPC_FAULTS,),
    "force-delete-driver-down": ("step down (driver-down) " + NO_STOP,),
    "reset-failure-correct-driver": ("step 0-reset-failure (reset-failure) " + FAKE_FAULT,),
    "slow-reset-does-not-block-prepare": ("step slow (reset-slow) " + FAKE_FAULT,),
    "failing-claim-does-not-strand-batch": ("step reset-fails (reset-failure) " + FAKE_FAULT,
                                            "claim old/healthy selects by the fake driver's attribute(s) index"),
    "unprepare-failure-handoff-correct-driver": (
        "step 0-unprepare-failure (unprepare-failure) " + NO_RPC_FAULTS,
        "it needs 1 node(s) with exactly 2 device(s) each (its workloads ask for 4 against 2 in its topology"),
    # mutants (and what only the device truth shows)
    "double-allocation-handoff": (MUTANT + " 'double-allocation'",
                                  "it expects no-double-allocation violated, which on an installed driver is judged "
                                  "from the API's allocations only"),
    "device-failure-silent-health": (MUTANT + " 'silent-health'", "it expects container-devices violated",
                                     "its expected evidence names the fake device gpu-0"),
    "incomplete-cdi-spec": (MUTANT + " 'incomplete-cdi'", "it expects container-devices violated, which needs the "
                            "fake node's device truth"),
    "mps-state-left-behind": (MUTANT + " 'leave-sharing-state'",),
    "reset-leak-forget-before-reset": (MUTANT + " 'forget-before-reset'",
                                       "step 0-reset-failure (reset-failure) " + FAKE_FAULT),
    # RPC faults through the interposer: the installed driver's sockets are on its nodes
    "interposed-prepare-failure": ("it puts the gRPC interposer in front of the driver's sockets",),
    # node and control-plane faults draguard cannot perform on a cluster it did not start
    "node-agent-restart": ("step 0-node-restart (node-restart) " + NOT_OURS,),
    "node-loss-returns": ("step 0-node-loss (node-loss) " + NOT_OURS,),
    "stale-prepare-after-node-restart": ("step 2-node-restart (node-restart) " + NOT_OURS,
                                         "step 3-scheduler-restart (scheduler-restart) restarts a control-plane component"),
    "control-plane-restarts": ("step 0-scheduler-restart (scheduler-restart) restarts a control-plane component; "
                               "draguard restarts only a control plane it started itself",
                               "workload gang-a is a PodGroup gang; the cluster does not serve"),
    # attributes of the fake driver in selectors, constraints and classes
    "gang-deadlock-per-pod": ("claim gang-a/gpus constrains matchAttribute gpu.draguard.dev/nvlinkDomain, " + ATTRIBUTE,),
    "gang-deadlock-gang-scheduling": ("constrains matchAttribute gpu.draguard.dev/nvlinkDomain, " + ATTRIBUTE,),
    "device-taint-nvlink-claim": ("constrains matchAttribute gpu.draguard.dev/nvlinkDomain",
                                  "it needs 1 node(s) with at least 8 device(s) each"),
    "prepare-failure-retry": ("constrains matchAttribute gpu.draguard.dev/numaNode",),
    "mig-partitions-with-full-gpus": ("its DeviceClass mig.draguard.dev selects devices by the fake driver's attributes",
                                      "claim inference/slice selects by the fake driver's attribute(s) profile"),
    # the fake driver's opaque configuration
    "mps-shared-claim-correct-driver": ("claim ranks/shared-gpus names sharing strategy MPS as the fake driver's "
                                        "opaque configuration",),
    "shared-claim-gang": ("names sharing strategy TimeSlicing as the fake driver's opaque configuration",),
    "gang-shared-claim-podgroup": ("names sharing strategy TimeSlicing as the fake driver's opaque configuration",
                                   "workload ranks is a PodGroup gang; the cluster does not serve"),
    # violations only the parts left out (device truth) may show
    "shared-claim-no-strategy": ("it expects sharing-explicit violated, which on an installed driver is judged from "
                                 "the API only",),
    # what the cluster's nodes lack
    "legacy-extended-resource-mix": ("it needs 1 node(s) with at least 2 device(s) each and allocatable nvidia.com/gpu",),
}


def test_every_library_scenario_is_classified() -> None:
    assert {p.stem for p in LIBRARY.glob("*.yaml")} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_applicability_of_each_library_scenario(name: str) -> None:
    sc = load_scenario(LIBRARY / f"{name}.yaml")
    reasons, plan = decide(sc, TARGET, FACTS)
    expected = CASES[name]
    if expected == (APPLICABLE,):
        assert reasons == [] and plan is not None, reasons
        return
    assert plan is None
    text = "; ".join(reasons)
    for fragment in expected:
        assert fragment is not None and fragment in text, (fragment, reasons)


def test_destructive_steps_need_the_context_allowed() -> None:
    sc = load_scenario(LIBRARY / "preempt-gang-member.yaml")
    drain = dataclasses.replace(sc.timeline[0], fault="drain-node", params=None)
    sc = dataclasses.replace(sc, timeline=(drain,))
    refused, plan = decide(sc, RunTarget(DRIVER, "c", allow_destructive=False, context="prod"), FACTS)
    assert plan is None
    assert refused == [f"step {drain.name} (drain-node) cordons a node and evicts pods from it of a cluster draguard "
                       "does not own; pass --allow-context prod to allow it"]
    assert decide(sc, TARGET, FACTS)[0] == []


def test_contention_asks_for_exactly_as_many_devices() -> None:
    """preempt-gang-member's gangs ask for more GPUs than its nodes have: nodes with more would change its story."""
    sc = load_scenario(LIBRARY / "preempt-gang-member.yaml")
    eight = ClusterFacts({"a": FOUR * 2, "b": FOUR * 2, "c": FOUR}, frozenset(), {}, False)
    reasons, _ = decide(sc, TARGET, eight)
    assert reasons == ["it needs 2 node(s) with exactly 4 device(s) each (its workloads ask for 10 against 8 in its "
                       "topology: its expectations count on that contention); devices per node: a: 8, b: 8, c: 4"]
    # A scenario without contention takes a bigger node.
    small = load_scenario(LIBRARY / "cdi-devices-correct-driver.yaml")
    _, plan = decide(small, TARGET, eight)
    assert plan is not None and dict(plan.nodes) == {"gpu-node-0": "a"} and not plan.exact


def test_an_attribute_the_driver_publishes_under_its_own_name_is_used() -> None:
    """A constraint on an attribute the installed driver publishes stays; one of the fake driver's does not map."""
    sc = load_scenario(LIBRARY / "gang-deadlock-per-pod.yaml")
    published = dataclasses.replace(FACTS, attributes=frozenset({f"{DRIVER}/nvlinkDomain"}))
    reasons, _ = decide(sc, TARGET, published)
    assert any(f"driver {DRIVER} publishes {DRIVER}/nvlinkDomain (an attribute of the fake driver is mapped to none"
               in r for r in reasons), reasons


def test_retargeted_scenario_asks_the_installed_class_on_the_cluster_nodes() -> None:
    sc = load_scenario(LIBRARY / "preempt-gang-member.yaml")
    _, plan = decide(sc, TARGET, FACTS)
    assert plan is not None
    new = retarget(sc, TARGET, plan)
    assert new.driver.kind == "external" and new.driver.name == DRIVER and new.driver.device_class == "test-class"
    assert new.device_classes == ()
    assert [n.name for n in new.nodes] == ["n0", "n1"] and all(n.topology is None for n in new.nodes)
    assert {r.device_class_name for w in new.workloads for c in w.claims for r in c.requests} == {"test-class"}
    assert not set(NOT_JUDGED) & set(new.expect.hold)  # FACTS' nodes report no real container runtime
    # On nodes with a real runtime container-devices is judged from what it reports: it stays in hold.
    _, real = decide(sc, TARGET, dataclasses.replace(FACTS, runtimes=frozenset({"n0", "n1"})))
    assert real is not None and real.real_nodes
    assert "container-devices" in retarget(sc, TARGET, real).expect.hold and not coverage(True, False)[1]
    assert new.expect.violate == sc.expect.violate
    pod = deploy.pod(new.workloads[0], 0, "ns", "run", new.name, pinned_nodes(new))
    term = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"] == [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n0", "n1"]}]
    assert pinned_nodes(sc) is None


def test_step_targets_and_evidence_name_the_mapped_node() -> None:
    sc = load_scenario(LIBRARY / "reset-leak-forget-before-reset.yaml")
    from draguard.harness.campaign.retarget import Plan

    new = retarget(sc, TARGET, Plan({"gpu-node-0": "n1"}, exact=False))
    assert [e.node for e in new.expect.evidence] == ["n1"]


def test_not_applicable_is_neither_pass_nor_failure() -> None:
    sc = load_scenario(LIBRARY / "driver-down-until-cleanup.yaml")
    na = not_applicable_result(sc, ["it needs what it needs"], TARGET)
    assert na.outcome == "not-applicable" and not na.ok and na.exit_code == 0
    assert na.as_dict()["ok"] is None and na.as_dict()["notApplicable"].endswith("it needs what it needs")
    only = RunResult("r", [na])
    assert only.exit_code == 2 and not only.ok  # nothing was run
    ran = not_applicable_result(sc, ["x"], TARGET)
    ran.not_applicable = None  # a run that met every expectation (no invariant expected, no step)
    both = RunResult("r", [na, ran])
    assert both.exit_code == 0 and both.ok
    back = RunResult.from_dict(both.as_dict())
    assert back.scenarios[0].not_applicable == na.not_applicable and back.exit_code == 0


def test_on_its_own_control_plane_node_and_control_plane_faults_apply() -> None:
    """--cluster local: draguard starts the nodes, the control plane and the driver's processes behind the
    gRPC interposer, so their faults and the interposer's are possible; the fake driver's are still not."""
    from draguard.harness.campaign.retarget import local_facts

    local = RunTarget(DRIVER, "test-class", allow_destructive=True, local=True)
    applicable = set()
    for path in sorted(LIBRARY.glob("*.yaml")):
        sc = load_scenario(path)
        reasons, plan = decide(sc, local, local_facts(sc))
        if plan is not None:
            applicable.add(sc.name)
            assert retarget(sc, local, plan).nodes == sc.nodes  # the scenario's own nodes, started by draguard
        else:
            assert reasons
    assert applicable == {"cdi-devices-correct-driver", "preempt-gang-member", "control-plane-restarts",
                          "node-agent-restart", "node-loss-returns", "stale-prepare-after-node-restart",
                          # the driver's processes restarted and stopped
                          "driver-down-until-cleanup", "driver-restart-mid-gang", "driver-restart-under-churn",
                          "force-delete-driver-down",
                          # RPC faults at the interposer
                          "drain-node-unprepare-failure", "evict-before-prepare-succeeded", "evict-during-prepare",
                          "interposed-prepare-failure", "unprepare-failure-handoff-correct-driver"}
    sc = load_scenario(LIBRARY / "evict-during-prepare.yaml")
    _, plan = decide(sc, local, local_facts(sc))
    assert plan is not None and retarget(sc, local, plan).driver.interpose is True
    facts = local_facts(load_scenario(LIBRARY / "preempt-gang-member.yaml"))
    assert {n: len(d) for n, d in facts.devices.items()} == {"gpu-node-0": 4, "gpu-node-1": 4}


def test_what_names_the_fake_drivers_devices_classes_or_load_is_not_applicable() -> None:
    from draguard.chaos.load import LoadParams

    sc = load_scenario(LIBRARY / "preempt-gang-member.yaml")
    step = sc.timeline[0]
    taint = dataclasses.replace(step, fault="device-taint", params=None,
                                target=dataclasses.replace(step.target, device="gpu-3", node="gpu-node-0"))
    load = dataclasses.replace(step, name="churn", fault="load", target=None,
                               params=LoadParams.model_validate({"deviceClass": "gpu.draguard.dev", "sharing": "MPS"}))
    cls = dataclasses.replace(sc.device_classes[0], extended_resource_name="example.com/gpu")
    reasons, plan = decide(dataclasses.replace(sc, timeline=(taint, load), device_classes=(cls,)), TARGET, FACTS)
    assert plan is None
    assert f"step {taint.name} (device-taint) targets the fake device gpu-3" in reasons
    assert any(r.startswith("step churn (load) names device class gpu.draguard.dev of the fake driver") for r in reasons)
    assert any(r.startswith("step churn (load) names sharing MPS of the fake driver") for r in reasons)
    assert any("serves extended resource example.com/gpu" in r for r in reasons)


def test_a_retargeted_scenario_keeps_what_it_ignores_and_why() -> None:
    """force-delete-driver-down removes a gang member on purpose and ignores gang-atomic with a reason;
    retargeted, it must not fail on that violation (it did: retarget dropped expect.ignore)."""
    sc = load_scenario(LIBRARY / "force-delete-driver-down.yaml")
    reasons, plan = decide(sc, TARGET, dataclasses.replace(FACTS, daemonset="ns/driver"))
    assert plan is not None, reasons
    out = retarget(sc, TARGET, plan)
    assert out.expect.ignored == sc.expect.ignored and "gang-atomic" in out.expect.ignored
    assert out.expect.violate == sc.expect.violate and out.expect.progress == sc.expect.progress
