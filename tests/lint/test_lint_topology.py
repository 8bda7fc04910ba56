"""The topology rules' messages: what a per-device selector cannot do, and the constraint that would.

The examples (examples/topology-by-selector, examples/multi-device-topology) pin which rule fires
where; these tests pin what the messages say and the exit codes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.conformance.lint import Severity, lint
from draguard.conformance.lint.knowledge import knowledge

EXAMPLES = Path(__file__).with_name("examples")
SELECTOR = EXAMPLES / "topology-by-selector"
NEITHER = EXAMPLES / "multi-device-topology" / "bad.yaml"


def _claim(selector: str, class_name: str = "gpu.draguard.dev", constraint: str = "") -> str:
    return (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\nspec:\n  spec:\n"
        f"    devices:\n      requests:\n      - name: gpus\n        exactly:\n          deviceClassName: {class_name}\n"
        f"          count: 4\n          selectors:\n          - cel: {{expression: '{selector}'}}\n{constraint}"
    )


def test_a_topology_selector_alone_is_a_warning_that_names_the_binding_constraint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = lint([SELECTOR / "bad.yaml"])
    (finding,) = report.findings
    assert (finding.rule, finding.severity) == ("topology-by-selector", Severity.WARNING)
    assert "reads gpu.draguard.dev/nvlinkBandwidth as the topology statement" in finding.message
    assert "a selector judges each device alone: it does not make the devices share a domain" in finding.message
    assert "`constraints: [{requests: [gpus], matchAttribute: gpu.draguard.dev/nvlinkDomain}]` would" in finding.message
    assert main(["lint", str(SELECTOR / "bad.yaml")]) == 0  # a warning: the guardrail's pattern is accepted
    capsys.readouterr()


def test_neither_selector_nor_constraint_stays_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    (finding,) = lint([NEITHER]).findings
    assert (finding.rule, finding.severity) == ("multi-device-topology", Severity.ERROR)
    assert main(["lint", str(NEITHER)]) == 1
    capsys.readouterr()


def test_a_selector_on_a_non_topology_attribute_is_no_topology_statement(tmp_path: Path) -> None:
    path = tmp_path / "claim.yaml"
    path.write_text(_claim('device.attributes["gpu.draguard.dev"].productName == "H100"'))
    assert [f.rule for f in lint([path]).findings] == ["unknown-device-class", "multi-device-topology"]


@pytest.mark.parametrize(
    ("selector", "class_name", "attribute", "note"),
    [
        # the selector reads a domain id: match on that very attribute
        ('device.attributes["resource.kubernetes.io"].pcieRoot != ""', "gpu.nvidia.com",
         "resource.kubernetes.io/pcieRoot", ""),
        # NVIDIA's driver publishes no NVLink domain attribute: the shared domain it does publish
        ('device.attributes["gpu.nvidia.com"].nvlinkBandwidthGbps >= 900', "gpu.nvidia.com",
         "resource.kubernetes.io/pcieRoot", "gpu.nvidia.com publishes no NVLink domain attribute"),
        # a NUMA word: the driver's NUMA attribute
        ('device.attributes["gpu.draguard.dev"].numaDistance < 2', "gpu.draguard.dev",
         "gpu.draguard.dev/numaNode", "published by gpu.draguard.dev"),
        # a mesh word: any domain attribute the driver publishes
        ('device.attributes["gpu.draguard.dev"].meshRing == 1', "gpu.draguard.dev",
         "gpu.draguard.dev/nvlinkDomain", "published by gpu.draguard.dev"),
        # a driver with no domain attribute: no attribute is made up
        ('device.attributes["tpu.google.com"].meshShape == "2x2"', "tpu.google.com",
         "tpu.google.com/<domain attribute>", "tpu.google.com publishes no domain attribute known to draguard"),
        # an unknown class: the standard attribute, if the driver publishes it
        ('device.attributes["acme.com"].interconnect == "ib"', "acme-gpu",
         "resource.kubernetes.io/pcieRoot", "if the class's driver publishes it"),
    ],
)
def test_the_suggested_match_attribute_follows_what_the_driver_publishes(
    tmp_path: Path, selector: str, class_name: str, attribute: str, note: str
) -> None:
    path = tmp_path / "claim.yaml"
    path.write_text(_claim(selector, class_name))
    (finding,) = [f for f in lint([path]).findings if f.rule == "topology-by-selector"]
    assert f"matchAttribute: {attribute}}}]` would" in finding.message
    assert note in finding.message


def test_a_match_attribute_constraint_silences_both_rules(tmp_path: Path) -> None:
    path = tmp_path / "claim.yaml"
    path.write_text(
        _claim(
            'device.attributes["gpu.draguard.dev"].numaNode >= 0',
            constraint="      constraints:\n      - {requests: [gpus], matchAttribute: gpu.draguard.dev/nvlinkDomain}\n",
        )
    )
    assert [f.rule for f in lint([path]).findings] == ["unknown-device-class"]


def test_cel_attribute_lists_what_the_driver_publishes() -> None:
    (finding,) = [f for f in lint([EXAMPLES / "cel-attribute" / "bad.yaml"]).findings]
    info = knowledge().drivers["gpu.draguard.dev"]
    assert finding.rule == "cel-attribute"
    assert f"gpu.draguard.dev devices publish the attributes {info.published()}" in finding.message
    for name in ("nvlinkDomain", "numaNode", "uuid"):
        assert name in info.published()
    assert "resource.kubernetes.io/{pciBusID, pcieRoot}" in info.published()


def test_cel_attribute_lists_what_devices_of_the_picked_type_publish(tmp_path: Path) -> None:
    """NVIDIA's driver publishes full GPUs, MIG devices and VFIO devices with different attributes: the
    message lists those of the type the class or the selector picks, so the fix is one look away."""
    path = tmp_path / "mig.yaml"
    path.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: slice}\nspec:\n  spec:\n"
        "    devices:\n      requests:\n        - name: mig\n          exactly:\n"
        "            deviceClassName: mig.nvidia.com\n            selectors:\n"
        "              - cel: {expression: 'device.attributes[\"gpu.nvidia.com\"].clockMHz > 1000'}\n"
    )
    [finding] = [f for f in lint([path]).findings if f.rule == "cel-attribute"]
    info = knowledge().drivers["gpu.nvidia.com"]
    assert f"gpu.nvidia.com mig devices publish the attributes {info.published('mig')}" in finding.message
    assert "parentUUID" in info.published("mig") and "deviceID" not in info.published("mig")
    assert "deviceID" in info.published("vfio") and "profile" not in info.published("gpu")
    assert "deviceID" in info.published(), "without a type: every attribute the driver publishes"
