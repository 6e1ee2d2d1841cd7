"""Hostile replies of a provider service: whatever bytes come as a template node, the
provider returns a node or an error naming the group and `nodeBytes`, never anything else;
whatever cloud-config text, a `ConfigurationError` or a config."""

from __future__ import annotations

import pytest
from clusterscaler.api import CloudProviderError, ConfigurationError, NodeInfo
from clusterscaler.simulator.builders import make_node
from clusterscaler_externalgrpc.config import parse_config
from clusterscaler_externalgrpc.provider import decode_template
from externalgrpc_fakes import node_bytes
from hypothesis import given
from hypothesis import strategies as st

pytestmark = [pytest.mark.fuzz, pytest.mark.properties]

VALID = node_bytes(make_node("t", "4", "16Gi", labels={"a": "b"}, extended={"nvidia.com/gpu": 1}))


def _check(payload: bytes) -> None:
    got = decode_template("pool", payload)
    if isinstance(got, CloudProviderError):
        assert "node group pool: NodeGroupTemplateNodeInfo" in str(got)
        assert "nodeBytes" in str(got)
    else:
        assert isinstance(got, NodeInfo)
        assert got.node.name


@given(st.binary(max_size=300))
def test_random_bytes_are_a_node_or_an_error_naming_the_field(payload: bytes) -> None:
    _check(payload)


@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=6))
def test_corrupted_templates_are_a_node_or_an_error_naming_the_field(
    flips: list[tuple[int, int]],
) -> None:
    payload = bytearray(VALID)
    for index, value in flips:
        payload[index] = value
    _check(bytes(payload))


@given(st.text(max_size=200))
def test_any_cloud_config_text_is_a_config_or_an_error_naming_the_file(text: str) -> None:
    try:
        parse_config(text, "cc.yaml")
    except ConfigurationError as exc:
        assert str(exc).startswith("externalgrpc provider: cc.yaml: ")
