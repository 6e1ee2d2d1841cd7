"""Patch algorithms of the Kubernetes API server, for the fake API server.

Three patch types are understood, as the API server applies them:

- JSON merge patch (RFC 7386): maps merge recursively, ``null`` deletes a key, lists replace.
- Strategic merge patch: like a merge patch, but lists that Kubernetes declares with a merge
  key (node taints by ``key``, containers by ``name``, conditions by ``type``, ...) merge
  element by element, and the ``$patch``, ``$deleteFromPrimitiveList/<field>``,
  ``$setElementOrder/<field>`` and ``$retainKeys`` directives are honoured.
- JSON patch (RFC 6902): ``add``, ``remove``, ``replace``, ``move``, ``copy``, ``test``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MERGE_KEYS",
    "PRIMITIVE_MERGE_LISTS",
    "PatchError",
    "PatchTestFailed",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
]


class PatchError(ValueError):
    """A patch document is malformed or cannot be applied to the object."""


class PatchTestFailed(PatchError):
    """A JSON patch ``test`` operation did not hold."""


# Field name -> merge key, for lists Kubernetes declares with patchStrategy "merge". Keyed by
# field name only: the fields the autoscaler and its tests patch never reuse a name with a
# different strategy.
MERGE_KEYS: dict[str, str] = {
    "taints": "key",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
}

# Lists of scalars declared with patchStrategy "merge": a patch adds to them.
PRIMITIVE_MERGE_LISTS: frozenset[str] = frozenset({"finalizers"})

_DELETE_FROM_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ELEMENT_ORDER = "$setElementOrder/"


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch (RFC 7386) and return the result; inputs are not modified."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch as the API server does for built-in kinds."""
    if not isinstance(patch, dict):
        raise PatchError(
            f"strategic merge patch: expected a JSON object, got {type(patch).__name__}"
        )
    base = copy.deepcopy(target) if isinstance(target, dict) else {}
    return _smp_map(base, patch)


