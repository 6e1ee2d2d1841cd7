from __future__ import annotations

from fractions import Fraction

import pytest
from clusterscaler.model.quantity import (
    QuantityError,
    format_bytes,
    format_cpu,
    parse_bytes,
    parse_cpu_millis,
    parse_quantity,
)
from hypothesis import given
from hypothesis import strategies as st

QUANTITIES = [
    ("100m", Fraction(1, 10)),
    ("1.5", Fraction(3, 2)),
    ("2Gi", 2 * 1024**3),
    ("1G", 10**9),
    ("1e3", 1000),
    ("1E-3", Fraction(1, 1000)),
    ("128974848", 128974848),
    ("0.1", Fraction(1, 10)),
    (".5", Fraction(1, 2)),
    ("5.", 5),
    ("+1k", 1000),
    ("-1Ki", -1024),
    ("1Ei", 2**60),
    ("1E", 10**18),
    ("500u", Fraction(5, 10**4)),
    ("3n", Fraction(3, 10**9)),
    (2, 2),
    (0.25, Fraction(1, 4)),
]


@pytest.mark.parametrize(("text", "expected"), QUANTITIES, ids=[str(q[0]) for q in QUANTITIES])
def test_parse_quantity_forms(text, expected):
    assert parse_quantity(text, obj="Pod default/a", field="f") == expected


CPU = [("100m", 100), ("1", 1000), ("1.5", 1500), ("0.0001", 1), ("1001u", 2), ("2e0", 2000)]


@pytest.mark.parametrize(("text", "millis"), CPU, ids=[c[0] for c in CPU])
def test_cpu_millis_round_up_like_kubernetes(text, millis):
    assert parse_cpu_millis(text, obj="o", field="f") == millis


BYTES = [("1Mi", 1 << 20), ("1M", 10**6), ("1.5k", 1500), ("0.5", 1), ("100m", 1), ("1e3", 1000)]


@pytest.mark.parametrize(("text", "n"), BYTES, ids=[b[0] for b in BYTES])
def test_bytes_round_up(text, n):
    assert parse_bytes(text, obj="o", field="f") == n


BAD = ["", "1.2.3", "Gi", "1gi", "1 Gi", "1KiB", "abc", "1e", "--1", None, True, [], "nan"]


@pytest.mark.parametrize("value", BAD, ids=[repr(b) for b in BAD])
def test_malformed_quantity_names_object_and_field(value):
    with pytest.raises(QuantityError) as err:
        parse_quantity(
            value, obj="Pod default/web-1", field="spec.containers[0].resources.requests.cpu"
        )
    message = str(err.value)
    assert "Pod default/web-1" in message
    assert "spec.containers[0].resources.requests.cpu" in message
    assert "quantity" in message


def test_negative_cpu_is_rejected():
    with pytest.raises(QuantityError, match="non-negative"):
        parse_cpu_millis("-1", obj="o", field="f")


@pytest.mark.parametrize(
    ("millis", "text"), [(1000, "1"), (1500, "1500m"), (0, "0"), (250, "250m")], ids=str
)
def test_format_cpu(millis, text):
    assert format_cpu(millis) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [(1 << 30, "1Gi"), (3 << 20, "3Mi"), (1000, "1000"), (0, "0"), (1536, "1536"), (3072, "3Ki")],
    ids=str,
)
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@given(st.integers(min_value=0, max_value=10**9))
def test_cpu_format_round_trips(millis):
    assert parse_cpu_millis(format_cpu(millis), obj="o", field="f") == millis


@given(st.integers(min_value=0, max_value=2**62))
def test_bytes_format_round_trips(n):
    assert parse_bytes(format_bytes(n), obj="o", field="f") == n


# The API server stores quantities beyond int64 as written (a Node with ephemeral-storage
# `1e400` is accepted): they read as Go's int64 maximum, never as a number no float can hold,
# and a hostile exponent or digit string costs no more than a short one.
INT64_MAX = (1 << 63) - 1
HUGE = [
    "1e400",
    "10e399",
    "9.3e18",
    "1" * 5000,
    "1e99999999999",
    "1" * 50 + "Ei",
    "1." + "1" * 5000 + "e400",
]


@pytest.mark.parametrize("text", HUGE, ids=lambda t: t[:16])
def test_quantities_beyond_int64_read_as_its_maximum(text: str) -> None:
    assert parse_bytes(text, obj="node n", field="status.capacity.ephemeral-storage") == INT64_MAX
    assert parse_cpu_millis(text, obj="node n", field="status.capacity.cpu") == INT64_MAX
    assert float(parse_bytes(text, obj="node n", field="f")) == float(INT64_MAX)


@pytest.mark.parametrize(
    ("text", "n"),
    [("0." + "0" * 40 + "1", 1), ("1e-99999999999", 1), ("0e99999999999", 0), ("0." + "0" * 5000, 0)],
    ids=["long-fraction", "tiny-exponent", "zero-huge-exponent", "long-zero"],
)
def test_tiny_and_zero_quantities_with_hostile_lengths(text: str, n: int) -> None:
    assert parse_bytes(text, obj="node n", field="f") == n
