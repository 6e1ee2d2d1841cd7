"""``KubeClusterSource``: the cluster as the loop sees it, from list+watch caches."""

from __future__ import annotations

from functools import partial
from typing import Any, cast

import structlog
from clusterscaler.model import (
    ClusterObjects,
    Node,
    Pod,
    parse_config_map,
    parse_controller,
    parse_csinode,
    parse_daemonset,
    parse_device_class,
    parse_namespace,
    parse_node,
    parse_pdb,
    parse_pod,
    parse_pod_template,
    parse_provisioning_request,
    parse_pv,
    parse_pvc,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
    parse_storage_class,
)
from clusterscaler.model.capacitybuffer import (
    CAPACITY_BUFFER_GROUP,
    parse_capacity_buffer,
    parse_resource_quota,
)
from clusterscaler.model.capacityquota import (
    CAPACITY_QUOTA_GROUP,
    CAPACITY_QUOTA_PLURAL,
    CAPACITY_QUOTA_VERSION,
    parse_capacity_quota,
)
from clusterscaler.model.provisioning import PROVISIONING_REQUEST_GROUP
from kubernetes import client as k8s

from .informer import Informer, ListerSpec, wait_all
from .podobserver import UnschedulablePodObserver

__all__ = ["CacheNotSyncedError", "KubeClusterSource", "StaleCacheError", "lister_specs"]

log = structlog.get_logger()


class CacheNotSyncedError(RuntimeError):
    """A snapshot was asked for before every cache completed its first list."""


class StaleCacheError(RuntimeError):
    """A cache a destructive action depends on no longer follows the cluster."""


class UnreadablePodsError(RuntimeError):
    """A node runs pods the model cannot read: nobody can say what it runs, so it is not
    drained or deleted."""


def _pod_node(pod: Pod) -> str:
    return pod.node_name


