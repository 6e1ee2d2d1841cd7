"""Scale targets named by `--target` (`deployment/coredns,replicaset/foo`).

Besides the four built-in kinds, any resource with a Scale subresource can be named as
`<resource>.<group>/<name>` or `<resource>.<version>.<group>/<name>` (for example
`machinedeployments.cluster.x-k8s.io/workers`); its version, when not given, and its
plural name are found through API discovery.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# kind as users write it (singular or plural, any case) -> the resource the Scale
# subresource hangs off.
_RESOURCES = {
    "deployment": "deployments",
    "deployments": "deployments",
    "replicaset": "replicasets",
    "replicasets": "replicasets",
    "statefulset": "statefulsets",
    "statefulsets": "statefulsets",
    "replicationcontroller": "replicationcontrollers",
    "replicationcontrollers": "replicationcontrollers",
}
_KINDS = {
    "deployments": "deployment",
    "replicasets": "replicaset",
    "statefulsets": "statefulset",
    "replicationcontrollers": "replicationcontroller",
}
TARGET_FORM = (
    "<kind>/<name> with kind deployment, replicaset, statefulset or replicationcontroller "
    "(e.g. deployment/coredns), or <resource>.<group>/<name> for a custom resource with a "
    "scale subresource"
)
_VERSION = re.compile(r"^v\d+((alpha|beta)\d+)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Target:
    """One workload scaled through its Scale subresource."""

    resource: str  # built-in: the plural (deployments, ...); custom: as the user wrote it
    name: str
    group: str | None = None  # None for the built-in kinds
    version: str | None = None  # custom resources only; None: the group's preferred one

    @property
    def custom(self) -> bool:
        return self.group is not None

    @property
    def kind(self) -> str:
        if self.group is None:
            return _KINDS[self.resource]
        version = f".{self.version}" if self.version else ""
        return f"{self.resource}{version}.{self.group}"

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


def _custom(kind: str) -> tuple[str, str, str | None] | None:
    parts = kind.split(".")
    if len(parts) < 2 or not all(_DNS_LABEL.match(p) for p in parts):
        return None
    if len(parts) >= 3 and _VERSION.match(parts[1]):
        return parts[0], ".".join(parts[2:]), parts[1]
    return parts[0], ".".join(parts[1:]), None


def parse_target(text: str) -> Target:
    """Parse one `kind/name`; the kind is case-insensitive, the name is kept as given."""
    kind, sep, name = text.strip().partition("/")
    if not sep or not name or "/" in name:
        raise ValueError(f"expected {TARGET_FORM}, got {text!r}")
    resource = _RESOURCES.get(kind.lower())
    if resource is not None:
        return Target(resource=resource, name=name)
    custom = _custom(kind.lower())
    if custom is None:
        raise ValueError(f"expected {TARGET_FORM}, got {text!r}")
    resource, group, version = custom
    return Target(resource=resource, name=name, group=group, version=version)


def parse_targets(text: str) -> tuple[Target, ...]:
    """Parse the comma separated `--target` list; duplicates are dropped."""
    targets: list[Target] = []
    for part in text.split(","):
        if not part.strip():
            raise ValueError(f"expected {TARGET_FORM}, comma separated, got {text!r}")
        target = parse_target(part)
        if target not in targets:
            targets.append(target)
    return tuple(targets)
