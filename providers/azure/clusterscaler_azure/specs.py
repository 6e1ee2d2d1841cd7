"""Parsing `--nodes=<min>:<max>:<vmss>` and `--node-group-auto-discovery=label:<k>=<v>,...`.

As in Cluster Autoscaler: an explicit scale set keeps the min and max of the command line; a
discovered one takes them from its `min` and `max` tags, else from `min=` / `max=` in the
discovery spec. A discovery spec lists tags a scale set must all carry with these values;
with several specs, a scale set must match every one of them (upstream's rule), and the
highest `min` and the lowest `max` given by the specs apply. Tag names are compared without
regard to case, as Azure treats them; values are compared exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from clusterscaler.api import (
    ConfigurationError,
    NodeGroupFlags,
    discovery_params,
    parse_nodes_spec,
)
from clusterscaler.api import NodeGroupSpec as KitNodeGroupSpec

NODES_FORM = "<min>:<max>:<vmss-name> with 0 <= min <= max and max >= 1, e.g. 0:10:aks-pool-12345678-vmss"
DISCOVERY_FORM = (
    "label:<tag>=<value>[,<tag>=<value>...][,min=<n>][,max=<n>], e.g. "
    "label:cluster-autoscaler-enabled=true,cluster-autoscaler-name=my-cluster"
)
# The `--nodes` entry of the provider kit: a scale set by its name, as the flag gives it.
NodeGroupSpec = KitNodeGroupSpec[str]

MIN_TAG = "min"
MAX_TAG = "max"


@dataclass(frozen=True, slots=True)
class DiscoverySpec:
    """One `label:` auto-discovery spec: tags to match (keys lower-cased) and default limits."""

    selector: Mapping[str, str]
    min_size: int | None = None
    max_size: int | None = None

    def matches(self, tags: Mapping[str, str]) -> bool:
        lowered = lower_keys(tags)
        return all(lowered.get(key) == value for key, value in self.selector.items())


def lower_keys(tags: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in tags.items()}


def _name_problem(name: str) -> str | None:
    return None if name and "/" not in name else f"{name!r} is not a scale set name"


def parse_node_group_spec(value: str) -> NodeGroupSpec:
    """Parse one `--nodes` value."""
    return parse_nodes_spec(value, NODES_FORM, _name_problem)


def _size(value: str, key: str, text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise ConfigurationError(
            f"--node-group-auto-discovery={value!r}: {key}={text!r} is not a node count; "
            f"expected a whole number >= 0 in {DISCOVERY_FORM}"
        )
    return number


def parse_discovery_spec(value: str) -> DiscoverySpec:
    """Parse one `--node-group-auto-discovery` value for the `label` discoverer."""
    params = discovery_params(value, "label", "azure", DISCOVERY_FORM)
    selector: dict[str, str] = {}
    min_size: int | None = None
    max_size: int | None = None
    for entry in params.split(","):
        key, has_value, text = (s.strip() for s in entry.partition("="))
        if not has_value or not key or not text:
            raise ConfigurationError(
                f"--node-group-auto-discovery={value!r}: entry {entry!r} is not "
                f"<tag>=<value> with both parts non-empty; expected {DISCOVERY_FORM}"
            )
        if key == MIN_TAG:
            min_size = _size(value, key, text)
        elif key == MAX_TAG:
            max_size = _size(value, key, text)
        else:
            selector[key.lower()] = text
    if not selector:
        raise ConfigurationError(
            f"--node-group-auto-discovery={value!r}: no tag to match; expected {DISCOVERY_FORM}"
        )
    if min_size is not None and max_size is not None and max_size < min_size:
        raise ConfigurationError(
            f"--node-group-auto-discovery={value!r}: max {max_size} is below min {min_size}"
        )
    return DiscoverySpec(selector=MappingProxyType(selector), min_size=min_size, max_size=max_size)


@dataclass(frozen=True, slots=True)
class DiscoveredLimits:
    """What the discovery specs say about a matching scale set."""

    min_size: int | None
    max_size: int | None


def match_discovery(
    specs: Iterable[DiscoverySpec], tags: Mapping[str, str]
) -> DiscoveredLimits | None:
    """`None` unless the tags match every spec; else the strictest limits the specs give."""
    specs = list(specs)
    if not specs:
        return None
    min_size: int | None = None
    max_size: int | None = None
    for spec in specs:
        if not spec.matches(tags):
            return None
        if spec.min_size is not None:
            min_size = spec.min_size if min_size is None else max(min_size, spec.min_size)
        if spec.max_size is not None:
            max_size = spec.max_size if max_size is None else min(max_size, spec.max_size)
    return DiscoveredLimits(min_size=min_size, max_size=max_size)


def limits_from_tags(
    vmss: str, tags: Mapping[str, str], discovered: DiscoveredLimits
) -> tuple[int, int]:
    """The min and max of a discovered scale set: its `min`/`max` tags, else the spec's.

    Raises `ConfigurationError` naming the scale set, the tag and the expected form.
    """
    lowered = lower_keys(tags)

    def one(tag: str, fallback: int | None) -> int:
        raw = lowered.get(tag)
        if raw is None:
            if fallback is None:
                raise ConfigurationError(
                    f"VMSS {vmss!r}: tag {tag!r} is missing; expected a whole number >= 0 "
                    f"(or {tag}=<n> in the discovery spec)"
                )
            return fallback
        try:
            number = int(raw.strip())
        except ValueError:
            number = -1
        if number < 0:
            raise ConfigurationError(
                f"VMSS {vmss!r}: tag {tag!r}={raw!r}: expected a whole number >= 0"
            )
        return number

    min_size = one(MIN_TAG, discovered.min_size)
    max_size = one(MAX_TAG, discovered.max_size)
    if max_size < min_size:
        raise ConfigurationError(
            f"VMSS {vmss!r}: tags min={min_size} and max={max_size}: expected min <= max"
        )
    return min_size, max_size


# Both flags as the provider reads them (`NODE_GROUP_FLAGS.read(options)`); a scale set
# named twice in --nodes (in any case) is refused.
NODE_GROUP_FLAGS = NodeGroupFlags(
    "azure", parse_node_group_spec, lambda s: s.name.lower(), lambda s: f"scale set {s.name!r}",
    parse_discovery_spec, nodes_form="<min>:<max>:<vmss-name>", discovery_form="label:<tag>=<value>[,...]",
)
