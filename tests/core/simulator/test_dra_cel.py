from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pytest
from clusterscaler.model.dra import Version
from clusterscaler.simulator.dra_cel import (
    MAX_EXPRESSION_LENGTH,
    CompiledSelector,
    SelectorError,
    compile_cache_info,
    compile_selector,
)

GI = 1 << 30
DRIVER = "gpu.example.com"
ATTRIBUTES = {
    "gpu.example.com/model": "a100",
    "gpu.example.com/driverVersion": Version("1.2.3"),
    "gpu.example.com/count": 4,
    "dra.net/rdma": True,
    "dra.net/ifName": "eth1",
}
CAPACITY = {"gpu.example.com/memory": Fraction(40 * GI), "gpu.example.com/cores": Fraction(3, 2)}


@dataclass(frozen=True)
class CompileError:
    """compile_selector raises SelectorError with this in its reason."""

    reason: str


@dataclass(frozen=True)
class EvalError:
    """compile_selector succeeds and matches() raises SelectorError with this in its reason."""

    reason: str


Expected = bool | CompileError | EvalError

SELECTORS: list[tuple[str, str, Expected]] = [
    # The selectors of the DRA documentation and of drivers' DeviceClasses.
    ("driver", 'device.driver == "gpu.example.com"', True),
    ("driver-other", 'device.driver == "other.example.com"', False),
    ("string-attribute", 'device.attributes["gpu.example.com"].model == "a100"', True),
    ("string-attribute-false", 'device.attributes["gpu.example.com"].model == "h100"', False),
    ("startsWith", 'device.attributes["gpu.example.com"].model.startsWith("a1")', True),
    (
        "capacity-compareTo",
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
        True,
    ),
    (
        "capacity-compareTo-greater",
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) >= 0',
        False,
    ),
    (
        "capacity-isGreaterThan",
        'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("10Gi"))',
        True,
    ),
    (
        "version-isGreaterThan",
        'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.0.0"))',
        True,
    ),
    (
        "version-isLessThan",
        'device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("1.2.3-rc.1"))',
        False,
    ),
    (
        "in-and-int-attribute",
        '"gpu.example.com" in device.attributes && device.attributes["gpu.example.com"].count > 2',
        True,
    ),
    ("in-missing-domain", '"tpu.example.com" in device.attributes', False),
    ("has", 'has(device.attributes["gpu.example.com"].model)', True),
    ("has-missing-attribute", 'has(device.attributes["gpu.example.com"].uuid)', False),
    # Kubernetes reads a missing domain as an empty map.
    ("has-missing-domain", 'has(device.attributes["tpu.example.com"].model)', False),
    ("not-has-missing-domain", '!has(device.capacity["tpu.example.com"].memory)', True),
    ("bool-attribute", 'device.attributes["dra.net"].rdma', True),
    (
        "missing-domain",
        'device.attributes["tpu.example.com"].model == "v5"',
        EvalError("no such key: model"),
    ),
    (
        "missing-attribute",
        'device.attributes["gpu.example.com"].uuid == "x"',
        EvalError("no such key: uuid"),
    ),
    # ... and an optional index of it is always present, as in Kubernetes.
    ("optional-index-missing-domain", 'device.attributes[?"tpu.example.com"].hasValue()', True),
    (
        "nested-missing-domain",
        'device.attributes[device.attributes["dra.net"].ifName].x == 1',
        EvalError("no such key: x"),
    ),
    ("error-absorbed-by-or", 'device.attributes["tpu.example.com"].model == "v5" || true', True),
    ("syntax-error", 'device.driver == "gpu', CompileError("Syntax error")),
    ("dangling-and", "1 == 1 &&", CompileError("compilation failed")),
    ("undeclared", "gpu.driver == 1", CompileError("undeclared reference to 'gpu")),
    (
        "non-bool",
        "device.driver",
        EvalError("CEL result of type string could not be converted to bool"),
    ),
    ("non-bool-attribute", 'device.attributes["gpu.example.com"].count', EvalError("type int")),
    (
        "non-bool-literal",
        "1 + 1",
        CompileError("must evaluate to bool or the unknown type, not int"),
    ),
    (
        "no-such-overload",
        'device.attributes["gpu.example.com"].count.startsWith("4")',
        EvalError("no such overload"),
    ),
    ("int-equals-string", 'device.attributes["gpu.example.com"].count == "4"', False),
    ("int-equals-double", 'device.attributes["gpu.example.com"].count == 4.0', True),
    # The strings extension (version 2) and the standard string functions.
    ("lowerAscii", '"A100".lowerAscii() == device.attributes["gpu.example.com"].model', True),
    ("matches", 'device.attributes["dra.net"].ifName.matches("^eth[0-9]+$")', True),
    ("split-join", '"a-b".split("-").join("+") == "a+b"', True),
    ("endsWith-contains", '"a100-80gb".endsWith("gb") && "a100-80gb".contains("80")', True),
    ("strings-v3-absent", '"ab".reverse() == "ba"', CompileError("reverse")),
    # cel.bind, optional values, macros.
    (
        "cel-bind",
        'cel.bind(gpu, device.attributes["gpu.example.com"], gpu.model == "a100" && gpu.count == 4)',
        True,
    ),
    (
        "optional-field",
        'device.attributes["gpu.example.com"].?uuid.orValue("none") == "none"',
        True,
    ),
    ("exists", 'device.attributes.exists(domain, domain == "dra.net")', True),
    ("size", "size(device.attributes) == 2 && size(device.capacity) == 1", True),
    # Text inside strings and comments is left alone.
    (
        "string-literal",
        '\'device.attributes["x"]\'.size() > 0 // device.attributes["y"]',
        True,
    ),
    (
        "raw-string",
        '"a1".matches(r"\\d$") && !has(device.attributes["tpu.example.com"].model)',
        True,
    ),
    # The quantity library.
    ("quantity-equality", 'quantity("1Gi") == quantity("1024Mi")', True),
    ("quantity-inequality", 'quantity("200M") == quantity("0.3G")', False),
    (
        "quantity-arithmetic",
        'quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20")',
        True,
    ),
    ("quantity-mul", 'quantity("50k").mul(2) == quantity("100000")', True),
    (
        "quantity-asInteger",
        'device.capacity["gpu.example.com"].memory.asInteger() == 42949672960',
        True,
    ),
    (
        "quantity-asInteger-fraction",
        'device.capacity["gpu.example.com"].cores.asInteger() == 1',
        EvalError("cannot convert value to integer"),
    ),
    ("quantity-isInteger", '!device.capacity["gpu.example.com"].cores.isInteger()', True),
    (
        "quantity-asApproximateFloat",
        'device.capacity["gpu.example.com"].cores.asApproximateFloat() == 1.5',
        True,
    ),
    ("quantity-sign", 'sign(quantity("-1m")) == -1 && sign(quantity("0")) == 0', True),
    ("isQuantity", 'isQuantity("1.5Gi") && !isQuantity("200K") && !isQuantity(" 1")', True),
    ("quantity-sign-not-a-member", 'quantity("1").sign() == 1', CompileError("sign")),
    (
        "quantity-parse-error",
        'quantity("200K") == quantity("1")',
        EvalError("quantities must match"),
    ),
    ("quantity-lessThan", 'quantity("50M").isLessThan(quantity("50Mi"))', True),
    # The semver library.
    (
        "semver-parts",
        'semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3',
        True,
    ),
    ("semver-compareTo", 'semver("1.0.0-alpha").compareTo(semver("1.0.0")) == -1', True),
    ("semver-build-ignored", 'semver("1.0.0+build.1") == semver("1.0.0")', True),
    ("isSemver", 'isSemver("1.2.3-rc.1") && !isSemver("v1.2") && !isSemver("01.2.3")', True),
    (
        "semver-normalize",
        'semver("v1.2", true) == semver("1.2.0") && isSemver("01.02.03", true)',
        True,
    ),
    ("semver-invalid", 'semver("1.2") == semver("1.2.0")', EvalError("invalid semantic version")),
    (
        "version-attribute-equals",
        'device.attributes["gpu.example.com"].driverVersion == semver("1.2.3")',
        True,
    ),
    (
        "quantity-versus-semver",
        'device.capacity["gpu.example.com"].memory.compareTo(semver("1.0.0")) == 0',
        EvalError("no such overload"),
    ),
]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [pytest.param(expression, expected, id=id) for id, expression, expected in SELECTORS],
)
def test_selectors(expression, expected):
    if isinstance(expected, CompileError):
        with pytest.raises(SelectorError) as raised:
            compile_selector(expression)
        assert expected.reason in raised.value.reason
        assert raised.value.expression == expression
        return
    selector = compile_selector(expression)
    if isinstance(expected, EvalError):
        with pytest.raises(SelectorError) as raised:
            selector.matches(DRIVER, ATTRIBUTES, CAPACITY)
        assert expected.reason in raised.value.reason
        assert expression in str(raised.value)
        return
    assert selector.matches(DRIVER, ATTRIBUTES, CAPACITY) is expected


