"""Where the provider reads MachineSets, MachineDeployments and Machines from.

`WatchedListings` keeps list+watch caches (the core's informers), so a refresh costs no
API request however many machines the cluster has; the loop runs every few seconds under
the client's rate limit, and listing every machine each time would eat most of it.
`DirectListings` lists on every call: it serves reads that must be current (cancelling
machines) and deployments that cannot keep watches open.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from clusterscaler.api import CloudProviderError

from clusterscaler_machineapi.apigroups import (
    CLUSTER,
    MACHINE,
    OPENSHIFT_NAMESPACE,
    PLURALS,
    ApiGroup,
)
from clusterscaler_machineapi.discovery import DiscoverySpec, namespaces_to_watch
from clusterscaler_machineapi.kubeapi import KubeApi
from clusterscaler_machineapi.snapshot import Listing

if TYPE_CHECKING:
    from clusterscaler.api import Informer

Raw = Mapping[str, Any]


class ListingSource(Protocol):
    """The raw objects of every watched API group, as of now or of the last watch event."""

    def listings(self) -> list[Listing]: ...

    def close(self) -> None: ...


def watched_namespaces(api: ApiGroup, specs: Sequence[DiscoverySpec]) -> list[str] | None:
    return namespaces_to_watch(specs, OPENSHIFT_NAMESPACE if api.openshift else None)


class DirectListings:
    """Lists every object from the API server on each call."""

    def __init__(self, api: KubeApi, apis: Sequence[ApiGroup], specs: Sequence[DiscoverySpec]) -> None:
        self.api = api
        self.apis = tuple(apis)
        self.specs = tuple(specs)

    def list_kind(self, api: ApiGroup, kind: str, namespaces: list[str] | None) -> list[Raw]:
        plural = PLURALS[kind]
        if namespaces is None:
            return list(self.api.list(api.group, api.version, plural))
        items: list[Raw] = []
        for namespace in namespaces:
            items.extend(self.api.list(api.group, api.version, plural, namespace))
        return items

    def listing(self, api: ApiGroup, namespaces: list[str] | None) -> Listing:
        try:
            return Listing(
                api=api,
                scalable={k: self.list_kind(api, k, namespaces) for k in api.scalable_kinds},
                machines=self.list_kind(api, MACHINE, namespaces),
                clusters=self.list_kind(api, CLUSTER, namespaces) if api.clusters else (),
            )
        except CloudProviderError as exc:
            raise CloudProviderError(f"listing {api.api_version} objects failed: {exc}") from exc

    def listings(self) -> list[Listing]:
        return [self.listing(api, watched_namespaces(api, self.specs)) for api in self.apis]

    def close(self) -> None:
        """Nothing to release: every call is a plain request."""


def _raw(obj: Raw) -> Raw:
    return obj


class WatchedListings:
    """One informer per API group, kind and namespace; `listings()` reads their caches."""

    def __init__(
        self,
        api_client: Any,
        apis: Sequence[ApiGroup],
        specs: Sequence[DiscoverySpec],
        *,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
    ) -> None:
        # The informers and the kubernetes client are imported with the first watch, not with
        # the plugin that every command loads.
        from clusterscaler.api import Informer, ListerSpec
        from kubernetes import client as k8s

        custom = k8s.CustomObjectsApi(api_client)
        self.apis = tuple(apis)
        self._informers: dict[tuple[str, str], list[Informer[Raw]]] = {}
        for api in self.apis:
            namespaces = watched_namespaces(api, specs)
            kinds = (*api.scalable_kinds, MACHINE, *((CLUSTER,) if api.clusters else ()))
            for kind in kinds:
                plural = PLURALS[kind]
                lister: Callable[..., Any]
                informers = []
                targets: list[str | None] = list(namespaces) if namespaces else [None]
                for namespace in targets:
                    if namespace is None:
                        lister = functools.partial(
                            custom.list_cluster_custom_object, api.group, api.version, plural
                        )
                    else:
                        lister = functools.partial(
                            custom.list_namespaced_custom_object,
                            api.group,
                            api.version,
                            namespace,
                            plural,
                        )
                    spec = ListerSpec(
                        resource=f"{plural}.{api.group}" + (f" in {namespace}" if namespace else ""),
                        kind=kind,
                        list_function=lister,
                        parse=_raw,
                    )
                    informers.append(
                        Informer(spec, page_size=page_size, watch_timeout_seconds=watch_timeout_seconds)
                    )
                self._informers[(api.group, kind)] = informers

    def _all(self) -> list[Informer[Raw]]:
        return [i for group in self._informers.values() for i in group]

    def start(self) -> None:
        for informer in self._all():
            informer.start()

    def wait_for_sync(self, timeout: float) -> bool:
        from clusterscaler.api import wait_all

        return wait_all(self._all(), timeout)

    def listings(self) -> list[Listing]:
        waiting = [i.spec.resource for i in self._all() if not i.has_synced]
        if waiting:
            details = {
                i.spec.resource: i.last_error for i in self._all() if not i.has_synced and i.last_error
            }
            raise CloudProviderError(
                f"Machine API caches have not synced yet: {', '.join(sorted(waiting))}"
                + (f" (last errors: {details})" if details else "")
            )
        out = []
        for api in self.apis:

            def items(kind: str, api: ApiGroup = api) -> list[Raw]:
                return [obj for i in self._informers[(api.group, kind)] for obj in i.items()]

            out.append(
                Listing(
                    api=api,
                    scalable={kind: items(kind) for kind in api.scalable_kinds},
                    machines=items(MACHINE),
                    clusters=items(CLUSTER) if api.clusters else (),
                )
            )
        return out

    def close(self) -> None:
        for informer in self._all():
            informer.stop()
