"""Log lines as klog (text) and component-base (JSON) write them: the header, Go's quoting
and JSON encoding of values, the keys of a JSON line and their order."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import pytest
from clusterscaler.report.logformat import (
    LogLine,
    go_float,
    go_quote,
    klog_header,
    klog_value,
    render_json,
    render_text,
)


class Phase(StrEnum):
    READY = "Ready"


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("plain", '"plain"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("two\nlines\tand\ra bell\a", '"two\\nlines\\tand\\ra bell\\a"'),
        ("nul\x00 del\x7f", '"nul\\x00 del\\x7f"'),
        ("nbsp\u00a0 zwsp\u200b", '"nbsp\\u00a0 zwsp\\u200b"'),
        ("été 😀", '"été 😀"'),  # what prints stays as it is
    ],
    ids=["plain", "quote", "backslash", "controls", "ascii-unprintable", "unicode-unprintable", "printable-unicode"],
)
def test_strings_are_quoted_as_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1"), (0.1, "0.1"), (2.5, "2.5"), (1e16, "10000000000000000"), (1e21, "1e+21"),
     (1e-7, "1e-7"), (-2.5e-7, "-2.5e-7"), (0.000001, "0.000001"), (0.0, "0")],
)  # fmt: skip
def test_floats_as_go_json_writes_them(value: float, text: str) -> None:
    assert go_float(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("g1", '"g1"'),
        (3, "3"),
        (True, "true"),
        (None, "null"),
        (["a", 1], '["a",1]'),
        ({"b": "<x>", "a": None}, '{"b":"\\u003cx\\u003e","a":null}'),  # Go escapes HTML
        (timedelta(seconds=90), '"1m30s"'),
        (Phase.READY, '"Ready"'),
        (ValueError("no such group"), '"no such group"'),
        (b"\xff a\xc3\xa9", '"\\xff a\\u00e9"'),  # %+q
    ],
    ids=["string", "int", "bool", "none", "list", "map", "duration", "enum", "error", "bytes"],
)
def test_values_as_klog_serializes_them(value: Any, text: str) -> None:
    assert klog_value(value) == text


def test_header_is_klogs() -> None:
    when = datetime(2026, 11, 27, 2, 11, 11, 123456).astimezone()  # klog prints local time
    assert klog_header("I", when, 1, "loop.py", 123) == "I1127 02:11:11.123456       1 loop.py:123] "
    assert klog_header("W", when, 4194304, "a.py", 7).startswith("W1127 02:11:11.123456 4194304 a.py:7] ")


LINE = LogLine(
    severity="E",
    when=datetime(2026, 11, 27, 2, 11, 11, 123456, tzinfo=UTC),
    path=os.path.join("core", "loop", "planner.py"),
    line=42,
    msg="scale_down_failed",
    v=None,
    err="ApiException: 409",
    fields=(("node", "n1"), ("attempt", 2)),
)


def test_text_line_puts_err_before_the_fields() -> None:
    text = render_text(LINE)
    assert text.startswith("E1127 ") and " planner.py:42] " in text
    assert text.endswith('] "scale_down_failed" err="ApiException: 409" node="n1" attempt=2')
    assert render_text(LINE, headers=False) == '"scale_down_failed" err="ApiException: 409" node="n1" attempt=2'
    assert " loop/planner.py:42] " in render_text(LINE, dir_header=True)


def test_json_line_has_component_base_keys_in_order() -> None:
    error = json.loads(render_json(LINE))
    assert list(error) == ["ts", "caller", "msg", "node", "attempt", "err"]
    assert error["ts"] == pytest.approx(datetime(2026, 11, 27, 2, 11, 11, 123456, tzinfo=UTC).timestamp() * 1000)
    assert error["caller"] == "loop/planner.py:42"
    info = json.loads(render_json(LogLine("I", LINE.when, "/x/kube/client.py", 9, "listed", v=4, logger="urllib3", fields=(("v", "field"),))))
    assert list(info) == ["ts", "logger", "caller", "msg", "v", "field.v"]
    assert (info["v"], info["field.v"]) == (4, "field")


def test_multiline_values_stay_on_one_line() -> None:
    line = LogLine("E", LINE.when, "a.py", 1, "boom", v=None, fields=(("traceback", "Traceback:\n  File x\nError"),))
    assert "\n" not in render_text(line) and "\n" not in render_json(line)
    assert 'traceback="Traceback:\\n  File x\\nError"' in render_text(line)