def test_selector_error_is_a_value_error_naming_expression_and_reason():
    with pytest.raises(ValueError, match="no such key: tpu") as raised:
        compile_selector('device.attributes["gpu.example.com"].tpu').matches(
            DRIVER, ATTRIBUTES, CAPACITY
        )
    assert str(raised.value) == (
        "CEL selector 'device.attributes[\"gpu.example.com\"].tpu': no such key: tpu"
    )


def test_names_without_domain_belong_to_the_driver():
    selector = compile_selector('device.attributes["gpu.example.com"].model == "a100"')
    assert selector.matches(DRIVER, {"model": "a100"}, {})
    assert not selector.matches(DRIVER, {"model": "h100"}, {})


def test_devices_differ_per_call():
    selector = compile_selector(
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'
    )
    memories = [Fraction(g * GI) for g in (20, 40, 80)]
    assert [selector.matches(DRIVER, {}, {"gpu.example.com/memory": m}) for m in memories] == [
        False,
        True,
        True,
    ]


def test_missing_domain_reads_as_empty_map():
    selector = compile_selector('device.attributes["tpu.example.com"] == {}')
    assert selector.matches(DRIVER, ATTRIBUTES, CAPACITY)
    assert not selector.matches(DRIVER, {"tpu.example.com/model": "v5"}, {})


