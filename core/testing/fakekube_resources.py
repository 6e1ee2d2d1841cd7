"""Resource types served by the fake Kubernetes API server."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BUILTIN_RESOURCES",
    "ResourceType",
    "ScaleSubresource",
    "capacity_buffer_resources",
    "capacity_quota_resources",
    "cluster_api_resources",
    "openshift_machine_api_resources",
    "provisioning_request_resources",
]


@dataclass(frozen=True)
class ScaleSubresource:
    """Where the ``scale`` subresource reads and writes replicas (CRD ``scale`` paths)."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None


@dataclass(frozen=True)
class ResourceType:
    """One REST resource: ``/apis/<group>/<version>[/namespaces/<ns>]/<plural>``.

    ``versions`` lists every served version, preferred first; objects are stored once and
    served under any of them. ``builtin`` resources accept strategic merge patches and list
    their items without ``kind``/``apiVersion``, as the real API server does; custom
    resources answer 415 to strategic merge patches.
    """

    group: str
    versions: tuple[str, ...]
    kind: str
    plural: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    status_subresource: bool = True
    scale: ScaleSubresource | None = None
    builtin: bool = False

    def __post_init__(self) -> None:
        if not self.versions:
            raise ValueError(f"ResourceType {self.plural!r}: versions must not be empty")
        if not self.plural or self.plural != self.plural.lower():
            raise ValueError(
                f"ResourceType {self.kind!r}: plural {self.plural!r} must be a lowercase name "
                "such as 'machinesets'"
            )

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def api_version(self, version: str | None = None) -> str:
        version = version or self.versions[0]
        return f"{self.group}/{version}" if self.group else version


_SCALE = ScaleSubresource(".spec.replicas", ".status.replicas", None)


def _core(kind: str, plural: str, *, namespaced: bool = True, **kw: object) -> ResourceType:
    return ResourceType("", ("v1",), kind, plural, namespaced, builtin=True, **kw)  # type: ignore[arg-type]


def _grp(
    group: str, kind: str, plural: str, *, namespaced: bool = True, **kw: object
) -> ResourceType:
    return ResourceType(group, ("v1",), kind, plural, namespaced, builtin=True, **kw)  # type: ignore[arg-type]


BUILTIN_RESOURCES: tuple[ResourceType, ...] = (
    _core("Namespace", "namespaces", namespaced=False, short_names=("ns",)),
    _core("Node", "nodes", namespaced=False, short_names=("no",)),
    _core("Pod", "pods", short_names=("po",)),
    _core("PodTemplate", "podtemplates", status_subresource=False),
    _core("ResourceQuota", "resourcequotas", short_names=("quota",)),
    _core("ConfigMap", "configmaps", short_names=("cm",), status_subresource=False),
    _core("Secret", "secrets", status_subresource=False),
    _core("ServiceAccount", "serviceaccounts", short_names=("sa",), status_subresource=False),
    _core("Service", "services", short_names=("svc",)),
    _core("Endpoints", "endpoints", short_names=("ep",), status_subresource=False),
    _core("Event", "events", short_names=("ev",), status_subresource=False),
    _core("PersistentVolume", "persistentvolumes", namespaced=False, short_names=("pv",)),
    _core("PersistentVolumeClaim", "persistentvolumeclaims", short_names=("pvc",)),
    _core(
        "ReplicationController",
        "replicationcontrollers",
        short_names=("rc",),
        scale=_SCALE,
    ),
    _grp("apps", "Deployment", "deployments", short_names=("deploy",), scale=_SCALE),
    _grp("apps", "ReplicaSet", "replicasets", short_names=("rs",), scale=_SCALE),
    _grp("apps", "StatefulSet", "statefulsets", short_names=("sts",), scale=_SCALE),
    _grp("apps", "DaemonSet", "daemonsets", short_names=("ds",)),
    _grp("batch", "Job", "jobs"),
    _grp("batch", "CronJob", "cronjobs", short_names=("cj",)),
    _grp("policy", "PodDisruptionBudget", "poddisruptionbudgets", short_names=("pdb",)),
    _grp("coordination.k8s.io", "Lease", "leases", status_subresource=False),
    _grp("events.k8s.io", "Event", "events", short_names=("ev",), status_subresource=False),
    _grp(
        "storage.k8s.io",
        "StorageClass",
        "storageclasses",
        namespaced=False,
        short_names=("sc",),
        status_subresource=False,
    ),
    _grp("storage.k8s.io", "CSINode", "csinodes", namespaced=False, status_subresource=False),
    _grp("storage.k8s.io", "CSIDriver", "csidrivers", namespaced=False, status_subresource=False),
    _grp("storage.k8s.io", "CSIStorageCapacity", "csistoragecapacities", status_subresource=False),
    _grp("storage.k8s.io", "VolumeAttachment", "volumeattachments", namespaced=False),
    # DRA, as Kubernetes 1.34+ serves it (resource.k8s.io/v1).
    _grp("resource.k8s.io", "DeviceClass", "deviceclasses", namespaced=False,
         status_subresource=False),
    _grp("resource.k8s.io", "ResourceSlice", "resourceslices", namespaced=False,
         status_subresource=False),
    _grp("resource.k8s.io", "ResourceClaim", "resourceclaims"),
    _grp("resource.k8s.io", "ResourceClaimTemplate", "resourceclaimtemplates",
         status_subresource=False),
    _grp(
        "scheduling.k8s.io",
        "PriorityClass",
        "priorityclasses",
        namespaced=False,
        short_names=("pc",),
        status_subresource=False,
    ),
    _grp(
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "clusterroles",
        namespaced=False,
        status_subresource=False,
    ),
    _grp(
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "clusterrolebindings",
        namespaced=False,
        status_subresource=False,
    ),
    _grp("rbac.authorization.k8s.io", "Role", "roles", status_subresource=False),
    _grp("rbac.authorization.k8s.io", "RoleBinding", "rolebindings", status_subresource=False),
    _grp(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        namespaced=False,
        short_names=("crd",),
    ),
)