def lister_specs(
    api_client: Any,
    namespace: str,
    *,
    provisioning_requests: bool = False,
    capacity_buffers: bool = False,
    capacity_quotas: bool = False,
) -> list[ListerSpec[Any]]:
    """The resources the autoscaler reads: cluster-wide, plus ConfigMaps in ``namespace``;
    with ``provisioning_requests`` (--enable-provisioning-requests), ProvisioningRequests
    and PodTemplates; with ``capacity_buffers`` (--capacity-buffer-controller-enabled or
    --capacity-buffer-pod-injection-enabled), CapacityBuffers, ResourceQuotas and
    PodTemplates; with ``capacity_quotas`` (--capacity-quotas-enabled), CapacityQuotas."""
    core = k8s.CoreV1Api(api_client)
    apps = k8s.AppsV1Api(api_client)
    batch = k8s.BatchV1Api(api_client)
    policy = k8s.PolicyV1Api(api_client)
    storage = k8s.StorageV1Api(api_client)
    resource = k8s.ResourceV1Api(api_client)
    specs: list[ListerSpec[Any]] = [
        ListerSpec("nodes", "Node", core.list_node, parse_node),
        ListerSpec(
            "pods",
            "Pod",
            core.list_pod_for_all_namespaces,
            parse_pod,
            index_by=_pod_node,
        ),
        ListerSpec(
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            policy.list_pod_disruption_budget_for_all_namespaces,
            parse_pdb,
        ),
        ListerSpec(
            "daemonsets", "DaemonSet", apps.list_daemon_set_for_all_namespaces, parse_daemonset
        ),
        ListerSpec(
            "replicasets", "ReplicaSet", apps.list_replica_set_for_all_namespaces, parse_controller
        ),
        ListerSpec(
            "replicationcontrollers",
            "ReplicationController",
            core.list_replication_controller_for_all_namespaces,
            parse_controller,
        ),
        ListerSpec(
            "statefulsets",
            "StatefulSet",
            apps.list_stateful_set_for_all_namespaces,
            parse_controller,
        ),
        ListerSpec("jobs", "Job", batch.list_job_for_all_namespaces, parse_controller),
        ListerSpec("persistentvolumes", "PersistentVolume", core.list_persistent_volume, parse_pv),
        ListerSpec(
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            core.list_persistent_volume_claim_for_all_namespaces,
            parse_pvc,
        ),
        ListerSpec(
            "storageclasses", "StorageClass", storage.list_storage_class, parse_storage_class
        ),
        ListerSpec("csinodes", "CSINode", storage.list_csi_node, parse_csinode),
        ListerSpec(
            "configmaps",
            "ConfigMap",
            core.list_namespaced_config_map,
            parse_config_map,
            {"namespace": namespace},
        ),
        ListerSpec("namespaces", "Namespace", core.list_namespace, parse_namespace),
        # DRA (resource.k8s.io/v1, Kubernetes 1.34+): a cluster that does not serve it has
        # none of these, and its caches are synced and empty.
        ListerSpec("resourceslices", "ResourceSlice", resource.list_resource_slice,
                   parse_resource_slice, optional=True),
        ListerSpec("deviceclasses", "DeviceClass", resource.list_device_class,
                   parse_device_class, optional=True),
        ListerSpec("resourceclaims", "ResourceClaim",
                   resource.list_resource_claim_for_all_namespaces, parse_resource_claim,
                   optional=True),
        ListerSpec("resourceclaimtemplates", "ResourceClaimTemplate",
                   resource.list_resource_claim_template_for_all_namespaces,
                   parse_resource_claim_template, optional=True),
    ]
    if provisioning_requests:
        custom = k8s.CustomObjectsApi(api_client)
        specs += [
            # A cluster without the CRD has no requests: its cache is synced and empty.
            ListerSpec(
                "provisioningrequests",
                "ProvisioningRequest",
                partial(
                    custom.list_cluster_custom_object,
                    PROVISIONING_REQUEST_GROUP,
                    "v1",
                    "provisioningrequests",
                ),
                parse_provisioning_request,
                optional=True,
            ),
        ]
    if provisioning_requests or capacity_buffers:
        # The pods of requests and of buffers are shaped by PodTemplates.
        specs.append(
            ListerSpec(
                "podtemplates",
                "PodTemplate",
                core.list_pod_template_for_all_namespaces,
                parse_pod_template,
            )
        )
    if capacity_buffers:
        custom = k8s.CustomObjectsApi(api_client)
        specs += [
            # A cluster without the CRD has no buffers: its cache is synced and empty.
            ListerSpec(
                "capacitybuffers",
                "CapacityBuffer",
                partial(
                    custom.list_cluster_custom_object,
                    CAPACITY_BUFFER_GROUP,
                    "v1beta1",
                    "capacitybuffers",
                ),
                parse_capacity_buffer,
                optional=True,
            ),
            ListerSpec(
                "resourcequotas",
                "ResourceQuota",
                core.list_resource_quota_for_all_namespaces,
                parse_resource_quota,
            ),
        ]
    if capacity_quotas:
        custom = k8s.CustomObjectsApi(api_client)
        # A cluster without the CRD has no quotas: its cache is synced and empty.
        specs.append(
            ListerSpec(
                CAPACITY_QUOTA_PLURAL,
                "CapacityQuota",
                partial(
                    custom.list_cluster_custom_object,
                    CAPACITY_QUOTA_GROUP,
                    CAPACITY_QUOTA_VERSION,
                    CAPACITY_QUOTA_PLURAL,
                ),
                parse_capacity_quota,
                optional=True,
            )
        )
    return specs


