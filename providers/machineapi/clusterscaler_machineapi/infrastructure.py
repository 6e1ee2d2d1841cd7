"""Infrastructure machine templates: what a new machine of a Cluster API group will be.

Infrastructure providers that implement Cluster API's opt-in autoscaling from zero fill
`status.capacity` (resource quantities) and `status.nodeInfo` (`operatingSystem`,
`architecture`) of the template a MachineSet or MachineDeployment references in
`spec.template.spec.infrastructureRef`. Templates are read with a GET and kept for a while:
their status changes rarely, and a group at zero is asked for its template node on every
loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
from clusterscaler.api import CloudProviderError, ConfigurationError, TtlCache

from clusterscaler_machineapi.kubeapi import KubeApi, KubeApiError
from clusterscaler_machineapi.objects import InfraRef, ScalableResource

log = structlog.get_logger()

# How long a template read (or a failure to read it) is reused.
TEMPLATE_TTL = 300.0
FAILURE_TTL = 30.0


@dataclass(frozen=True, slots=True)
class InfraTemplate:
    """The parts of an infrastructure machine template scale from zero reads."""

    ref: str  # "<Kind> <namespace>/<name>", for messages
    capacity: Mapping[str, Any] = field(default_factory=dict)  # status.capacity
    node_info: Mapping[str, Any] = field(default_factory=dict)  # status.nodeInfo


def parse_template(raw: Mapping[str, Any], ref: str) -> InfraTemplate:
    status = raw.get("status")
    if status is None:
        return InfraTemplate(ref=ref)
    if not isinstance(status, Mapping):
        raise ConfigurationError(f"{ref}: status: expected an object, got {status!r}")
    parts: dict[str, Mapping[str, Any]] = {}
    for key in ("capacity", "nodeInfo"):
        value = status.get(key)
        if value is None:
            parts[key] = {}
        elif isinstance(value, Mapping):
            parts[key] = value
        else:
            raise ConfigurationError(
                f"{ref}: status.{key}: expected an object of strings, got {value!r}"
            )
    return InfraTemplate(ref=ref, capacity=parts["capacity"], node_info=parts["nodeInfo"])


TemplateLookup = Callable[[ScalableResource], "InfraTemplate | None"]


class InfrastructureTemplates:
    """Reads the templates groups reference, through API discovery and GETs, with a cache.

    `__call__` returns None for a resource without `infrastructureRef`, and raises
    `ConfigurationError` (bad reference, kind not served, template missing) or
    `CloudProviderError` (the API server did not answer, or forbade the read), each naming
    the resource and the template.
    """

    def __init__(
        self,
        api: KubeApi,
        *,
        ttl: float = TEMPLATE_TTL,
        failure_ttl: float = FAILURE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._lock = threading.Lock()
        self._versions: dict[str, str] | None = None
        self._kinds: dict[tuple[str, str], dict[str, str]] = {}
        # A failed read is an answer too, kept for less long.
        self._cache: TtlCache[InfraTemplate | Exception] = TtlCache(
            ttl, clock, ttl_of=lambda result: failure_ttl if isinstance(result, Exception) else ttl
        )

    def __call__(self, resource: ScalableResource) -> InfraTemplate | None:
        if resource.infrastructure_ref_error:
            raise ConfigurationError(resource.infrastructure_ref_error)
        ref = resource.infrastructure_ref
        if ref is None:
            return None
        key = (ref.group, ref.version, ref.kind, resource.namespace, ref.name)
        result = self._cache.get_or(key, lambda: self._read_once(ref, resource))
        if isinstance(result, Exception):
            raise result
        return result

    def _read_once(self, ref: InfraRef, resource: ScalableResource) -> InfraTemplate | Exception:
        # One read at a time: discovery's answers are kept between reads.
        with self._lock:
            result = self._read(ref, resource)
            if isinstance(result, Exception):
                # Discovery may have changed too (a provider installed meanwhile).
                self._versions = None
                self._kinds.pop((ref.group, ref.version), None)
            return result

    def _read(self, ref: InfraRef, resource: ScalableResource) -> InfraTemplate | Exception:
        where = (
            f"{resource.ref}: spec.template.spec.infrastructureRef "
            f"({ref.kind} {resource.namespace}/{ref.name})"
        )
        try:
            version = ref.version or self._preferred_version(ref.group)
            if not version:
                return ConfigurationError(
                    f"{where}: API group {ref.group} is not served; expected the group of an "
                    "installed infrastructure provider"
                )
            plural = self._plural(ref.group, version, ref.kind)
            if not plural:
                return ConfigurationError(
                    f"{where}: {ref.group}/{version} serves no kind {ref.kind}; expected a "
                    "kind of that group"
                )
            raw = self._api.get(ref.group, version, plural, resource.namespace, ref.name)
            return parse_template(raw, f"{ref.kind} {resource.namespace}/{ref.name}")
        except KubeApiError as exc:
            if exc.status == 404:
                return ConfigurationError(f"{where}: the template does not exist ({exc})")
            if exc.status == 403:
                return CloudProviderError(
                    f"{where}: reading the template is forbidden; grant get on the "
                    f"{ref.group} templates ({exc})"
                )
            return CloudProviderError(f"{where}: reading the template failed: {exc}")
        except ConfigurationError as exc:
            return exc

    def _preferred_version(self, group: str) -> str:
        if self._versions is None:
            self._versions = self._api.preferred_versions()
        return self._versions.get(group, "")

    def _plural(self, group: str, version: str, kind: str) -> str:
        kinds = self._kinds.get((group, version))
        if kinds is None:
            try:
                kinds = self._api.resource_kinds(group, version)
            except KubeApiError as exc:
                if exc.status != 404:
                    raise
                kinds = {}
            self._kinds[(group, version)] = kinds
        return kinds.get(kind, "")
