"""Kubernetes' rules for label and taint keys and label values, one place for every
provider's tags and annotations."""

from __future__ import annotations

import pytest
from clusterscaler.api import is_label_value, is_qualified_name

KEYS = [
    ("nvidia.com/gpu", True),
    ("node.kubernetes.io/instance-type", True),
    ("team", True),
    ("a" * 63, True),
    ("a" * 64, False),
    ("Example.com/x", False),  # the prefix is a lower-case DNS subdomain
    ("example.com/", False),
    ("-team", False),
    ("team_", False),
    ("", False),
]


@pytest.mark.parametrize(("key", "valid"), KEYS, ids=[k[0][:20] or "empty" for k in KEYS])
def test_qualified_names(key: str, valid: bool) -> None:
    assert is_qualified_name(key) is valid


VALUES = [("", True), ("spot", True), ("v1.2_3-a", True), ("a" * 64, False), ("bad value", False)]


@pytest.mark.parametrize(("value", "valid"), VALUES, ids=[v[0][:20] or "empty" for v in VALUES])
def test_label_values(value: str, valid: bool) -> None:
    assert is_label_value(value) is valid
