"""`priority`: user-assigned priorities by node group name.

The ConfigMap `cluster-autoscaler-priority-expander` in `--namespace` holds, under the key
`priorities`, a YAML map from integer priority to a list of regular expressions:

    10:
      - .*t2\\.large.*
    50:
      - .*spot.*

Each node group takes the highest priority with an expression found anywhere in its id
(unanchored search). The options of the highest priority are kept; groups matching no
expression are dropped (with a `PriorityConfigMapNotMatchedGroup` warning). Priorities
below -1 never win. A missing or invalid ConfigMap, or no match at all, keeps every option
and is reported. The ConfigMap is read again on every call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import yaml
from clusterscaler.api import AutoscalingOptions, ExpanderContext, Option, load_yaml

CONFIG_MAP_NAME = "cluster-autoscaler-priority-expander"
CONFIG_MAP_KEY = "priorities"


class PriorityConfigError(ValueError):
    """The priorities document is not a map of integer to a list of regular expressions."""


def parse_priorities(text: str) -> dict[int, list[re.Pattern[str]]]:
    """Parse the `priorities` YAML; raises `PriorityConfigError` naming what is wrong."""
    where = f"ConfigMap {CONFIG_MAP_NAME}: data.{CONFIG_MAP_KEY}"
    if not text.strip():
        raise PriorityConfigError(
            f"{where}: expected a YAML map of priority to regexps, got an empty value"
        )
    try:
        doc = load_yaml(text)
    # PyYAML raises ValueError for an integer beyond 4,300 digits and RecursionError
    # for deep nesting: both are malformed input like any YAML error.
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise PriorityConfigError(f"{where}: expected YAML, got a parse error: {exc}") from None
    if not isinstance(doc, dict):
        raise PriorityConfigError(
            f"{where}: expected a YAML map of integer priority to a list of regexps, got {type(doc).__name__}"
        )
    out: dict[int, list[re.Pattern[str]]] = {}
    for key, value in doc.items():
        if isinstance(key, bool) or not isinstance(key, int | str):
            raise PriorityConfigError(f"{where}: expected integer priorities, got {key!r}")
        try:
            prio = int(key)
        except ValueError:
            raise PriorityConfigError(
                f"{where}: expected integer priorities, got {key!r}"
            ) from None
        exprs = [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
        if not isinstance(value, list) or len(exprs) != len(value):
            raise PriorityConfigError(
                f"{where}.{prio}: expected a list of regular expressions, got {value!r}"
            )
        patterns = []
        for expr in exprs:
            try:
                patterns.append(re.compile(expr))
            except re.error as exc:
                raise PriorityConfigError(
                    f"{where}.{prio}: expected a valid regular expression, got {expr!r} ({exc})"
                ) from None
        out.setdefault(prio, []).extend(patterns)
    return out


class PriorityExpander:
    name = "priority"

    requires_pricing = False

    def __init__(self, options: AutoscalingOptions | None = None) -> None:
        self._cache: tuple[str, dict[int, list[re.Pattern[str]]]] | None = None

    def _priorities(self, context: ExpanderContext) -> dict[int, list[re.Pattern[str]]] | None:
        cm = context.config_map(CONFIG_MAP_NAME)
        ref = f"ConfigMap {context.namespace}/{CONFIG_MAP_NAME}"
        if cm is None:
            context.warn(
                self.name,
                "PriorityConfigMapNotFound",
                f"priority expander: {ref} not found; options left unchanged",
                ref,
            )
            return None
        text = cm.data.get(CONFIG_MAP_KEY)
        if text is None:
            context.warn(
                self.name,
                "PriorityConfigMapInvalid",
                # CA's words.
                f"Wrong configuration for priority expander: configmap {CONFIG_MAP_NAME} "
                f"doesn't have {CONFIG_MAP_KEY} key. Ignoring.",
                ref,
            )
            return None
        if self._cache is not None and self._cache[0] == text:
            return self._cache[1]
        try:
            parsed = parse_priorities(text)
        except PriorityConfigError as exc:
            context.warn(
                self.name,
                "PriorityConfigMapInvalid",
                f"Wrong configuration for priority expander: {exc}. Ignoring.",
                ref,
            )
            return None
        self._cache = (text, parsed)
        return parsed

    def best_options(self, options: Sequence[Option], context: ExpanderContext) -> list[Option]:
        if not options:
            return []
        priorities = self._priorities(context)
        if priorities is None:
            return list(options)
        ref = f"ConfigMap {context.namespace}/{CONFIG_MAP_NAME}"
        # The running maximum starts at -1, as upstream: lower priorities never win.
        best_prio = -1
        best: list[Option] = []
        for option in options:
            group_id = option.node_group.id
            matched = [
                p for p, exprs in priorities.items() if any(e.search(group_id) for e in exprs)
            ]
            if not matched:
                context.warn(
                    self.name,
                    "PriorityConfigMapNotMatchedGroup",
                    f"Priority expander: node group {group_id} not found in priority expander "
                    "configuration. The group won't be used.",
                    ref,
                )
                continue
            prio = max(matched)
            if prio < best_prio:
                continue
            if prio > best_prio:
                best_prio = prio
                best = []
            best.append(option)
        if not best:
            context.warn(
                self.name,
                "PriorityConfigMapNoGroupMatched",
                "Priority expander: no priorities info found for any of the expansion options. "
                "No options filtered.",
                ref,
            )
            return list(options)
        return best
