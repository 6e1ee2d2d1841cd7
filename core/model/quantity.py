"""Kubernetes resource quantities with exact arithmetic.

Every form the API server accepts is understood: plain and decimal numbers (`1`, `0.1`,
`1.5`), decimal SI suffixes (`100m`, `1k`, `1G`), binary suffixes (`2Gi`, `512Mi`) and decimal
exponents (`1e3`, `1E-3`). Values are returned as exact `Fraction`s; CPU is converted to
integer milli-CPU and sizes to integer bytes, both rounded up as Kubernetes does
(`Quantity.MilliValue()` / `Quantity.Value()`).

Parsing is memoised per string: a cluster has few distinct quantity strings but they appear
on every pod.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "INT64_MAX",
    "QuantityError",
    "format_bytes",
    "format_cpu",
    "parse_bytes",
    "parse_cpu_millis",
    "parse_int_quantity",
    "parse_quantity",
]

EXPECTED_FORM = "a Kubernetes quantity such as 100m, 1.5, 2Gi, 1G or 1e3"

_BINARY: dict[str, int] = {
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
}
_DECIMAL: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}

# sign, digits with an optional fraction (".5" and "5." are valid), then a suffix.
_QUANTITY_RE = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)


class QuantityError(ValueError):
    """A quantity could not be parsed; the message names the object and the field."""

    def __init__(self, obj: str, field: str, value: object, expected: str = EXPECTED_FORM):
        self.obj = obj
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"{obj}: {field}: expected {expected}, got {value!r}")


# Go's int64, where Kubernetes' `Quantity.Value()` and `MilliValue()` top out. The API server
# accepts larger quantities (`1e400` is stored as written): they are read as this value, so
# that one node or pod with an absurd quantity cannot break the arithmetic of a whole loop.
INT64_MAX = (1 << 63) - 1
# Beyond any int64 whatever the unit: digits and exponents past these are not expanded.
_MAX_WHOLE_DIGITS = 40
_MAX_FRACTION_DIGITS = 30
_HUGE = Fraction(10**_MAX_WHOLE_DIGITS)


def _number(num: str) -> Fraction:
    """The digits of a quantity, with at most 40 whole and 30 fractional digits expanded: a
    longer whole part is beyond int64 anyway, and a fraction is rounded up at its 30th
    digit (Kubernetes itself keeps nine), so `ceil` at milli or unit scale is unchanged."""
    whole, _, fraction = num.partition(".")
    if len(whole.lstrip("0")) > _MAX_WHOLE_DIGITS:
        return _HUGE
    kept = fraction[:_MAX_FRACTION_DIGITS]
    number = Fraction(f"{whole or '0'}.{kept or '0'}")
    if fraction[_MAX_FRACTION_DIGITS:].strip("0"):
        number += Fraction(1, 10**_MAX_FRACTION_DIGITS)
    return number


@lru_cache(maxsize=8192)
def _parse_str(text: str) -> Fraction | None:
    match = _QUANTITY_RE.match(text)
    if match is None:
        return None
    number = _number(match.group("num"))
    if match.group("bin"):
        number *= _BINARY[match.group("bin")]
    elif match.group("exp"):
        digits = match.group("exp")[1:].lstrip("+-").lstrip("0") or "0"
        negative = match.group("exp")[1] == "-"
        # A hostile exponent must not allocate a gigantic integer: past 40 digits of
        # magnitude the value is beyond int64 (or below a nano), whatever it is exactly.
        if len(digits) > 4 or int(digits) > 2 * _MAX_WHOLE_DIGITS:
            if number == 0:
                return Fraction(0)
            number = Fraction(1, 10**_MAX_FRACTION_DIGITS) if negative else _HUGE
        else:
            number *= Fraction(10) ** (-int(digits) if negative else int(digits))
    else:
        number *= _DECIMAL[match.group("dec") or ""]
    return -number if match.group("sign") == "-" else number


def parse_quantity(value: object, *, obj: str, field: str) -> Fraction:
    """Parse a quantity (string, int or float as found in JSON) into an exact `Fraction`.

    Raises `QuantityError` naming `obj` and `field` when `value` is not a quantity.
    """
    if isinstance(value, bool):
        raise QuantityError(obj, field, value)
    if isinstance(value, int):
        return Fraction(min(value, INT64_MAX)) if value >= 0 else Fraction(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(obj, field, value)
        # repr gives the shortest string that round-trips, which is what the user wrote.
        text = repr(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise QuantityError(obj, field, value)
    result = _parse_str(text)
    if result is None:
        raise QuantityError(obj, field, value)
    return result


def _ceil(value: Fraction) -> int:
    """Rounded up, and at most `INT64_MAX` (as Kubernetes' int64 values)."""
    return min(-((-value.numerator) // value.denominator), INT64_MAX)


def _non_negative(value: object, parsed: Fraction, obj: str, field: str) -> None:
    if parsed < 0:
        raise QuantityError(obj, field, value, "a non-negative Kubernetes quantity")


@lru_cache(maxsize=8192)
def _cpu_millis_of_str(text: str) -> int | None:
    parsed = _parse_str(text.strip())
    if parsed is None or parsed < 0:
        return None
    return _ceil(parsed * 1000)


@lru_cache(maxsize=8192)
def _int_of_str(text: str) -> int | None:
    parsed = _parse_str(text.strip())
    if parsed is None or parsed < 0:
        return None
    return _ceil(parsed)


def parse_cpu_millis(value: object, *, obj: str, field: str) -> int:
    """CPU in milli-cores, rounded up (`0.0001` is 1m, as the scheduler counts it)."""
    if isinstance(value, str):
        cached = _cpu_millis_of_str(value)
        if cached is not None:
            return cached
    parsed = parse_quantity(value, obj=obj, field=field)
    _non_negative(value, parsed, obj, field)
    return _ceil(parsed * 1000)


def parse_int_quantity(value: object, *, obj: str, field: str) -> int:
    """A non-negative quantity as an integer, rounded up (bytes, pods, GPUs)."""
    if isinstance(value, str):
        cached = _int_of_str(value)
        if cached is not None:
            return cached
    parsed = parse_quantity(value, obj=obj, field=field)
    _non_negative(value, parsed, obj, field)
    return _ceil(parsed)


def parse_bytes(value: object, *, obj: str, field: str) -> int:
    """A size (memory, storage) in bytes, rounded up (`1.5k` is 1500, `0.5` is 1)."""
    return parse_int_quantity(value, obj=obj, field=field)


def format_cpu(millis: int) -> str:
    """Canonical CPU string: whole cores as `2`, otherwise milli-cores as `1500m`."""
    if millis % 1000 == 0:
        return str(millis // 1000)
    return f"{millis}m"


def format_bytes(n: int) -> str:
    """Canonical size: the largest binary suffix that divides exactly, else plain bytes."""
    if n == 0:
        return "0"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)
