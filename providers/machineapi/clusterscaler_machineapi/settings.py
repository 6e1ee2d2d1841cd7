"""What the annotations of a MachineSet or MachineDeployment say about autoscaling it.

Size limits (`<group>/cluster-api-autoscaler-node-group-{min,max}-size`) and per-group
option overrides (`<group>/autoscaling-options-*`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from clusterscaler.api import DURATION_FORM, ConfigurationError, NodeGroupOptions, parse_duration

from clusterscaler_machineapi.apigroups import (
    OPTION_MAX_NODE_PROVISION_TIME,
    OPTION_SCALE_DOWN_GPU_UTILIZATION_THRESHOLD,
    OPTION_SCALE_DOWN_UNNEEDED_TIME,
    OPTION_SCALE_DOWN_UNREADY_TIME,
    OPTION_SCALE_DOWN_UTILIZATION_THRESHOLD,
)
from clusterscaler_machineapi.objects import ScalableResource

log = structlog.get_logger()

_NON_NEGATIVE_INT = re.compile(r"\+?[0-9]+")


@dataclass(frozen=True, slots=True)
class SizeLimits:
    min_size: int
    max_size: int


def _size(resource: ScalableResource, key: str) -> int | None:
    raw = resource.annotations.get(key)
    if raw is None:
        return None
    text = raw.strip()
    if not _NON_NEGATIVE_INT.fullmatch(text):
        raise ConfigurationError(
            f"{resource.ref}: annotation {key}: expected a non-negative integer, got {raw!r}"
        )
    return int(text)


def size_limits(resource: ScalableResource) -> SizeLimits | None:
    """The group's limits, or None when the resource is not autoscaled.

    A resource is autoscaled when it has the max-size annotation; a missing min-size means
    0. As upstream, max-size 0 means "never scale", so such a resource is not a node group.
    Raises `ConfigurationError` naming the resource and the annotation when a value is not
    a non-negative integer, when min-size is given without max-size, or when max < min.
    """
    api = resource.api
    min_size = _size(resource, api.min_size_key)
    max_size = _size(resource, api.max_size_key)
    if max_size is None:
        if min_size is not None:
            raise ConfigurationError(
                f"{resource.ref}: annotation {api.max_size_key} is missing; it must be set "
                f"with {api.min_size_key} to an integer >= the min size"
            )
        return None
    min_size = min_size or 0
    if max_size < min_size:
        raise ConfigurationError(
            f"{resource.ref}: annotation {api.max_size_key}: expected an integer >= "
            f"{api.min_size_key} ({min_size}), got {max_size}"
        )
    if max_size == 0:
        return None
    return SizeLimits(min_size=min_size, max_size=max_size)


def _threshold(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("out of range")
    return value


_OPTIONS: tuple[tuple[str, str, Callable[[str], Any], str], ...] = (
    (
        OPTION_SCALE_DOWN_UTILIZATION_THRESHOLD,
        "scale_down_utilization_threshold",
        _threshold,
        "a number between 0 and 1",
    ),
    (
        OPTION_SCALE_DOWN_GPU_UTILIZATION_THRESHOLD,
        "scale_down_gpu_utilization_threshold",
        _threshold,
        "a number between 0 and 1",
    ),
    (OPTION_SCALE_DOWN_UNNEEDED_TIME, "scale_down_unneeded_time", parse_duration, DURATION_FORM),
    (OPTION_SCALE_DOWN_UNREADY_TIME, "scale_down_unready_time", parse_duration, DURATION_FORM),
    (OPTION_MAX_NODE_PROVISION_TIME, "max_node_provision_time", parse_duration, DURATION_FORM),
)


def option_overrides(resource: ScalableResource) -> dict[str, Any]:
    """Valid `<group>/autoscaling-options-*` values by `NodeGroupOptions` field name.

    An unparsable value is logged (naming the resource, the annotation and the expected
    form) and ignored, so the flag's value applies, as upstream.
    """
    out: dict[str, Any] = {}
    for option, field_name, parse, form in _OPTIONS:
        key = resource.api.option_key(option)
        raw = resource.annotations.get(key)
        if raw is None:
            continue
        try:
            out[field_name] = parse(raw.strip())
        except ValueError:
            log.error(
                "machineapi_bad_option_annotation",
                node_group=resource.id,
                annotation=key,
                value=raw,
                expected=form,
            )
    return out


def group_options(
    resource: ScalableResource, defaults: NodeGroupOptions
) -> NodeGroupOptions | None:
    overrides = option_overrides(resource)
    # Only the annotations' overrides: the core lays them over the flags.
    return NodeGroupOptions(**overrides) if overrides else None
