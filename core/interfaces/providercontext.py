"""What a cloud provider's factory receives: the options, and where the autoscaler runs.

`registry.add_cloud_provider(name, factory)` registers `factory(context: ProviderContext)
-> CloudProvider`. The context says whether the autoscaler talks to a real API server
(`kube_api`) or drives the in-memory cluster of `clusterscaler simulate` (`cluster`, on a
virtual `clock`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.interfaces.clusterview import Clock, ClusterSource

__all__ = ["KubeApiClient", "ProviderContext"]


class KubeApiClient(Protocol):
    """A configured Kubernetes API client: the official `kubernetes.client.ApiClient`.

    Hand it to the client's generated API classes (`kubernetes.client.CoreV1Api(api)`,
    `CustomObjectsApi(api)`), or send a request of your own with `call_api` (pass
    `_preload_content=False` to read the raw JSON, which is much faster than the generated
    models for long lists).
    """

    def call_api(self, resource_path: str, method: str, *args: object, **kwargs: object) -> object:
        """Send one request to the API server (the `kubernetes.client.ApiClient` call)."""
        ...

    def close(self) -> None:
        """Close the client's connection pool."""
        ...


@dataclass
class ProviderContext:
    """What a cloud provider factory receives.

    `options` carries every parsed flag (including `--cloud-config`, `--nodes` and
    `--node-group-auto-discovery`, and plugin flags in `options.extra`). `kube_api` is a
    configured Kubernetes client when the autoscaler talks to a real API server, for
    providers that keep state in Kubernetes objects (Machine API, kwok, `sim`); `None`
    offline. `clusterscaler run` gives the provider a client of its own, rate limited by
    --kube-client-qps apart from the loop's, as upstream's providers build their own. `cluster` is the in-memory cluster and `clock` its virtual clock during
    `clusterscaler simulate` and `explain` of a snapshot; both `None` against a real
    cluster.
    """

    options: AutoscalingOptions
    kube_api: KubeApiClient | None = None
    cluster: ClusterSource | None = None
    clock: Clock | None = None
