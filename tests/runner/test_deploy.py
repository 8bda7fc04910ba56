"""The objects a scenario becomes, checked without a cluster."""

from __future__ import annotations

import draguard.chaos  # noqa: F401
from draguard.harness.runner import deploy
from draguard.harness.scenario.loader import parse_scenario

SCENARIO = """
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {name: shapes}
spec:
  cluster: {featureGates: {GenericWorkload: true}}
  nodes: [{name: n0, topology: {gpus: 8}}]
  deviceClasses: [{name: gpu.draguard.dev, selectors: ["device.driver == 'gpu.draguard.dev'"]}]
  workloads:
    - name: a
      replicas: 2
      gang: podgroup
      priority: 100
      claims:
        - name: gpus
          requests: [{name: gpu, deviceClassName: gpu.draguard.dev, count: 2, selectors: ["device.attributes['gpu.draguard.dev'].index >= 0"]}]
          constraints: [{matchAttribute: gpu.draguard.dev/nvlinkDomain}]
    - name: b
      replicas: 3
      interleaveWith: a
      claims:
        - name: shared
          source: shared
          sharing: {strategy: MPS}
          requests: [{name: gpu, deviceClassName: gpu.draguard.dev, allocationMode: All}]
"""


def _scenario():  # type: ignore[no-untyped-def]
    return parse_scenario(SCENARIO, "shapes.yaml")


def test_pods_are_created_interleaved_where_the_scenario_says() -> None:
    order = [f"{w.name}-{i}" for w, i in deploy.creation_order(_scenario())]
    assert order == ["a-0", "b-0", "a-1", "b-1", "b-2"]


def test_a_template_claim_becomes_a_resource_claim_template_with_constraints() -> None:
    sc = _scenario()
    (tmpl,) = deploy.claim_objects(sc.workload("a"), "ns", "run1")
    assert tmpl["kind"] == "ResourceClaimTemplate"
    assert tmpl["metadata"]["labels"]["draguard.dev/run"] == "run1"
    devices = tmpl["spec"]["spec"]["devices"]
    assert devices["requests"][0]["exactly"]["count"] == 2
    assert devices["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"].startswith("device.attributes")
    assert devices["constraints"] == [{"matchAttribute": "gpu.draguard.dev/nvlinkDomain"}]


def test_a_shared_claim_with_sharing_carries_the_strategy_as_opaque_config() -> None:
    sc = _scenario()
    (claim,) = deploy.claim_objects(sc.workload("b"), "ns", "run1")
    assert claim["kind"] == "ResourceClaim"
    exact = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert exact["allocationMode"] == "All" and "count" not in exact
    assert claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"] == {"strategy": "MPS"}


def test_gang_pods_name_their_pod_group_and_priority_class() -> None:
    sc = _scenario()
    pod = deploy.pod(sc.workload("a"), 1, "ns", "run1", sc.name)
    assert pod["metadata"]["name"] == "a-1"
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "a"}
    assert pod["spec"]["priorityClassName"] == deploy.priority_class_name("run1", 100)
    assert pod["spec"]["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "a-gpus"}]
    group = deploy.pod_group(sc.workload("a"), "ns", "run1")
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    shared = deploy.pod(sc.workload("b"), 0, "ns", "run1", sc.name)
    assert shared["spec"]["resourceClaims"] == [{"name": "shared", "resourceClaimName": "b-shared"}]
    assert "schedulingGroup" not in shared["spec"]
