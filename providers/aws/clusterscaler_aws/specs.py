"""Parsing `--nodes=<min>:<max>:<asg>` and `--node-group-auto-discovery=asg:tag=...`.

Both flags behave as in Cluster Autoscaler: an explicit group keeps the min and max given on
the command line, a discovered group takes them from the ASG. A discovery spec lists tags an
ASG must all carry; an entry without `=` matches the tag key whatever its value, `key=value`
matches the value too. Several `asg:tag=` specs are alternatives (an ASG matching any of
them is managed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from clusterscaler.api import ConfigurationError

NODES_FORM = "<min>:<max>:<asg-name> with 0 <= min <= max, e.g. 1:10:my-asg"
DISCOVERY_FORM = (
    "asg:tag=<key>[=<value>][,<key>[=<value>]...], e.g. "
    "asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/my-cluster"
)


@dataclass(frozen=True, slots=True)
class NodeGroupSpec:
    """One `--nodes` entry: an ASG managed with the given limits."""

    name: str
    min_size: int
    max_size: int


@dataclass(frozen=True, slots=True)
class DiscoverySpec:
    """One `asg:tag=` auto-discovery spec. `None` as a value matches any value of the key."""

    tags: Mapping[str, str | None]

    def matches(self, asg_tags: Mapping[str, str]) -> bool:
        """Whether an ASG with these tags is selected by this spec."""
        for key, value in self.tags.items():
            if key not in asg_tags:
                return False
            if value is not None and asg_tags[key] != value:
                return False
        return True

    def filters(self) -> list[dict[str, object]]:
        """DescribeAutoScalingGroups filters selecting the same ASGs (ANDed by AWS)."""
        result: list[dict[str, object]] = []
        for key, value in self.tags.items():
            if value is None:
                result.append({"Name": "tag-key", "Values": [key]})
            else:
                result.append({"Name": f"tag:{key}", "Values": [value]})
        return result


def parse_node_group_spec(value: str) -> NodeGroupSpec:
    """Parse one `--nodes` value."""
    parts = value.split(":", 2)
    if len(parts) != 3:
        raise ConfigurationError(f"--nodes={value!r}: expected {NODES_FORM}")
    min_text, max_text, name = (p.strip() for p in parts)
    try:
        min_size = int(min_text)
        max_size = int(max_text)
    except ValueError:
        raise ConfigurationError(
            f"--nodes={value!r}: min and max must be integers; expected {NODES_FORM}"
        ) from None
    if not name:
        raise ConfigurationError(f"--nodes={value!r}: the ASG name is empty; expected {NODES_FORM}")
    if min_size < 0:
        raise ConfigurationError(f"--nodes={value!r}: min {min_size} is negative; expected {NODES_FORM}")
    if max_size < min_size:
        raise ConfigurationError(
            f"--nodes={value!r}: max {max_size} is below min {min_size}; expected {NODES_FORM}"
        )
    if max_size == 0:
        raise ConfigurationError(f"--nodes={value!r}: max must be at least 1; expected {NODES_FORM}")
    return NodeGroupSpec(name=name, min_size=min_size, max_size=max_size)


def parse_discovery_spec(value: str) -> DiscoverySpec:
    """Parse one `--node-group-auto-discovery` value for the `asg` discoverer."""
    discoverer, sep, params = value.partition(":")
    if not sep:
        raise ConfigurationError(f"--node-group-auto-discovery={value!r}: expected {DISCOVERY_FORM}")
    if discoverer != "asg":
        raise ConfigurationError(
            f"--node-group-auto-discovery={value!r}: unsupported discoverer {discoverer!r}; "
            f"the aws provider supports only {DISCOVERY_FORM}"
        )
    key, sep, tag_list = params.partition("=")
    if not sep or key != "tag":
        raise ConfigurationError(
            f"--node-group-auto-discovery={value!r}: the only parameter is 'tag'; "
            f"expected {DISCOVERY_FORM}"
        )
    tags: dict[str, str | None] = {}
    for entry in tag_list.split(","):
        entry = entry.strip()
        if not entry:
            raise ConfigurationError(
                f"--node-group-auto-discovery={value!r}: empty tag entry; expected {DISCOVERY_FORM}"
            )
        tag_key, has_value, tag_value = entry.partition("=")
        if not tag_key:
            raise ConfigurationError(
                f"--node-group-auto-discovery={value!r}: tag entry {entry!r} has no key; "
                f"expected {DISCOVERY_FORM}"
            )
        tags[tag_key] = tag_value if has_value else None
    return DiscoverySpec(tags=MappingProxyType(tags))


def parse_node_group_specs(values: Iterable[str]) -> list[NodeGroupSpec]:
    """Parse every `--nodes` value; an ASG named twice is an error."""
    specs: list[NodeGroupSpec] = []
    seen: set[str] = set()
    for value in values:
        spec = parse_node_group_spec(value)
        if spec.name in seen:
            raise ConfigurationError(f"--nodes={value!r}: ASG {spec.name!r} is given more than once")
        seen.add(spec.name)
        specs.append(spec)
    return specs


def parse_discovery_specs(values: Iterable[str]) -> list[DiscoverySpec]:
    return [parse_discovery_spec(v) for v in values]
