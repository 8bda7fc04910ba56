"""DRA device selectors compile, type-check and evaluate as the API server and scheduler do."""

from __future__ import annotations

from fractions import Fraction

import pytest

from draguard.harness.cel import (
    CelError,
    CelEvaluationError,
    compile_selector,
    format_quantity,
    parse_quantity,
    parse_semver,
)
from draguard.harness.core.errors import UsageError

DRIVER = "gpu.draguard.dev"
H100 = {
    "name": "gpu-0",
    "attributes": {
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "index": {"int": 0},
        "type": {"string": "gpu"},
        "nvlinkDomain": {"string": "nvl-0"},
        "healthy": {"bool": True},
        "driverVersion": {"version": "580.126.20"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:10"},
    },
    "capacity": {"memory": {"value": "80Gi"}},
}

D = f'device.attributes["{DRIVER}"]'
C = f'device.capacity["{DRIVER}"]'


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f'device.driver == "{DRIVER}"', True),
        ('device.driver == "gpu.nvidia.com"', False),
        (f"{D}.index == 0 && {D}.type == 'gpu'", True),
        (f"{D}.healthy", True),
        (f'{D}.productName.startsWith("NVIDIA H100")', True),
        ('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:10"', True),
        (f'{C}.memory.compareTo(quantity("40Gi")) >= 0', True),
        (f'{C}.memory.compareTo(quantity("81920Mi")) == 0', True),
        (f'{C}.memory.isGreaterThan(quantity("80Gi"))', False),
        (f'{C}.memory.isLessThan(quantity("0.1Ti"))', True),
        (f'{C}.memory.add(quantity("1Gi")).asInteger() == 81 * 1024 * 1024 * 1024', True),
        (f'{D}.driverVersion.compareTo(semver("580.0.0")) > 0', True),
        (f'{D}.driverVersion.isLessThan(semver("1.0.0"))', False),
        (f"{D}.driverVersion.major() == 580", True),
        (f'cel.bind(g, {D}, g.nvlinkDomain == "nvl-0" && g.index < 4)', True),
        (f'{D}.?model.orValue("none") == "none"', True),
        (f"has({D}.model)", False),
        ('has(device.attributes["other.example.com"].model)', False),  # an unknown domain is an empty map
        ("device.allowMultipleAllocations", False),
        (f'device.driver in ["a.example.com", "{DRIVER}"]', True),
        ('isQuantity("1.5Gi") && !isQuantity("lots")', True),
    ],
)
def test_a_selector_evaluates_like_the_scheduler(expression: str, expected: bool) -> None:
    assert compile_selector(expression).evaluate(H100, DRIVER) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("device.driver ==", "Syntax error"),
        ('device.driver == "x" &&', "Syntax error"),
        (f'{C}.memory >= quantity("40Gi")', "no matching overload for '_>=_'"),
        (f"{C}.memory > 5", "no matching overload for '_>_'"),
        ("device.driver == 1", "no matching overload for '_==_'"),
        ("device.foo == 1", "undeclared reference to 'device.foo'"),
        ("gpu.index == 1", "undeclared reference"),
        ("device.driver", "must evaluate to bool, not string"),
        ("", "empty"),
    ],
)
def test_an_invalid_selector_is_rejected_at_compile_time(expression: str, message: str) -> None:
    with pytest.raises(CelError, match=message) as info:
        compile_selector(expression)
    assert isinstance(info.value, UsageError)
    assert "\n" not in str(info.value)


def test_a_compile_error_names_its_position_in_the_expression() -> None:
    with pytest.raises(CelError) as info:
        compile_selector('device.driver == "x" &&')
    assert (info.value.line, info.value.column) == (1, 24)


@pytest.mark.parametrize(
    "expression",
    [
        f"{D}.model == 'x'",  # a missing attribute is an error, not a mismatch
        'device.attributes["other.example.com"].model == "x"',
        f"{D}.productName",  # a string attribute: not a bool at run time
    ],
)
def test_a_selector_that_fails_on_a_device_raises(expression: str) -> None:
    with pytest.raises(CelEvaluationError):
        compile_selector(expression).evaluate(H100, DRIVER)


def test_bare_attribute_names_belong_to_the_evaluating_driver() -> None:
    selector = compile_selector('device.attributes["gpu.nvidia.com"].index == 0')
    assert selector.evaluate(H100, "gpu.nvidia.com") is True
    with pytest.raises(CelEvaluationError):
        selector.evaluate(H100, DRIVER)


def test_a_bad_version_attribute_fails_evaluation() -> None:
    device = {"attributes": {"driverVersion": {"version": "5.8"}}}
    with pytest.raises(CelEvaluationError, match="driverVersion"):
        compile_selector(f'device.driver == "{DRIVER}"').evaluate(device, DRIVER)


def test_attribute_refs_list_what_the_text_reads() -> None:
    selector = compile_selector(
        f'cel.bind(g, {D}, g.productName.startsWith("NVIDIA") && g["index"] < 4) && '
        f'device.attributes["resource.kubernetes.io"].?numaNode.orValue(0) == 0 && '
        f'{C}.memory.compareTo(quantity("1Gi")) > 0 && {D}.exists(k, k == "x") && device.driver == "{DRIVER}"'
    )
    assert selector.attribute_refs == {
        (DRIVER, "productName"),
        (DRIVER, "index"),
        ("resource.kubernetes.io", "numaNode"),
    }
    assert selector.capacity_refs == {(DRIVER, "memory")}
    assert selector.drivers == {DRIVER}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80Gi", Fraction(80 * 2**30)),
        ("1Ki", Fraction(1024)),
        ("100m", Fraction(1, 10)),
        ("1.5", Fraction(3, 2)),
        ("5k", Fraction(5000)),
        ("2M", Fraction(2_000_000)),
        ("2e3", Fraction(2000)),
        ("1E", Fraction(10**18)),
        ("250n", Fraction(250, 10**9)),
        ("-3", Fraction(-3)),
        (".5Mi", Fraction(2**19)),
    ],
)
def test_kubernetes_quantities_parse_exactly(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "1GB", "1 Gi", "1.2.3", "ten"])
def test_malformed_quantities_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_quantities_format_canonically() -> None:
    assert [format_quantity(parse_quantity(t)) for t in ("1Ki", "100m", "1.5", "1n")] == ["1024", "100m", "1500m", "1n"]


def test_semantic_versions_order_by_precedence() -> None:
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta", "1.0.0-rc.1", "1.0.0", "1.2.0", "10.0.0"]
    versions = [parse_semver(v) for v in ordered]
    assert all(a.compare(b) < 0 for a, b in zip(versions, versions[1:]))
    assert parse_semver("1.0.0+build.5").compare(parse_semver("1.0.0")) == 0
    with pytest.raises(ValueError):
        parse_semver("1.0")
