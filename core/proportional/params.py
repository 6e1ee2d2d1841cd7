"""Scaling parameters of the cluster-proportional-autoscaler, parsed and validated.

The ConfigMap named by `--configmap` holds exactly one key, the control mode, whose value is
a JSON object:

- `linear`: `coresPerReplica` and `nodesPerReplica` (numbers, either may be omitted but not
  both), `min` (integer, default and lowest effective value 1), `max` (integer, 0 = no
  limit), `preventSinglePointFailure` and `includeUnschedulableNodes` (booleans).
- `ladder`: `coresToReplicas` and `nodesToReplicas` (lists of `[threshold, replicas]` pairs
  of non-negative integers) and `includeUnschedulableNodes`.

Every error names the key at fault (`linear.min`, `ladder.coresToReplicas[2]`) and the form
that was expected, because the people reading it are editing a ConfigMap by hand.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

LINEAR = "linear"
LADDER = "ladder"
MODES = (LINEAR, LADDER)

_LINEAR_KEYS = (
    "coresPerReplica",
    "nodesPerReplica",
    "min",
    "max",
    "preventSinglePointFailure",
    "includeUnschedulableNodes",
)
_LADDER_KEYS = ("coresToReplicas", "nodesToReplicas", "includeUnschedulableNodes")


class ParamsError(ValueError):
    """Invalid scaling parameters; `key` is the dotted path of the offending key."""

    def __init__(self, key: str, message: str) -> None:
        # A key is the user's text (an unknown mode's name): clipped in the message, whole on
        # the error.
        super().__init__(f"{_shown(key)}: {message}")
        self.key = key
        self.message = message


def _shown(key: str) -> str:
    return key if len(key) <= 120 else f"{key[:80]}... ({len(key)} characters)"


@dataclass(frozen=True)
class LinearParams:
    """Parameters of the linear mode, with upstream's defaults applied.

    `cores_per_replica` / `nodes_per_replica` of 0 mean "not set"; `max_replicas` of 0 means
    "no maximum"; `min_replicas` is at least 1.
    """

    cores_per_replica: float = 0.0
    nodes_per_replica: float = 0.0
    min_replicas: int = 1
    max_replicas: int = 0
    prevent_single_point_failure: bool = False
    include_unschedulable_nodes: bool = False
    ignored_keys: tuple[str, ...] = ()

    @property
    def mode(self) -> Literal["linear"]:
        return "linear"


@dataclass(frozen=True, order=True)
class LadderStep:
    """From `threshold` (nodes or cores) upwards, run `replicas` replicas."""

    threshold: int
    replicas: int


@dataclass(frozen=True)
class LadderParams:
    """Parameters of the ladder mode; both step tables are sorted by threshold."""

    cores_to_replicas: tuple[LadderStep, ...] = ()
    nodes_to_replicas: tuple[LadderStep, ...] = ()
    include_unschedulable_nodes: bool = False
    ignored_keys: tuple[str, ...] = ()

    @property
    def mode(self) -> Literal["ladder"]:
        return "ladder"


Params = LinearParams | LadderParams


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _load_json(text: str, key: str) -> Any:
    try:
        # Python's json accepts NaN and Infinity; JSON (and the upstream Go parser) does not.
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise ParamsError(key, f"expected a JSON object, could not parse it: {exc}") from exc


def _describe(value: Any) -> str:
    """The value as the document wrote it, in at most a line."""
    try:
        text = json.dumps(value) if not isinstance(value, str) else repr(value)
    except (ValueError, RecursionError):  # nested too deep, or an integer beyond 4300 digits
        text = f"a {type(value).__name__} that cannot be shown"
    return text if len(text) <= 200 else f"{text[:200]}... ({len(text)} characters)"


def _as_object(value: Any, key: str) -> dict[str, Any]:
    if isinstance(value, str):
        value = _load_json(value, key)
    if not isinstance(value, dict):
        raise ParamsError(key, f"expected a JSON object, got {_describe(value)}")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _get_int(obj: Mapping[str, Any], mode: str, name: str, default: int) -> int:
    value = obj.get(name)
    if value is None:  # omitted and null both mean "use the default", as in upstream
        return default
    if not _is_int(value):
        raise ParamsError(f"{mode}.{name}", f"expected an integer, got {_describe(value)}")
    result: int = value
    return result


def _get_number(obj: Mapping[str, Any], mode: str, name: str) -> float:
    value = obj.get(name)
    if value is None:
        return 0.0
    # An integer beyond float64 (Go's float64 refuses it too) is compared, never converted:
    # `math.isfinite` of it would raise OverflowError.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (abs(value) <= sys.float_info.max if isinstance(value, int) else math.isfinite(value))
    ):
        raise ParamsError(f"{mode}.{name}", f"expected a number, got {_describe(value)}")
    if value < 0:
        raise ParamsError(f"{mode}.{name}", f"expected a number >= 0, got {_describe(value)}")
    return float(value)


def _get_bool(obj: Mapping[str, Any], mode: str, name: str) -> bool:
    value = obj.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ParamsError(f"{mode}.{name}", f"expected true or false, got {_describe(value)}")
    return value


def _ignored(obj: Mapping[str, Any], known: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(k for k in obj if k not in known))


def parse_linear(value: str | Mapping[str, Any]) -> LinearParams:
    """Parse the `linear` parameters (JSON text or an already decoded object)."""
    obj = _as_object(value, LINEAR)
    cores = _get_number(obj, LINEAR, "coresPerReplica")
    nodes = _get_number(obj, LINEAR, "nodesPerReplica")
    min_replicas = _get_int(obj, LINEAR, "min", 0)
    max_replicas = _get_int(obj, LINEAR, "max", 0)
    if min_replicas < 0:
        raise ParamsError(f"{LINEAR}.min", f"expected an integer >= 0, got {min_replicas}")
    # Upstream treats a min of 0 (or an omitted one) as 1: linear mode never scales to zero.
    min_replicas = max(min_replicas, 1)
    if max_replicas != 0 and max_replicas < min_replicas:
        raise ParamsError(
            f"{LINEAR}.max",
            f"expected 0 (no maximum) or an integer >= min ({min_replicas}), got {max_replicas}",
        )
    if cores == 0 and nodes == 0:
        raise ParamsError(
            LINEAR,
            "expected coresPerReplica or nodesPerReplica (or both) to be a number > 0",
        )
    return LinearParams(
        cores_per_replica=cores,
        nodes_per_replica=nodes,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        prevent_single_point_failure=_get_bool(obj, LINEAR, "preventSinglePointFailure"),
        include_unschedulable_nodes=_get_bool(obj, LINEAR, "includeUnschedulableNodes"),
        ignored_keys=_ignored(obj, _LINEAR_KEYS),
    )


def _parse_steps(obj: Mapping[str, Any], name: str) -> tuple[LadderStep, ...]:
    value = obj.get(name)
    key = f"{LADDER}.{name}"
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ParamsError(
            key, f"expected a list of [threshold, replicas] pairs, got {_describe(value)}"
        )
    steps: list[LadderStep] = []
    seen: set[int] = set()
    for index, entry in enumerate(value):
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not all(_is_int(v) and v >= 0 for v in entry)
        ):
            raise ParamsError(
                f"{key}[{index}]",
                "expected a [threshold, replicas] pair of non-negative integers, "
                f"got {_describe(entry)}",
            )
        threshold, replicas = entry
        # Upstream sorts with an unstable sort, so a repeated threshold picks either step at
        # random; refuse it instead of guessing.
        if threshold in seen:
            raise ParamsError(f"{key}[{index}]", f"threshold {threshold} appears more than once")
        seen.add(threshold)
        steps.append(LadderStep(threshold=threshold, replicas=replicas))
    return tuple(sorted(steps))


def parse_ladder(value: str | Mapping[str, Any]) -> LadderParams:
    """Parse the `ladder` parameters (JSON text or an already decoded object)."""
    obj = _as_object(value, LADDER)
    cores = _parse_steps(obj, "coresToReplicas")
    nodes = _parse_steps(obj, "nodesToReplicas")
    if not cores and not nodes:
        # Without any step every lookup gives 0 replicas: almost certainly a typo in a key
        # name, and scaling the target to zero because of it would be an outage.
        raise ParamsError(
            LADDER, "expected at least one step in coresToReplicas or nodesToReplicas"
        )
    return LadderParams(
        cores_to_replicas=cores,
        nodes_to_replicas=nodes,
        include_unschedulable_nodes=_get_bool(obj, LADDER, "includeUnschedulableNodes"),
        ignored_keys=_ignored(obj, _LADDER_KEYS),
    )


def _parse_mode(mode: str, value: Any) -> Params:
    if mode == LINEAR:
        return parse_linear(value)
    if mode == LADDER:
        return parse_ladder(value)
    raise ParamsError(mode, f"unknown control mode, expected one of {', '.join(MODES)}")


def _single_mode(keys: list[str], where: str) -> str:
    if len(keys) != 1:
        # The keys are the user's text: each clipped, and a few of many named.
        named = ", ".join(_shown(key) for key in sorted(keys)[:5])
        more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
        got = f"{named}{more}" if keys else "no keys"
        raise ParamsError(where, f"expected exactly one key, {LINEAR} or {LADDER}, got {got}")
    return keys[0]


def parse_configmap_data(data: Mapping[str, str] | None) -> Params:
    """Parse a ConfigMap's `data`: exactly one key, the mode, holding JSON text."""
    data = data or {}
    mode = _single_mode(list(data), "data")
    value = data[mode]
    if not isinstance(value, str):
        raise ParamsError(mode, f"expected a string holding JSON, got {_describe(value)}")
    return _parse_mode(mode, value)


def parse_params_document(text: str) -> Params:
    """Parse `{"linear": {...}}` or `{"ladder": {...}}` as given on the command line.

    The mode's value may be the object itself (the `--default-params` form) or a string
    holding it (the form of a ConfigMap's `data`, as `kubectl get -o json` prints it).
    """
    obj = _as_object(text, "params")
    mode = _single_mode(list(obj), "params")
    return _parse_mode(mode, obj[mode])


def configmap_data_from_document(text: str) -> dict[str, str]:
    """Validate a `--default-params` document and render it as ConfigMap `data`."""
    parse_params_document(text)
    obj = _as_object(text, "params")
    return {
        mode: value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        for mode, value in obj.items()
    }
