"""Cluster Autoscaler's per-node-group autoscaling options, as providers read them from
tags, annotations and kube-env: `parse_group_option` turns one name and value into the
`NodeGroupOptions` field it sets (`clusterscaler.interfaces.cloudprovider`).
"""

from __future__ import annotations

from datetime import timedelta

from clusterscaler.framework.durations import parse_duration

__all__ = ["GROUP_OPTION_NAMES", "GroupOptionError", "parse_group_option"]

# CA's per-group autoscaling options as its tags, annotations and kube-env name them (any
# case): the option's name -> the `NodeGroupOptions` field it sets, by the value's form.
_FRACTION_OPTIONS = {
    "scaledownutilizationthreshold": "scale_down_utilization_threshold",
    "scaledowngpuutilizationthreshold": "scale_down_gpu_utilization_threshold",
}
_DURATION_OPTIONS = {
    "scaledownunneededtime": "scale_down_unneeded_time",
    "scaledownunreadytime": "scale_down_unready_time",
    "maxnodeprovisiontime": "max_node_provision_time",
}
_BOOL_OPTIONS = {
    "ignoredaemonsetsutilization": "ignore_daemonsets_utilization",
    "zeroormaxnodescaling": "zero_or_max_node_scaling",
}
GROUP_OPTION_NAMES = tuple(sorted({*_FRACTION_OPTIONS, *_DURATION_OPTIONS, *_BOOL_OPTIONS}))
# Go's strconv.ParseBool, as CA reads these options.
_TRUE = frozenset({"1", "t", "true"})
_FALSE = frozenset({"0", "f", "false"})


class GroupOptionError(ValueError):
    """A per-group option whose name or value is not of the expected form; `expected`
    says what it should be, for the provider's error that names the tag or annotation."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


def parse_group_option(name: str, raw: str) -> tuple[str, float | timedelta | bool]:
    """One of CA's per-group autoscaling options (`scaledownunneededtime`, ... in any case)
    and its value, as the `NodeGroupOptions` field it sets and the parsed value. Raises
    `GroupOptionError` naming the expected form."""
    key = name.lower()
    if key in _FRACTION_OPTIONS:
        try:
            number = float(raw)
        except ValueError:
            number = -1.0
        if not 0.0 <= number <= 1.0:
            raise GroupOptionError("a number between 0 and 1, e.g. 0.5")
        return _FRACTION_OPTIONS[key], number
    if key in _DURATION_OPTIONS:
        try:
            return _DURATION_OPTIONS[key], parse_duration(raw)
        except ValueError:
            raise GroupOptionError("a duration such as 10m, 1h30m or 45s") from None
    if key in _BOOL_OPTIONS:
        lowered = raw.lower()
        if lowered not in _TRUE | _FALSE:
            raise GroupOptionError("true or false")
        return _BOOL_OPTIONS[key], lowered in _TRUE
    raise GroupOptionError("an option name among " + ", ".join(GROUP_OPTION_NAMES))


