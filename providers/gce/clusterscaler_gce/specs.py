"""Parsing `--nodes=<min>:<max>:<MIG>` and `--node-group-auto-discovery=mig:namePrefix=...`.

As in Cluster Autoscaler: an explicit MIG keeps the min and max given on the command line and
stays managed even when discovery would also find it; a discovery spec selects the MIGs whose
name matches `^<namePrefix>.+` (the prefix is a regular expression, normally a plain name)
and gives all of them the spec's min and max, which are both required.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterscaler.api import (
    ConfigurationError,
    NodeGroupFlags,
    check_nodes_limits,
    discovery_params,
)
from clusterscaler.api import NodeGroupSpec as KitNodeGroupSpec

from clusterscaler_gce.refs import MIG_FORM, MigRef, parse_mig

NODES_FORM = f"<min>:<max>:<MIG> with 0 <= min <= max and max >= 1, where <MIG> is {MIG_FORM}"
DISCOVERY_FORM = "mig:namePrefix=<prefix>,min=<n>,max=<m>, e.g. mig:namePrefix=gke-prod-pool,min=0,max=10"
_DISCOVERY_KEYS = ("namePrefix", "min", "max")

# The `--nodes` entry of the provider kit: a MIG by its project, zone and name.
NodeGroupSpec = KitNodeGroupSpec[MigRef]


@dataclass(frozen=True, slots=True)
class DiscoverySpec:
    """One `mig:` auto-discovery spec."""

    name_prefix: str
    pattern: re.Pattern[str]
    min_size: int
    max_size: int

    def matches(self, name: str) -> bool:
        return self.pattern.match(name) is not None

    @property
    def filter(self) -> str:
        """The instanceGroupManagers.list filter selecting the same names (GCE's `eq` takes
        an RE2 expression matching the whole name)."""
        return f"name eq {self.pattern.pattern.removeprefix('^')}"


def _size(value: str, text: str, what: str, form: str, flag: str) -> int:
    try:
        number = int(text.strip())
    except ValueError:
        raise ConfigurationError(f"{flag}={value!r}: {what} {text!r} is not an integer; expected {form}") from None
    if number < 0:
        raise ConfigurationError(f"{flag}={value!r}: {what} {number} is negative; expected {form}")
    return number


def parse_node_group_spec(value: str) -> NodeGroupSpec:
    """Parse one `--nodes` value (the MIG part may itself contain ':')."""
    parts = value.split(":", 2)
    if len(parts) != 3:
        raise ConfigurationError(f"--nodes={value!r}: expected {NODES_FORM}")
    min_size = _size(value, parts[0], "min", NODES_FORM, "--nodes")
    max_size = _size(value, parts[1], "max", NODES_FORM, "--nodes")
    check_nodes_limits(value, min_size, max_size, NODES_FORM)
    ref = parse_mig(parts[2], f"--nodes={value!r}")
    return NodeGroupSpec(name=ref, min_size=min_size, max_size=max_size)


def parse_discovery_spec(value: str) -> DiscoverySpec:
    """Parse one `--node-group-auto-discovery` value for the `mig` discoverer."""
    flag = "--node-group-auto-discovery"
    params = discovery_params(value, "mig", "gce", DISCOVERY_FORM)
    found: dict[str, str] = {}
    for entry in params.split(","):
        key, has_value, item = entry.partition("=")
        key = key.strip()
        if not has_value or not key:
            raise ConfigurationError(f"{flag}={value!r}: {entry!r} is not key=value; expected {DISCOVERY_FORM}")
        if key not in _DISCOVERY_KEYS:
            raise ConfigurationError(
                f"{flag}={value!r}: unsupported key {key!r}; supported keys are "
                f"{', '.join(_DISCOVERY_KEYS)}; expected {DISCOVERY_FORM}"
            )
        if key in found:
            raise ConfigurationError(f"{flag}={value!r}: key {key!r} is given twice; expected {DISCOVERY_FORM}")
        found[key] = item.strip()
    missing = [k for k in _DISCOVERY_KEYS if k not in found]
    if missing:
        raise ConfigurationError(f"{flag}={value!r}: {', '.join(missing)} missing; expected {DISCOVERY_FORM}")
    prefix = found["namePrefix"]
    if not prefix:
        raise ConfigurationError(f"{flag}={value!r}: empty namePrefix; expected {DISCOVERY_FORM}")
    try:
        pattern = re.compile(f"^{prefix}.+")
    except re.error as exc:
        raise ConfigurationError(
            f"{flag}={value!r}: namePrefix {prefix!r}: '^{prefix}.+' is not a valid regular "
            f"expression ({exc}); expected {DISCOVERY_FORM}"
        ) from None
    min_size = _size(value, found["min"], "min", DISCOVERY_FORM, flag)
    max_size = _size(value, found["max"], "max", DISCOVERY_FORM, flag)
    if min_size > max_size:
        raise ConfigurationError(f"{flag}={value!r}: min {min_size} is greater than max {max_size}; expected {DISCOVERY_FORM}")
    if max_size < 1:
        raise ConfigurationError(f"{flag}={value!r}: max {max_size} must be at least 1; expected {DISCOVERY_FORM}")
    return DiscoverySpec(name_prefix=prefix, pattern=pattern, min_size=min_size, max_size=max_size)


# Both flags as the provider reads them (`NODE_GROUP_FLAGS.read(options)`); a MIG named
# twice in --nodes is refused.
NODE_GROUP_FLAGS = NodeGroupFlags(
    "gce", parse_node_group_spec, lambda s: s.name, lambda s: f"MIG {s.name}", parse_discovery_spec,
    nodes_form="<min>:<max>:<MIG>", discovery_form="mig:namePrefix=<prefix>,min=<n>,max=<m>",
)
