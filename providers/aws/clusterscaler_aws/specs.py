"""Parsing `--nodes=<min>:<max>:<asg>` and `--node-group-auto-discovery=asg:tag=...`.

Both flags behave as in Cluster Autoscaler: an explicit group keeps the min and max given on
the command line, a discovered group takes them from the ASG. A discovery spec lists tags an
ASG must all carry; an entry without `=` matches the tag key whatever its value, `key=value`
matches the value too. Several `asg:tag=` specs are alternatives (an ASG matching any of
them is managed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from clusterscaler.api import (
    ConfigurationError,
    NodeGroupFlags,
    discovery_params,
    parse_nodes_spec,
)
from clusterscaler.api import NodeGroupSpec as KitNodeGroupSpec

NODES_FORM = "<min>:<max>:<asg-name> with 0 <= min <= max, e.g. 1:10:my-asg"
DISCOVERY_FORM = (
    "asg:tag=<key>[=<value>][,<key>[=<value>]...], e.g. "
    "asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/my-cluster"
)

# The `--nodes` entry of the provider kit: an ASG by its name, as the flag gives it.
NodeGroupSpec = KitNodeGroupSpec[str]


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
    return parse_nodes_spec(value, NODES_FORM, lambda name: None if name else "the ASG name is empty")


def parse_discovery_spec(value: str) -> DiscoverySpec:
    """Parse one `--node-group-auto-discovery` value for the `asg` discoverer."""
    params = discovery_params(value, "asg", "aws", DISCOVERY_FORM)
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


# Both flags as the provider reads them (`NODE_GROUP_FLAGS.read(options)`); an ASG named
# twice in --nodes is refused.
NODE_GROUP_FLAGS = NodeGroupFlags(
    "aws", parse_node_group_spec, lambda s: s.name, lambda s: f"ASG {s.name!r}", parse_discovery_spec,
    nodes_form="<min>:<max>:<asg-name>", discovery_form="asg:tag=<key>[=<value>],...",
)