def _smp_map(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    if directive is not None:
        raise PatchError(f"strategic merge patch: unknown $patch directive {directive!r}")
    retain = patch.get("$retainKeys")
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError("strategic merge patch: $retainKeys must be a list of field names")
        target = {k: v for k, v in target.items() if k in retain}
    for key, value in patch.items():
        if key in ("$retainKeys",) or key.startswith(_SET_ELEMENT_ORDER):
            continue
        if key.startswith(_DELETE_FROM_PRIMITIVE):
            field = key[len(_DELETE_FROM_PRIMITIVE) :]
            if not isinstance(value, list):
                raise PatchError(f"strategic merge patch: {key} must be a list")
            current = target.get(field)
            if isinstance(current, list):
                target[field] = [item for item in current if item not in value]
            continue
        if value is None:
            target.pop(key, None)
            continue
        current = target.get(key)
        if isinstance(value, dict):
            target[key] = _smp_map(current if isinstance(current, dict) else {}, value)
        elif isinstance(value, list):
            target[key] = _smp_list(key, current if isinstance(current, list) else [], value)
        else:
            target[key] = copy.deepcopy(value)
    for key, order in patch.items():
        if key.startswith(_SET_ELEMENT_ORDER) and isinstance(order, list):
            field = key[len(_SET_ELEMENT_ORDER) :]
            if isinstance(target.get(field), list):
                target[field] = _apply_order(field, target[field], order)
    return target


def _smp_list(field: str, current: list[Any], patch: list[Any]) -> list[Any]:
    if field in PRIMITIVE_MERGE_LISTS:
        merged = list(current)
        for item in patch:
            if item not in merged:
                merged.append(copy.deepcopy(item))
        return merged
    merge_key = MERGE_KEYS.get(field)
    if merge_key is None or not all(isinstance(item, dict) for item in patch):
        if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
            return [
                copy.deepcopy(item)
                for item in patch
                if not (isinstance(item, dict) and item.get("$patch") == "replace")
            ]
        return copy.deepcopy(patch)
    if any(item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch if item.get("$patch") != "replace"]
    merged = [copy.deepcopy(item) for item in current]
    for item in patch:
        if merge_key not in item:
            raise PatchError(
                f"strategic merge patch: element of {field!r} has no merge key {merge_key!r}"
            )
        index = next(
            (
                i
                for i, existing in enumerate(merged)
                if isinstance(existing, dict) and existing.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del merged[index]
            continue
        if index is None:
            merged.append(_smp_map({}, item))
        else:
            merged[index] = _smp_map(merged[index], item)
    return merged


def _apply_order(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    merge_key = MERGE_KEYS.get(field)

    def identity(item: Any) -> Any:
        if merge_key is not None and isinstance(item, dict):
            return item.get(merge_key)
        return item

    wanted = [identity(entry) for entry in order]
    ranked = sorted(
        enumerate(items),
        key=lambda pair: (
            wanted.index(identity(pair[1])) if identity(pair[1]) in wanted else len(wanted),
            pair[0],
        ),
    )
    return [item for _, item in ranked]


@dataclass(frozen=True)
class _Pointer:
    parts: tuple[str, ...]

    @classmethod
    def parse(cls, text: Any) -> _Pointer:
        if not isinstance(text, str) or (text and not text.startswith("/")):
            raise PatchError(
                f"JSON patch: path {text!r} must be a JSON pointer such as /spec/taints/0"
            )
        if text == "":
            return cls(())
        return cls(tuple(p.replace("~1", "/").replace("~0", "~") for p in text[1:].split("/")))


def _resolve_parent(doc: Any, pointer: _Pointer) -> tuple[Any, str]:
    if not pointer.parts:
        raise PatchError("JSON patch: the document root cannot be the target of this operation")
    node = doc
    for part in pointer.parts[:-1]:
        node = _child(node, part, pointer)
    return node, pointer.parts[-1]


def _child(node: Any, part: str, pointer: _Pointer) -> Any:
    path = "/" + "/".join(pointer.parts)
    if isinstance(node, dict):
        if part not in node:
            raise PatchError(f"JSON patch: path {path} does not exist (missing {part!r})")
        return node[part]
    if isinstance(node, list):
        index = _index(part, len(node), path, allow_end=False)
        return node[index]
    raise PatchError(f"JSON patch: path {path} goes through a scalar at {part!r}")


def _index(part: str, length: int, path: str, *, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return length
    if not part.isdigit() or (part != "0" and part.startswith("0")):
        raise PatchError(f"JSON patch: {part!r} in {path} is not an array index")
    index = int(part)
    limit = length if allow_end else length - 1
    if index > limit:
        raise PatchError(f"JSON patch: index {index} in {path} is out of range (length {length})")
    return index


def _get(doc: Any, pointer: _Pointer) -> Any:
    node = doc
    for part in pointer.parts:
        node = _child(node, part, pointer)
    return node


def _add(doc: Any, pointer: _Pointer, value: Any) -> Any:
    if not pointer.parts:
        return copy.deepcopy(value)
    parent, last = _resolve_parent(doc, pointer)
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        path = "/" + "/".join(pointer.parts)
        parent.insert(_index(last, len(parent), path, allow_end=True), copy.deepcopy(value))
    else:
        raise PatchError(f"JSON patch: cannot add below a scalar at /{'/'.join(pointer.parts)}")
    return doc


def _remove(doc: Any, pointer: _Pointer) -> Any:
    parent, last = _resolve_parent(doc, pointer)
    path = "/" + "/".join(pointer.parts)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"JSON patch: cannot remove {path}: it does not exist")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), path, allow_end=False))
    raise PatchError(f"JSON patch: cannot remove below a scalar at {path}")


def json_patch(target: Any, operations: Any) -> Any:
    """Apply a JSON patch (RFC 6902) and return the result; the input is not modified.

    Raises PatchTestFailed when a ``test`` operation fails and PatchError for malformed
    operations or paths that do not exist.
    """
    if not isinstance(operations, list):
        raise PatchError(
            "JSON patch: expected a JSON array of operations such as "
            '[{"op": "replace", "path": "/spec/unschedulable", "value": true}]'
        )
    doc = copy.deepcopy(target)
    for number, operation in enumerate(operations):
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise PatchError(f"JSON patch: operation {number} needs 'op' and 'path' fields")
        op = operation["op"]
        pointer = _Pointer.parse(operation["path"])
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f"JSON patch: operation {number} ({op}) needs a 'value' field")
        if op == "add":
            doc = _add(doc, pointer, operation["value"])
        elif op == "remove":
            _remove(doc, pointer)
        elif op == "replace":
            if pointer.parts:
                _get(doc, pointer)  # must exist
                _remove(doc, pointer)
            doc = _add(doc, pointer, operation["value"])
        elif op in ("move", "copy"):
            source = _Pointer.parse(operation.get("from"))
            value = _remove(doc, source) if op == "move" else copy.deepcopy(_get(doc, source))
            doc = _add(doc, pointer, value)
        elif op == "test":
            actual = _get(doc, pointer)
            if actual != operation["value"]:
                raise PatchTestFailed(
                    f"JSON patch: test of {operation['path']} failed: "
                    f"expected {operation['value']!r}, found {actual!r}"
                )
        else:
            raise PatchError(
                f"JSON patch: operation {number} has unknown op {op!r}; expected one of "
                "add, remove, replace, move, copy, test"
            )
    return doc
