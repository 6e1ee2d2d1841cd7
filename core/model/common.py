"""Names the model interprets (labels, annotations), `ModelError`, and the small parsing helpers every kind uses (times, maps, integers, metadata)."""

from __future__ import annotations

import dataclasses
import json
import re
import reprlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeAlias

import msgspec

# Label and annotation names the model interprets.
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
DAEMONSET_POD_ANNOTATION = "cluster-autoscaler.kubernetes.io/daemonset-pod"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
LEGACY_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
LEGACY_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"
DEFAULT_SCHEDULER = "default-scheduler"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

# A JSON value as the model writes it (`to_k8s`). Mappings and sequences rather than dicts
# and lists: a `dict[str, str]` of labels or a list of tolerations is one as it stands,
# without a copy to widen its type. Read into it with `isinstance`.
JsonValue: TypeAlias = (
    bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
)
# A JSON object: a Kubernetes object written by the model (`Pod.to_k8s()`).
JsonObject: TypeAlias = dict[str, JsonValue]


class ModelError(ValueError):
    """A Kubernetes object could not be parsed.

    The message names the object, the field and the expected form.
    """

    def __init__(
        self,
        obj: str,
        field: str,
        expected: str,
        value: object = dataclasses.MISSING,
        hint: str = "",
    ):
        self.obj = obj
        self.field = field
        self.expected = expected
        got = "" if value is dataclasses.MISSING else f", got {describe_value(value)}"
        after = f"; {hint}" if hint else ""
        # The object and field are clipped in the message (a 5,000-character name is a
        # line, not a page); `obj` and `field` keep them whole.
        super().__init__(f"{clip_text(obj)}: {clip_text(field)}: expected {expected}{got}{after}")


def clip_text(text: str, limit: int = 300) -> str:
    """`text` as an error shows a name or a field path from the input: control characters
    escaped (the error stays one line), cut to `limit` characters with its length said."""
    if not text.isprintable():
        # A name holding a newline or another control character is shown escaped: the
        # error stays one line.
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class _BoundedRepr(reprlib.Repr):
    """`repr` cut to a few hundred characters and a few levels of nesting, for values
    quoted in errors: a 5,000-digit number, a 1 MB string or a list nested 10,000 deep is
    said in a line, never in a megabyte or a RecursionError."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxdict = self.maxlist = self.maxtuple = self.maxset = 6
        self.maxstring = self.maxother = 120
        self.maxlong = 40

    def repr_int(self, x: int, level: int) -> str:
        # `repr` of an int beyond the interpreter's digit limit (4300) raises.
        if x.bit_length() > 4 * self.maxlong:
            digits = int(x.bit_length() * 0.30103) + 1
            return f"{'-' if x < 0 else ''}<an integer of about {digits} digits>"
        return super().repr_int(x, level)


_bounded_repr = _BoundedRepr().repr


def describe_value(value: object) -> str:
    """`repr(value)`, bounded in length and depth (an error quotes what it got)."""
    try:
        return _bounded_repr(value)
    except (RecursionError, ValueError):  # pragma: no cover - reprlib bounds the depth
        return f"<a {type(value).__name__} that cannot be shown>"


# --------------------------------------------------------------------------- helpers


_TIME_CACHE: dict[str, datetime] = {}


def _parse_time(value: Any, obj: str, field: str) -> datetime | None:
    if value is None or value == "":
        return None
    cached = _TIME_CACHE.get(value) if isinstance(value, str) else None
    if cached is not None:
        return cached
    parsed = _parse_time_uncached(value, obj, field)
    if isinstance(value, str):
        if len(_TIME_CACHE) > _CACHE_LIMIT:
            _TIME_CACHE.clear()
        _TIME_CACHE[value] = parsed
    return parsed


def _parse_time_uncached(value: Any, obj: str, field: str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise ModelError(obj, field, "an RFC 3339 timestamp such as 2024-01-02T03:04:05Z", value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ModelError(
            obj, field, "an RFC 3339 timestamp such as 2024-01-02T03:04:05Z", value
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _str_map(value: Any, obj: str, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ModelError(obj, field, "a map of string to string", value)
    for key, item in value.items():
        # Labels and annotations are hashed, compared and matched as strings downstream.
        if type(item) is not str:
            raise ModelError(obj, f"{field}[{key!r}]", "a string", item)
    return value


def _str(value: Any, obj: str, field: str) -> str:
    """A string field (empty when absent); another type is a `ModelError`: what the model
    keeps as a string is compared, hashed and matched as one downstream."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ModelError(obj, field, "a string", value)
    return value


def _int(value: Any, obj: str, field: str, default: int | None = None) -> int:
    if value is None:
        if default is None:
            raise ModelError(obj, field, "an integer")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelError(obj, field, "an integer", value)
    return value


def _list(value: Any, obj: str, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ModelError(obj, field, "a list", value)
    return value


def _str_list(value: Any, obj: str, field: str, *, numbers: bool = False) -> list[str]:
    """A list of strings (absent: empty). With `numbers`, an integer or a float within
    int64 (what a hand-written YAML `values: [2]` holds) is taken as its text."""
    items = _list(value, obj, field)
    numeric = False
    for i, item in enumerate(items):
        if type(item) is str:
            continue
        if (
            numbers
            and isinstance(item, int | float)
            and not isinstance(item, bool)
            and abs(item) < 1 << 63
        ):
            numeric = True
            continue
        raise ModelError(obj, f"{field}[{i}]", "a string", item)
    return [v if type(v) is str else str(v) for v in items] if numeric else items


def _dict(value: Any, obj: str, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ModelError(obj, field, "an object", value)
    return value


def _meta(raw: Mapping[str, Any], kind: str, namespaced: bool) -> tuple[dict[str, Any], str]:
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise ModelError(kind, "<object>", "a JSON object", raw)
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        raise ModelError(kind, "metadata", "an object with a name")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ModelError(kind, "metadata.name", "a non-empty string", name)
    if namespaced:
        ns = meta.get("namespace") or "default"
        if not isinstance(ns, str):
            raise ModelError(f"{kind} {name}", "metadata.namespace", "a string", ns)
        return meta, f"{kind} {ns}/{name}"
    return meta, f"{kind} {name}"




_decode_json_fast = msgspec.json.Decoder().decode


_CACHE_LIMIT = 10_000


def decode_json(data: bytes | str) -> Any:
    """A JSON document, exactly as `json.loads` returns it.

    msgspec decodes to the same dicts, lists, strings and numbers (integers of any size
    included) in about half the time. The few inputs it refuses and `json` accepts
    (`NaN`, out-of-range floats, lone surrogates) and every malformed document go to
    `json.loads`, so results and errors (`json.JSONDecodeError`) are `json`'s own.
    """
    try:
        return _decode_json_fast(data)
    except (msgspec.MsgspecError, UnicodeDecodeError):
        return json.loads(data)


# Kubernetes qualified names (label keys, taint keys): an optional DNS-subdomain prefix and a
# name of at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric; label
# values are such a name, or empty.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_QUALIFIED_NAME = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_NAME})?$")


def is_qualified_name(value: str) -> bool:
    """Whether `value` is a valid label or taint key, as the API server checks it."""
    if len(value) > 316:  # 253 prefix + '/' + 63 name
        return False
    prefix, _, _ = value.rpartition("/")
    return len(prefix) <= 253 and bool(_QUALIFIED_NAME.match(value))


def is_label_value(value: str) -> bool:
    """Whether `value` is a valid label value, as the API server checks it."""
    return len(value) <= 63 and bool(_LABEL_VALUE.match(value))
