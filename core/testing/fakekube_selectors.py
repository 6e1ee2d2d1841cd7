"""Label and field selectors as the Kubernetes API server parses them from query strings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "SelectorError",
    "label_selector_matches",
]


class SelectorError(ValueError):
    """A selector string or object is malformed."""


@dataclass(frozen=True)
class _Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match objects without the label, as in Kubernetes.
        return not present or labels[self.key] not in self.values


_SET_RE = re.compile(r"^\s*([^\s!=,()]+)\s+(in|notin)\s+\(([^()]*)\)\s*")
_EQ_RE = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s,()=!]*)\s*")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*")


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector query (``app=web,tier in (a,b),!legacy``)."""

    requirements: tuple[_Requirement, ...]

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        """Parse the string form used in ``?labelSelector=``; raise SelectorError if invalid."""
        requirements: list[_Requirement] = []
        rest = (text or "").strip()
        while rest:
            match = _SET_RE.match(rest)
            if match:
                values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
                requirements.append(_Requirement(match.group(1), match.group(2), values))
            else:
                match = _EQ_RE.match(rest)
                if match:
                    op = "=" if match.group(2) in ("=", "==") else "!="
                    requirements.append(
                        _Requirement(match.group(1), op, frozenset({match.group(3)}))
                    )
                else:
                    match = _EXISTS_RE.match(rest)
                    if not match:
                        raise SelectorError(
                            f"labelSelector {text!r}: cannot parse at {rest!r}; expected "
                            "key=value, key!=value, key in (a,b), key notin (a,b), key or !key"
                        )
                    op = "!" if match.group(1) else "exists"
                    requirements.append(_Requirement(match.group(2), op))
            rest = rest[match.end() :]
            if rest.startswith(","):
                rest = rest[1:]
            elif rest:
                raise SelectorError(f"labelSelector {text!r}: expected ',' before {rest!r}")
        return cls(tuple(requirements))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(req.matches(labels) for req in self.requirements)


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector (``spec.nodeName=n1,status.phase!=Succeeded``)."""

    terms: tuple[tuple[str, bool, str], ...]  # (dotted path, equal?, value)

    @classmethod
    def parse(cls, text: str | None) -> FieldSelector:
        """Parse the string form used in ``?fieldSelector=``; raise SelectorError if invalid."""
        terms: list[tuple[str, bool, str]] = []
        for raw in (text or "").split(","):
            part = raw.strip()
            if not part:
                continue
            match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(==|=|!=)\s*(.*)", part)
            if not match:
                raise SelectorError(
                    f"fieldSelector {text!r}: cannot parse {part!r}; expected field=value or "
                    "field!=value, e.g. spec.nodeName=node-1"
                )
            terms.append((match.group(1), match.group(2) != "!=", match.group(3).strip()))
        return cls(tuple(terms))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for path, equal, value in self.terms:
            actual = _field_value(obj, path)
            if (actual == value) != equal:
                return False
        return True


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Match a structured selector (``matchLabels`` / ``matchExpressions``) against labels.

    An empty selector matches everything, as for PodDisruptionBudgets in policy/v1.
    """
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key = expression.get("key", "")
        operator = expression.get("operator", "")
        values = set(expression.get("values") or [])
        if operator == "In":
            ok = key in labels and labels[key] in values
        elif operator == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif operator == "Exists":
            ok = key in labels
        elif operator == "DoesNotExist":
            ok = key not in labels
        else:
            raise SelectorError(
                f"selector.matchExpressions[].operator {operator!r}: expected In, NotIn, "
                "Exists or DoesNotExist"
            )
        if not ok:
            return False
    return True
