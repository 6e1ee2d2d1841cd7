"""Go-style durations (`10m`, `1h30m`, `500ms`, `0s`), as Cluster Autoscaler's flags take them."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
DURATION_FORM = "a Go duration such as 10s, 1m30s, 1h or 500ms"
_MAX_NS = (1 << 63) - 1


def parse_duration(value: str) -> timedelta:
    """Parse a non-negative Go duration. Raises `ValueError` naming the expected form."""
    text = value.strip()
    if text in ("0", "+0"):
        return timedelta(0)
    if text.startswith("+"):
        text = text[1:]
    if not text or text.startswith("-"):
        raise ValueError(f"{value!r} is not {DURATION_FORM} (negative or empty)")
    pos = 0
    total_ns = 0.0
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None:
            raise ValueError(f"{value!r} is not {DURATION_FORM}")
        total_ns += float(match.group(1)) * _UNITS_NS[match.group(2)]
        pos = match.end()
    if total_ns > _MAX_NS:
        # Go's durations are int64 nanoseconds: ParseDuration refuses more, and a timedelta
        # cannot hold 1e300 hours.
        raise ValueError(f"{value!r} is not {DURATION_FORM} (at most about 292 years)")
    return timedelta(microseconds=round(total_ns / 1000))


def format_duration(value: timedelta) -> str:
    """Render a timedelta the way Go prints durations (`1h30m0s`, `10s`, `500ms`, `0s`)."""
    total_us = round(value.total_seconds() * 1_000_000)
    if total_us == 0:
        return "0s"
    sign = "-" if total_us < 0 else ""
    total_us = abs(total_us)
    if total_us < 1_000_000:
        if total_us % 1000 == 0:
            return f"{sign}{total_us // 1000}ms"
        return f"{sign}{total_us}µs"
    hours, rem = divmod(total_us, 3600 * 1_000_000)
    minutes, rem = divmod(rem, 60 * 1_000_000)
    seconds = rem / 1_000_000
    sec_text = f"{seconds:.6f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{sec_text}"
    if minutes:
        return f"{sign}{minutes}m{sec_text}"
    return f"{sign}{sec_text}"
