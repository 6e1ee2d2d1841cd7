"""Scale targets named by `--target` (`deployment/coredns,replicaset/foo`)."""

from __future__ import annotations

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
    "(e.g. deployment/coredns)"
)


@dataclass(frozen=True)
class Target:
    """One workload scaled through its Scale subresource."""

    resource: str  # plural resource: deployments, replicasets, ...
    name: str

    @property
    def kind(self) -> str:
        return _KINDS[self.resource]

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


def parse_target(text: str) -> Target:
    """Parse one `kind/name`; the kind is case-insensitive, the name is kept as given."""
    kind, sep, name = text.strip().partition("/")
    resource = _RESOURCES.get(kind.lower())
    if not sep or resource is None or not name or "/" in name:
        raise ValueError(f"expected {TARGET_FORM}, got {text!r}")
    return Target(resource=resource, name=name)


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