class KubeClusterSource:
    """A ``ClusterSource`` backed by one informer per resource.

    ``snapshot()`` raises ``CacheNotSyncedError`` until every informer has listed once, so
    the loop never decides on a partial view of the cluster. ``stale_caches()`` names the
    caches that stopped following the cluster (``StaleSource``): the loop takes no
    destructive action on them. ``unschedulable_pods`` is told of every pod the pod cache
    takes in, and says when one newly became unschedulable (--frequent-loops-enabled).
    """

    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str = "kube-system",
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
        stale_after: float | None = None,
        provisioning_requests: bool = False,
        capacity_buffers: bool = False,
        capacity_quotas: bool = False,
    ) -> None:
        self.unschedulable_pods = UnschedulablePodObserver()
        self.informers: dict[str, Informer[Any]] = {
            spec.resource: Informer(
                spec,
                page_size=page_size,
                watch_timeout_seconds=watch_timeout_seconds,
                stale_after=stale_after,
                observer=self.unschedulable_pods if spec.resource == "pods" else None,
            )
            for spec in lister_specs(
                api_client,
                namespace,
                provisioning_requests=provisioning_requests,
                capacity_buffers=capacity_buffers,
                capacity_quotas=capacity_quotas,
            )
        }

    def start(self) -> None:
        for informer in self.informers.values():
            informer.start()

    def stop(self) -> None:
        for informer in self.informers.values():
            informer.stop()

    def __enter__(self) -> KubeClusterSource:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def has_synced(self) -> bool:
        return all(i.has_synced for i in self.informers.values())

    def wait_for_sync(self, timeout: float) -> bool:
        """Block until every cache has synced; False if ``timeout`` seconds passed first."""
        return wait_all(list(self.informers.values()), timeout)

    def stale_caches(self) -> tuple[str, ...]:
        """Each cache that may no longer follow the cluster, as ``resource: why``."""
        return tuple(
            f"{name}: {reason}"
            for name, informer in sorted(self.informers.items())
            if (reason := informer.stale_reason())
        )

    def cached_node(self, name: str) -> Node | None:
        """Node ``name`` as the node cache last saw it (None: not cached). For choosing how
        to write it, never for deciding about it: the cache may lag the cluster."""
        node = self.informers["nodes"].get(name)
        return node if isinstance(node, Node) else None

    def pods_on_node(self, name: str) -> list[Pod]:
        """The cached pods bound to node ``name`` (``NodePodsSource``): the actuator re-reads
        a node's pods after tainting it, and a whole snapshot per deleted node would copy
        every cache each time. Raises ``StaleCacheError`` when the pod cache no longer
        follows the cluster: a pod bound since would be missed, and the node deleted with
        it."""
        pods = self.informers["pods"]
        if not pods.has_synced:
            raise CacheNotSyncedError("Kubernetes caches have not synced yet: pods")
        reason = pods.stale_reason()
        if reason:
            raise StaleCacheError(f"the pod cache is stale: {reason}")
        unreadable = [u for u in pods.unreadable() if u.node_name == name]
        if unreadable:
            raise UnreadablePodsError(
                f"node {name} runs pods that cannot be read: "
                + "; ".join(f"{u.key}: {u.error}" for u in unreadable[:3])
                + (f" (and {len(unreadable) - 3} more)" if len(unreadable) > 3 else "")
            )
        return cast(list[Pod], pods.indexed(name))

    def snapshot(self) -> ClusterObjects:
        missing = [name for name, i in self.informers.items() if not i.has_synced]
        if missing:
            raise CacheNotSyncedError(
                "Kubernetes caches have not synced yet: " + ", ".join(sorted(missing))
            )
        get = self.informers
        return ClusterObjects(
            nodes=get["nodes"].items(),
            pods=get["pods"].items(),
            pdbs=get["poddisruptionbudgets"].items(),
            daemonsets=get["daemonsets"].items(),
            controllers=[
                *get["replicasets"].items(),
                *get["replicationcontrollers"].items(),
                *get["statefulsets"].items(),
                *get["jobs"].items(),
            ],
            pvs=get["persistentvolumes"].items(),
            pvcs=get["persistentvolumeclaims"].items(),
            storage_classes=get["storageclasses"].items(),
            # Listed whole: a claim the cache does not hold does not exist.
            storage_listed=True,
            csinodes=get["csinodes"].items(),
            config_maps=get["configmaps"].items(),
            namespaces=get["namespaces"].items(),
            resource_slices=get["resourceslices"].items(),
            device_classes=get["deviceclasses"].items(),
            resource_claims=get["resourceclaims"].items(),
            resource_claim_templates=get["resourceclaimtemplates"].items(),
            provisioning_requests=(
                get["provisioningrequests"].items() if "provisioningrequests" in get else []
            ),
            pod_templates=get["podtemplates"].items() if "podtemplates" in get else [],
            capacity_buffers=(
                get["capacitybuffers"].items() if "capacitybuffers" in get else []
            ),
            resource_quotas=get["resourcequotas"].items() if "resourcequotas" in get else [],
            capacity_quotas=(
                get[CAPACITY_QUOTA_PLURAL].items() if CAPACITY_QUOTA_PLURAL in get else []
            ),
            unreadable=[u for informer in get.values() for u in informer.unreadable()],
        )
