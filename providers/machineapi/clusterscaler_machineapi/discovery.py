"""`--node-group-auto-discovery=clusterapi:namespace=...,clusterName=...,<label>=<value>`.

A scalable resource is kept when it matches any one spec: its namespace, its cluster name
(`spec.clusterName`, else the cluster-name label) and every other key as a label equal to
the given value. Without specs every annotated resource is a node group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterscaler.api import ConfigurationError, discovery_params

if TYPE_CHECKING:
    from clusterscaler_machineapi.objects import ScalableResource

DISCOVERER = "clusterapi"
FORM = "clusterapi:namespace=<ns>,clusterName=<name>,<label>=<value>,..."


@dataclass(frozen=True, slots=True)
class DiscoverySpec:
    namespace: str = ""
    cluster_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)

    def matches(self, resource: ScalableResource) -> bool:
        if self.namespace and self.namespace != resource.namespace:
            return False
        if self.cluster_name and self.cluster_name != resource.cluster_name:
            return False
        return all(resource.labels.get(k) == v for k, v in self.labels.items())


def parse_discovery_spec(text: str) -> DiscoverySpec:
    flag = f"--node-group-auto-discovery={text!r}"
    rest = discovery_params(text, DISCOVERER, "machineapi", FORM)
    namespace = cluster_name = ""
    labels: dict[str, str] = {}
    for item in rest.split(","):
        item = item.strip()
        if not item:
            continue
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise ConfigurationError(f"{flag}: {item!r} must be key=value; expected {FORM}")
        if key == "namespace":
            namespace = value
        elif key == "clusterName":
            cluster_name = value
        else:
            if key in labels:
                raise ConfigurationError(f"{flag}: label {key!r} is given twice")
            labels[key] = value
    return DiscoverySpec(namespace=namespace, cluster_name=cluster_name, labels=labels)


def parse_discovery_specs(values: Iterable[str]) -> list[DiscoverySpec]:
    return [parse_discovery_spec(v) for v in values if v.strip()]


def allowed(specs: Sequence[DiscoverySpec], resource: ScalableResource) -> bool:
    return not specs or any(spec.matches(resource) for spec in specs)


def namespaces_to_watch(specs: Sequence[DiscoverySpec], default: str | None) -> list[str] | None:
    """Namespaces to list in, or None for all namespaces.

    When every spec names a namespace only those are listed; with no specs the API group's
    default (OpenShift's `openshift-machine-api`) applies.
    """
    if not specs:
        return [default] if default else None
    if all(spec.namespace for spec in specs):
        return sorted({spec.namespace for spec in specs})
    return None
