"""What the annotations of a MachineSet or MachineDeployment say about autoscaling it.

Size limits (`<group>/cluster-api-autoscaler-node-group-{min,max}-size`) and per-group
option overrides (`<group>/autoscaling-options-*`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import structlog
from clusterscaler.api import (
    ConfigurationError,
    GroupOptionError,
    NodeGroupOptions,
    parse_group_option,
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


# The per-group options upstream's clusterapi provider reads from annotations, of those
# the provider kit parses (`GROUP_OPTION_NAMES`).
OPTIONS = (
    "scaledownutilizationthreshold",
    "scaledowngpuutilizationthreshold",
    "scaledownunneededtime",
    "scaledownunreadytime",
    "maxnodeprovisiontime",
)


def option_overrides(resource: ScalableResource) -> dict[str, Any]:
    """Valid `<group>/autoscaling-options-*` values by `NodeGroupOptions` field name.

    An unparsable value is logged (naming the resource, the annotation and the expected
    form) and ignored, so the flag's value applies, as upstream.
    """
    out: dict[str, Any] = {}
    for option in OPTIONS:
        key = resource.api.option_key(option)
        raw = resource.annotations.get(key)
        if raw is None:
            continue
        try:
            field_name, value = parse_group_option(option, raw.strip())
        except GroupOptionError as exc:
            log.error(
                "machineapi_bad_option_annotation",
                node_group=resource.id,
                annotation=key,
                value=raw,
                expected=exc.expected,
            )
            continue
        out[field_name] = value
    return out


def group_options(
    resource: ScalableResource, defaults: NodeGroupOptions
) -> NodeGroupOptions | None:
    overrides = option_overrides(resource)
    # Only the annotations' overrides: the core lays them over the flags.
    return NodeGroupOptions(**overrides) if overrides else None