def test_invalid_version_attribute_is_an_error():
    selector = compile_selector('device.driver == "gpu.example.com"')
    with pytest.raises(
        SelectorError, match=r"attribute gpu\.example\.com/v: parse semantic version"
    ):
        selector.matches(DRIVER, {"gpu.example.com/v": Version("1.2")}, {})


def test_too_long_expression_is_rejected():
    expression = "true || " * (MAX_EXPRESSION_LENGTH // 8) + "true"
    with pytest.raises(SelectorError, match=f"more than {MAX_EXPRESSION_LENGTH}"):
        compile_selector(expression)


def test_each_expression_compiles_once():
    expression = 'device.attributes["dra.net"].rdma && device.driver != "cached.example.com"'
    before = compile_cache_info()
    first = compile_selector(expression)
    second = compile_selector(expression)
    after = compile_cache_info()
    assert isinstance(first, CompiledSelector)
    assert first is second
    assert after.misses == before.misses + 1
    assert after.hits == before.hits + 1


def test_compile_errors_are_cached_and_raised_afresh():
    expression = "device.driver == == 'cached'"
    before = compile_cache_info()
    errors = []
    for _ in range(2):
        with pytest.raises(SelectorError) as raised:
            compile_selector(expression)
        errors.append(raised.value)
    after = compile_cache_info()
    assert after.misses == before.misses + 1
    assert errors[0] is not errors[1]
    assert errors[0].reason == errors[1].reason