def openshift_machine_api_resources() -> list[ResourceType]:
    """OpenShift Machine API: ``machine.openshift.io/v1beta1`` MachineSets and Machines."""
    return [
        ResourceType(
            "machine.openshift.io",
            ("v1beta1",),
            "MachineSet",
            "machinesets",
            short_names=("ms",),
            scale=ScaleSubresource(".spec.replicas", ".status.replicas", ".status.labelSelector"),
        ),
        ResourceType("machine.openshift.io", ("v1beta1",), "Machine", "machines"),
    ]


def cluster_api_resources(versions: tuple[str, ...] = ("v1beta1",)) -> list[ResourceType]:
    """Cluster API (``cluster.x-k8s.io``): MachineSets, MachineDeployments, MachinePools, Machines."""
    scale = ScaleSubresource(".spec.replicas", ".status.replicas", ".status.selector")
    group = "cluster.x-k8s.io"
    return [
        ResourceType(
            group, versions, "MachineSet", "machinesets", short_names=("ms",), scale=scale
        ),
        ResourceType(
            group,
            versions,
            "MachineDeployment",
            "machinedeployments",
            short_names=("md",),
            scale=scale,
        ),
        ResourceType(
            group, versions, "MachinePool", "machinepools", short_names=("mp",), scale=scale
        ),
        ResourceType(group, versions, "Machine", "machines", short_names=("ma",)),
    ]


def provisioning_request_resources() -> list[ResourceType]:
    """Cluster Autoscaler's ProvisioningRequests (``autoscaling.x-k8s.io``, ``v1`` preferred,
    ``v1beta1`` still served), with their status subresource."""
    return [
        ResourceType(
            "autoscaling.x-k8s.io",
            ("v1", "v1beta1"),
            "ProvisioningRequest",
            "provisioningrequests",
            short_names=("provreq", "provreqs"),
        )
    ]


def capacity_quota_resources() -> list[ResourceType]:
    """Cluster Autoscaler's CapacityQuotas (``autoscaling.x-k8s.io/v1alpha1``, cluster-scoped,
    short name ``cq``), with their status subresource."""
    return [
        ResourceType(
            "autoscaling.x-k8s.io",
            ("v1alpha1",),
            "CapacityQuota",
            "capacityquotas",
            namespaced=False,
            short_names=("cq",),
        )
    ]


def capacity_buffer_resources() -> list[ResourceType]:
    """Cluster Autoscaler's CapacityBuffers (``autoscaling.x-k8s.io``, ``v1beta1``
    preferred, ``v1alpha1`` still served), with their status subresource."""
    return [
        ResourceType(
            "autoscaling.x-k8s.io",
            ("v1beta1", "v1alpha1"),
            "CapacityBuffer",
            "capacitybuffers",
            short_names=("cb",),
        )
    ]
