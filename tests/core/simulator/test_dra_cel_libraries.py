"""Device selectors using Kubernetes' lists, regex, sets, IP and CIDR CEL libraries: what
they select, and the errors that make a device not match (with the reason kept)."""

from __future__ import annotations

import pytest
from clusterscaler.simulator.dra import DraState
from clusterscaler.simulator.dra_cel import SelectorError, compile_selector

from tests.core.simulator.test_dra_allocation import (
    NODE,
    device,
    devices_of,
    pod,
    request,
    slice_,
    state,
    template,
)

DRIVER = "dra.net"
# A NIC as a network driver publishes it.
ATTRIBUTES = {
    "dra.net/ifName": "eth1",
    "dra.net/ipv4": "10.2.3.4",
    "dra.net/ipv6": "fd00::2",
    "dra.net/pciAddress": "0000:3b:00.0",
}

# (id, expression, True / False for what it selects, or the reason it fails to evaluate)
CASES: list[tuple[str, str, bool | str]] = [
    ("isSorted", "[1, 2, 2, 3].isSorted() && ![3, 1].isSorted()", True),
    ("isSorted-strings", '["a", "b"].isSorted()', True),
    ("sum-int", "[1, 2, 3].sum() == 6", True),
    ("sum-double", "[1.5, 2.5].sum() == 4.0", True),
    ("sum-uint", "[1u, 2u].sum() == 3u", True),
    ("min-max", '[3, 1, 2].min() == 1 && ["b", "a"].max() == "b"', True),
    ("min-empty", "[].min() == 1", "min called on empty list"),
    ("sets-contains", "sets.contains([1, 2, 3], [1, 3])", True),
    ("sets-contains-not", "sets.contains([1, 2], [4])", False),
    ("sets-bool-is-not-int", "sets.contains([1], [true])", False),
    ("sets-numbers-by-value", "sets.intersects([1, 2], [2.0])", True),
    ("sets-equivalent", "sets.equivalent([1, 2], [2, 1, 1])", True),
    ("find", 'device.attributes["dra.net"].ifName.find("[0-9]+") == "1"', True),
    ("find-none", '"eth".find("[0-9]+") == ""', True),
    ("findAll", '"a1b22c333".findAll("[0-9]+") == ["1", "22", "333"]', True),
    ("findAll-limit", '"a1b22c333".findAll("[0-9]+", 2) == ["1", "22"]', True),
    ("findAll-zero", '"a1".findAll("[0-9]", 0) == []', True),
    ("regex-illegal", 'device.attributes["dra.net"].ifName.find("(") == ""', "Illegal regex"),
    ("pci-bus", 'device.attributes["dra.net"].pciAddress.matches("^0000:3b:")', True),
    ("ip-family", 'ip(device.attributes["dra.net"].ipv4).family() == 4', True),
    ("ip-family-6", 'ip(device.attributes["dra.net"].ipv6).family() == 6', True),
    ("ip-loopback", 'ip("127.0.0.1").isLoopback() && ip("::1").isLoopback()', True),
    ("ip-unspecified", 'ip("0.0.0.0").isUnspecified()', True),
    ("ip-link-local", 'ip("169.254.1.1").isLinkLocalUnicast() && ip("fe80::1").isLinkLocalUnicast()', True),
    ("ip-link-local-multicast", 'ip("224.0.0.5").isLinkLocalMulticast() && ip("ff02::1").isLinkLocalMulticast()', True),
    ("ip-global-unicast", 'ip("10.2.3.4").isGlobalUnicast() && !ip("255.255.255.255").isGlobalUnicast()', True),
    ("isIP", 'isIP("1.2.3.4") && !isIP("1.2.3") && !isIP("01.2.3.4")', True),
    ("ip-canonical", 'ip.isCanonical("2001:db8::1") && !ip.isCanonical("2001:DB8::1")', True),
    ("ip-equal", 'ip("2001:db8:0::1") == ip("2001:db8::1")', True),
    ("ip-invalid", 'ip("1.2.3") == ip("1.2.3.4")', "parse error during conversion from string"),
    ("ip-mapped", 'ip("::ffff:1.2.3.4").family() == 6', "IPv4-mapped IPv6 address"),
    ("ip-zone", 'ip("fe80::1%eth0").family() == 6', "with zone value is not allowed"),
    ("cidr-contains-ip", 'cidr("10.0.0.0/8").containsIP(device.attributes["dra.net"].ipv4)', True),
    ("cidr-contains-ip-ip", 'cidr("10.0.0.0/8").containsIP(ip("11.0.0.1"))', False),
    ("cidr-other-family", 'cidr("10.0.0.0/8").containsIP("fd00::2")', False),
    ("cidr-contains-cidr", 'cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16")', True),
    ("cidr-wider-not-contained", 'cidr("10.1.0.0/16").containsCIDR(cidr("10.0.0.0/8"))', False),
    ("cidr-parts", 'cidr("10.1.2.3/8").ip() == ip("10.1.2.3") && cidr("10.1.2.3/8").prefixLength() == 8', True),
    ("cidr-masked", 'cidr("10.1.2.3/8").masked() == cidr("10.0.0.0/8")', True),
    ("isCIDR", 'isCIDR("10.0.0.0/8") && !isCIDR("10.0.0.0") && !isCIDR("10.0.0.0/33")', True),
    ("cidr-invalid", 'cidr("10.0.0.0/33").prefixLength() == 1', "prefix length out of range"),
]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [pytest.param(expression, expected, id=id) for id, expression, expected in CASES],
)
def test_library_selectors(expression: str, expected: bool | str) -> None:
    selector = compile_selector(expression)
    if isinstance(expected, str):
        with pytest.raises(SelectorError) as raised:
            selector.matches(DRIVER, ATTRIBUTES, {})
        assert expected in raised.value.reason
        return
    assert selector.matches(DRIVER, ATTRIBUTES, {}) is expected


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param("[1, 2].indexOf(2) == 1", id="list-indexOf"),
        pytest.param('url("https://x").getHost() == "x"', id="url"),
    ],
)
def test_functions_not_available_fail_to_compile(expression: str) -> None:
    with pytest.raises(SelectorError) as raised:
        compile_selector(expression)
    assert "compilation failed" in raised.value.reason


def test_a_device_whose_selector_errors_is_not_allocated_and_the_reason_is_kept() -> None:
    """A NIC in 10.0.0.0/8 is chosen over one whose address does not parse; when only the
    latter is left, the claim's reason counts it as not matching."""
    nics = slice_([device("nic-0", ip="not-an-ip"), device("nic-1", ip="10.1.2.3")])
    selector = 'cidr("10.0.0.0/8").containsIP(device.attributes["gpu.example.com"].ip)'
    dra: DraState = state([nics], [template(request(selector=selector))])
    assert devices_of(dra.allocate(pod(), NODE)) == ["nic-1"]
    only_bad = state(
        [slice_([device("nic-0", ip="not-an-ip")])], [template(request(selector=selector))]
    )
    found = only_bad.allocate(pod(), NODE)
    assert isinstance(found, str)
    assert "0 free and matching (1 more whose selector failed: CEL selector" in found
    assert "parse error during conversion from string" in found
