"""One log line as Cluster Autoscaler's logging libraries print it.

`text` is klog's: a header (`I1127 02:11:11.123456       1 loop.py:88] `, the severity
letter, month and day, local time to the microsecond, the process id right-aligned in seven
columns, the caller's file and line), then the message quoted as klog's structured calls
(`InfoS`, `ErrorS`) quote it, then `err=` and the fields as klog's `internal/serialize`
writes them: strings quoted the way Go's `strconv.Quote` does, other values as Go's JSON
encoder writes them. klog writes a string value holding line breaks as an indented block
over several lines; here it stays quoted on one line, so that every line of the output
starts with a header.

`json` is component-base's (`logs/json`, zap through zapr): one object per line with `ts`
(milliseconds since the epoch, a float, as component-base's `epochMillisTimeEncoder`
writes it), `logger` (a library's logger name, zap's `NameKey`), `caller` (zap's short
caller: the file's directory and name, and the line), `msg`, `v` on info lines (their
verbosity; warnings are info lines at `v` 0, as klog's warnings are once routed to a
logr logger; errors carry no `v`), the fields, and `err` last on error lines.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from clusterscaler.framework.durations import format_duration

SEVERITIES = "IWEF"


@dataclass(frozen=True)
class LogLine:
    """One line to write, whatever its format: plain data the renderers read."""

    severity: str  # klog's letter: I, W, E or F
    when: datetime  # aware
    path: str  # the caller's source file
    line: int
    msg: str
    v: int | None = 0  # the verbosity of an info line; None on errors
    err: str | None = None
    logger: str = ""  # a library's logger name; "" for our own lines
    fields: tuple[tuple[str, Any], ...] = ()

    def with_fields(self, **more: Any) -> LogLine:
        return dataclasses.replace(self, fields=(*self.fields, *more.items()))


_QUOTED = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
    "\v": "\\v", '"': '\\"', "\\": "\\\\",
}  # fmt: skip


def go_quote(text: str, *, ascii_only: bool = False) -> str:
    """`text` as Go's `strconv.Quote` writes it (`strconv.QuoteToASCII` with `ascii_only`):
    quotes, backslash escapes for the quote, the backslash and control characters, `\\x`,
    `\\u` or `\\U` for other characters that do not print."""
    if (
        text.isprintable()
        and '"' not in text
        and "\\" not in text
        and (not ascii_only or text.isascii())
    ):
        return f'"{text}"'
    out = ['"']
    for char in text:
        escaped = _QUOTED.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char.isprintable() and (not ascii_only or char.isascii()):
            out.append(char)
        else:
            code = ord(char)
            if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8 (`surrogateescape`)
                out.append(f"\\x{code - 0xDC00:02x}")
            elif code < 0x80:
                out.append(f"\\x{code:02x}")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_float(value: float) -> str:
    """A float as Go's JSON encoder writes it: shortest digits, positional from 1e-6 to
    1e21 (`1` for 1.0, `10000000000000000` for 1e16), else `1e-7`, `1e+21`."""
    if math.isnan(value) or math.isinf(value):
        return go_quote(str(value))  # Go's encoder refuses them; a string keeps the line
    magnitude = abs(value)
    if magnitude == 0 or 1e-6 <= magnitude < 1e21:
        text = format(Decimal(repr(value)), "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return text
    mantissa, _, exponent = repr(value).partition("e")
    sign, digits = exponent[0], exponent[1:].lstrip("0") or "0"
    return f"{mantissa}e{sign}{digits}"


_HTML = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _json_string(text: str, escape_html: bool) -> str:
    out = json.dumps(text, ensure_ascii=False)
    if escape_html and any(char in out for char in _HTML):
        out = "".join(_HTML.get(char, char) for char in out)
    return out


def go_json(value: Any, *, escape_html: bool = False) -> str:
    """`value` as Go's JSON encoder writes the closest Go value: maps in their order,
    sequences as arrays, bytes as base64, durations as Go durations (`1m30s`), times in
    RFC 3339, enums as their value, anything else as its string. `escape_html` as Go's
    `json.Encoder` does by default (klog's text values; zap turns it off)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return go_json(value.value, escape_html=escape_html)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return _json_string(value, escape_html)
    if isinstance(value, Mapping):
        items = (
            f"{_json_string(str(key), escape_html)}:{go_json(item, escape_html=escape_html)}"
            for key, item in value.items()
        )
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple | set | frozenset):
        ordered = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return "[" + ",".join(go_json(item, escape_html=escape_html) for item in ordered) + "]"
    if isinstance(value, bytes | bytearray):
        return f'"{base64.b64encode(bytes(value)).decode()}"'
    return _json_string(_as_text(value), escape_html)


