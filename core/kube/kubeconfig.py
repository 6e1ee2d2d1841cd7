"""The shape of a kubeconfig, checked before the Kubernetes client loads it.

The client's loader checks no shape: `clusters: 7` or a user that is a string escapes it as
a TypeError or AttributeError that names no field. `check_shape` reads the document as
kubectl's decoder would (each field of the type it has in client-go's `clientcmd/api/v1`)
and says which field is wrong, and how: `clusters[0].cluster.server: expected a string, got
7`. What it accepts, the client loads; what the client still refuses (a context naming no
cluster, a file it cannot read) it refuses with its own message. `check_files` checks the
files of a `$KUBECONFIG` list as client-go merges them, naming the file at fault.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from clusterscaler.model.common import describe_value

__all__ = ["KubeconfigShapeError", "check_files", "check_shape"]


class KubeconfigShapeError(ValueError):
    """A field of the kubeconfig is not of the form kubectl reads: the message names the
    field, the expected form and what it got."""


def _fail(field: str, expected: str, value: Any) -> KubeconfigShapeError:
    return KubeconfigShapeError(f"{field}: expected {expected}, got {describe_value(value)}")


def _string(value: Any, field: str) -> None:
    if not isinstance(value, str):
        raise _fail(field, "a string", value)


def _boolean(value: Any, field: str) -> None:
    if not isinstance(value, bool):
        raise _fail(field, "true or false", value)


def _base64(value: Any, field: str) -> None:
    _string(value, field)
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _fail(field, "base64 of PEM data", value) from None


def _strings(value: Any, field: str) -> None:
    if not isinstance(value, list):
        raise _fail(field, "a list of strings", value)
    for i, item in enumerate(value):
        _string(item, f"{field}[{i}]")


def _string_map(value: Any, field: str) -> None:
    if not isinstance(value, Mapping):
        raise _fail(field, "a map of strings", value)
    for key, item in value.items():
        _string(key, f"{field} key")
        _string(item, f"{field}.{_clip(key)}")


def _exec(value: Any, field: str) -> None:
    body = _mapping(value, field)
    _fields(body, field, _EXEC_FIELDS)
    if "command" not in body:
        raise KubeconfigShapeError(f"{field}.command: required, expected the plugin's command")
    env = body.get("env")
    if env is not None:
        if not isinstance(env, list):
            raise _fail(f"{field}.env", "a list of name and value pairs", env)
        for i, pair in enumerate(env):
            item = _mapping(pair, f"{field}.env[{i}]")
            _string(item.get("name"), f"{field}.env[{i}].name")
            _string(item.get("value"), f"{field}.env[{i}].value")


def _auth_provider(value: Any, field: str) -> None:
    body = _mapping(value, field)
    _string(body.get("name"), f"{field}.name")
    if body.get("config") is not None:
        _string_map(body["config"], f"{field}.config")


Check = Callable[[Any, str], None]

_CLUSTER_FIELDS: dict[str, Check] = {
    "server": _string, "certificate-authority": _string,
    "certificate-authority-data": _base64, "insecure-skip-tls-verify": _boolean,
    "tls-server-name": _string, "proxy-url": _string,
}
_USER_FIELDS: dict[str, Check] = {
    "token": _string, "tokenFile": _string, "username": _string, "password": _string,
    "client-certificate": _string, "client-key": _string,
    "client-certificate-data": _base64, "client-key-data": _base64,
    "exec": _exec, "auth-provider": _auth_provider,
    "as": _string, "as-uid": _string, "as-groups": _strings,
}
_CONTEXT_FIELDS: dict[str, Check] = {"cluster": _string, "user": _string, "namespace": _string}
_EXEC_FIELDS: dict[str, Check] = {
    "command": _string, "args": _strings, "apiVersion": _string,
    "installHint": _string, "interactiveMode": _string,
}
_LISTS = (("clusters", "cluster", _CLUSTER_FIELDS), ("users", "user", _USER_FIELDS),
          ("contexts", "context", _CONTEXT_FIELDS))


def _clip(key: object) -> str:
    text = str(key)
    return text if len(text) <= 80 else describe_value(text)


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(field, "an object", value)
    return value


def _fields(body: Mapping[str, Any], field: str, checks: Mapping[str, Check]) -> None:
    # Unknown fields are left to the client, as kubectl leaves them (extensions and the
    # like); a known one set to null is unset.
    for key, check in checks.items():
        if body.get(key) is not None:
            check(body[key], f"{field}.{key}")


def _names(doc: Mapping[str, Any], list_key: str, body_key: str,
           checks: Mapping[str, Check]) -> dict[str, Mapping[str, Any]]:
    entries = doc.get(list_key)
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise _fail(list_key, f"a list of named {body_key}s", entries)
    named: dict[str, Mapping[str, Any]] = {}
    for i, raw in enumerate(entries):
        where = f"{list_key}[{i}]"
        entry = _mapping(raw, where)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(f"{where}.name", "a non-empty string", name)
        if name in named:
            raise _fail(f"{where}.name", f"a name no other entry of {list_key} has", name)
        # Absent, it is empty, as kubectl reads it (an entry no context uses may lack it).
        body = _mapping(entry.get(body_key) or {}, f"{where}.{body_key}")
        _fields(body, f"{where}.{body_key}", checks)
        named[name] = body
    return named


def _fields_of(doc: Any) -> tuple[Any, dict[str, dict[str, Mapping[str, Any]]]]:
    """Check the fields of one document; its current-context and its named entries."""
    if doc is None:
        return None, {list_key: {} for list_key, _, _ in _LISTS}
    doc = _mapping(doc, "(document)")
    for key in ("apiVersion", "kind", "current-context"):
        if doc.get(key) is not None:
            _string(doc[key], key)
    if doc.get("preferences") is not None:
        _mapping(doc["preferences"], "preferences")
    named = {list_key: _names(doc, list_key, body_key, checks)
             for list_key, body_key, checks in _LISTS}
    return doc.get("current-context"), named


def _in(name: str, exc: KubeconfigShapeError) -> KubeconfigShapeError:
    return KubeconfigShapeError(f"{name}: {exc}" if name else str(exc))


def _names_text(named: Mapping[str, object]) -> str:
    return ", ".join(_clip(n) for n in list(named)[:5]) or "none"


def check_files(files: Sequence[tuple[str, Any]]) -> str | None:
    """Check kubeconfig files read together, as client-go merges a `$KUBECONFIG` list:
    each file's fields, then the current context and what it names in the merged whole
    (the first file to set `current-context` sets it; of two entries of one name, the
    first file's is the one). `files` are (how an error names the file, its loaded
    document); `KubeconfigShapeError` starts with the name of the file at fault. Returns
    the current context's name (None when no file sets one: the client asks for it)."""
    current: tuple[str, Any] | None = None
    merged: dict[str, dict[str, tuple[str, int, Mapping[str, Any]]]] = {
        list_key: {} for list_key, _, _ in _LISTS}
    for name, doc in files:
        try:
            doc_current, named = _fields_of(doc)
        except KubeconfigShapeError as exc:
            raise _in(name, exc) from None
        # An empty current-context is unset, as client-go reads it, unless no file sets one.
        if doc_current is not None and (current is None or (doc_current and not current[1])):
            current = (name, doc_current)
        for list_key, entries in named.items():
            for i, (entry, body) in enumerate(entries.items()):
                merged[list_key].setdefault(entry, (name, i, body))
    if current is None:
        return None
    source, context_name = current
    if context_name not in merged["contexts"]:
        raise _in(source, _fail("current-context", "the name of one of the contexts "
                                f"({_names_text(merged['contexts'])})", context_name))
    source, i, context = merged["contexts"][context_name]
    for key, list_key in (("cluster", "clusters"), ("user", "users")):
        ref = context.get(key)
        # A context without a user has no credentials; without a cluster, nothing to reach.
        if (ref or key == "cluster") and ref not in merged[list_key]:
            raise _in(source, _fail(f"contexts[{i}].context.{key}", f"the name of one of the "
                                    f"{list_key} ({_names_text(merged[list_key])})", ref))
    cluster = context.get("cluster")
    if cluster:
        source, j, body = merged["clusters"][cluster]
        if not body.get("server"):
            # kubectl refuses it ("no server found"); the client would quietly use localhost.
            raise _in(source, KubeconfigShapeError(
                f"clusters[{j}].cluster.server: required by the current context, expected "
                "the API server's URL"
            ))
    return str(context_name)


def check_shape(doc: Any) -> None:
    """Raise `KubeconfigShapeError` naming the first field of `doc` (a loaded kubeconfig)
    that is not of the form kubectl reads, or the reference of the current context that
    names nothing. An empty document is left to the client, which says so."""
    check_files([("", doc)])
