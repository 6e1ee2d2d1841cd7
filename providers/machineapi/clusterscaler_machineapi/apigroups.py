"""The API groups the provider works with and the annotation names each one uses.

Cluster API serves `cluster.x-k8s.io` (overridable with the `CAPI_GROUP` environment
variable, as upstream); OpenShift's Machine API serves `machine.openshift.io`. Every
annotation the autoscaler reads or writes on MachineSets, MachineDeployments, Machines and
Nodes is prefixed by the group of the resource it belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterscaler.api import KUBELET_MAX_PODS

CAPI_GROUP = "cluster.x-k8s.io"
OPENSHIFT_GROUP = "machine.openshift.io"
CAPI_GROUP_ENV = "CAPI_GROUP"
CAPI_VERSION_ENV = "CAPI_VERSION"
OPENSHIFT_NAMESPACE = "openshift-machine-api"

MACHINE_SET = "MachineSet"
MACHINE_DEPLOYMENT = "MachineDeployment"
MACHINE_POOL = "MachinePool"
MACHINE = "Machine"
CLUSTER = "Cluster"
PLURALS = {
    MACHINE_SET: "machinesets",
    MACHINE_DEPLOYMENT: "machinedeployments",
    MACHINE_POOL: "machinepools",
    MACHINE: "machines",
    CLUSTER: "clusters",
}

# The capacity annotations upstream reads for scale from zero, whatever the API group.
CAPACITY_PREFIX = "capacity.cluster-autoscaler.kubernetes.io/"
CAPACITY_CPU = CAPACITY_PREFIX + "cpu"
CAPACITY_MEMORY = CAPACITY_PREFIX + "memory"
CAPACITY_EPHEMERAL_DISK = CAPACITY_PREFIX + "ephemeral-disk"
CAPACITY_MAX_PODS = CAPACITY_PREFIX + "maxPods"
CAPACITY_GPU_TYPE = CAPACITY_PREFIX + "gpu-type"
CAPACITY_GPU_COUNT = CAPACITY_PREFIX + "gpu-count"
CAPACITY_LABELS = CAPACITY_PREFIX + "labels"
CAPACITY_TAINTS = CAPACITY_PREFIX + "taints"
CAPACITY_DRA_DRIVER = CAPACITY_PREFIX + "dra-driver"
CAPACITY_CSI_DRIVER = CAPACITY_PREFIX + "csi-driver"

# Set by Cluster API on a MachineSet, MachineDeployment or MachinePool whose reconciliation
# is paused (upstream reads this exact key, whatever CAPI_GROUP says).
PAUSED_ANNOTATION = "cluster.x-k8s.io/paused"
# The revision of a MachineDeployment's template a MachineSet was created for; the
# MachineSet with the highest revision is the deployment's current one.
REVISION_ANNOTATION = "machinedeployment.clusters.x-k8s.io/revision"

# The architecture of a template node whose infrastructure template does not say, as
# upstream: amd64 unless this environment variable names another one.
DEFAULT_ARCH_ENV = "CAPI_SCALE_ZERO_DEFAULT_ARCH"
DEFAULT_ARCH = "amd64"
KNOWN_ARCHES = ("amd64", "arm64", "ppc64le", "s390x")

# OpenShift's older keys, set by the machine-api providers on MachineSets.
OPENSHIFT_VCPU = OPENSHIFT_GROUP + "/vCPU"
OPENSHIFT_MEMORY_MB = OPENSHIFT_GROUP + "/memoryMb"
OPENSHIFT_GPU = OPENSHIFT_GROUP + "/GPU"
OPENSHIFT_MAX_PODS = OPENSHIFT_GROUP + "/maxPods"

# OpenShift's kubelet configuration allows 250 pods per node; upstream kubelet 110.
OPENSHIFT_DEFAULT_MAX_PODS = 250


@dataclass(frozen=True, slots=True)
class ApiGroup:
    """One served Machine API group at one version, with its annotation names."""

    group: str
    version: str
    # Whether the group serves MachinePools with their scale subresource.
    machine_pools: bool = False
    # Whether the group serves Clusters (whose pause stops every group of the cluster).
    clusters: bool = False

    @property
    def openshift(self) -> bool:
        return self.group == OPENSHIFT_GROUP

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def scalable_kinds(self) -> tuple[str, ...]:
        """Kinds that can be node groups. OpenShift's Machine API has no MachineDeployments
        and no MachinePools."""
        if self.openshift:
            return (MACHINE_SET,)
        if self.machine_pools:
            return (MACHINE_DEPLOYMENT, MACHINE_SET, MACHINE_POOL)
        return (MACHINE_DEPLOYMENT, MACHINE_SET)

    @property
    def min_size_key(self) -> str:
        return f"{self.group}/cluster-api-autoscaler-node-group-min-size"

    @property
    def max_size_key(self) -> str:
        return f"{self.group}/cluster-api-autoscaler-node-group-max-size"

    @property
    def delete_machine_keys(self) -> tuple[str, ...]:
        """Annotations that make the MachineSet controller pick a machine on scale-down.

        OpenShift's controller has honoured two names over time; both are set so that any
        release of it deletes the chosen machine.
        """
        if self.openshift:
            return (f"{OPENSHIFT_GROUP}/delete-machine", f"{OPENSHIFT_GROUP}/cluster-api-delete-machine")
        return (f"{self.group}/delete-machine",)

    @property
    def node_machine_key(self) -> str:
        """Annotation on a Node naming its Machine as `<namespace>/<name>`."""
        return f"{self.group}/machine"

    @property
    def cluster_name_label(self) -> str:
        if self.openshift:
            return f"{OPENSHIFT_GROUP}/cluster-api-cluster"
        return f"{self.group}/cluster-name"

    @property
    def default_max_pods(self) -> int:
        return OPENSHIFT_DEFAULT_MAX_PODS if self.openshift else KUBELET_MAX_PODS

    def option_key(self, option: str) -> str:
        return f"{self.group}/autoscaling-options-{option}"