def _as_text(value: Any) -> str:
    """What Go's `String()` would say of the values Python has in its place."""
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    try:
        return str(value)
    except Exception as exc:  # a broken __str__ must not cost the line
        return f"<panic: {exc!r}>"


def klog_value(value: Any) -> str:
    """One value after `key=`, as klog's `KVFormat` writes it: strings (and what Go would
    print through `String()` or `Error()`) quoted, bytes as `%+q`, the rest as JSON."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bytes | bytearray):
        return go_quote(bytes(value).decode("utf-8", "surrogateescape"), ascii_only=True)
    if isinstance(value, BaseException):
        return go_quote(_as_text(value))
    if value is None or isinstance(
        value, bool | int | float | enum.Enum | Mapping | list | tuple | set | frozenset
    ):
        return go_json(value, escape_html=True)
    return go_quote(_as_text(value))


def klog_header(severity: str, when: datetime, pid: int, file: str, line: int) -> str:
    """klog's `FormatHeader`: `Lmmdd hh:mm:ss.uuuuuu ppppppp file:line] ` in local time."""
    local = when.astimezone()
    return (
        f"{severity}{local.month:02d}{local.day:02d} {local.hour:02d}:{local.minute:02d}:"
        f"{local.second:02d}.{local.microsecond:06d} {pid:7d} {file}:{max(line, 0)}] "
    )


def _short_path(path: str, with_dir: bool) -> str:
    """The file's name (`with_dir`: its directory's name and its name), as klog's header
    (`--add-dir-header`) and zap's short caller show it."""
    name = os.path.basename(path)
    if not with_dir:
        return name
    directory = os.path.basename(os.path.dirname(path))
    return f"{directory}/{name}" if directory else name


def render_text(line: LogLine, *, headers: bool = True, dir_header: bool = False) -> str:
    """The line in klog's text format (without the header for `--skip-headers`)."""
    parts: list[str] = []
    if headers:
        parts.append(
            klog_header(
                line.severity, line.when, os.getpid(), _short_path(line.path, dir_header), line.line
            )
        )
    parts.append(go_quote(line.msg))
    if line.err is not None:
        parts.append(f" err={go_quote(line.err)}")
    if line.logger:
        parts.append(f" logger={go_quote(line.logger)}")
    for key, value in line.fields:
        parts.append(f" {key}={klog_value(value)}")
    return "".join(parts)


def render_json(line: LogLine) -> str:
    """The line as component-base's JSON logger writes it."""
    millis = line.when.timestamp() * 1000
    parts = [f'{{"ts":{go_float(millis)}']
    if line.logger:
        parts.append(f',"logger":{_json_string(line.logger, False)}')
    parts.append(f',"caller":{_json_string(f"{_short_path(line.path, True)}:{line.line}", False)}')
    parts.append(f',"msg":{_json_string(line.msg, False)}')
    if line.v is not None:
        parts.append(f',"v":{line.v}')
    reserved = {"ts", "logger", "caller", "msg", "v", "err"}
    for key, value in line.fields:
        # A field named like one of the line's own keys would make a duplicate key.
        name = f"field.{key}" if key in reserved else key
        parts.append(f",{_json_string(name, False)}:{go_json(value)}")
    if line.err is not None:
        parts.append(f',"err":{_json_string(line.err, False)}')
    parts.append("}")
    return "".join(parts)
