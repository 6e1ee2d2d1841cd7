"""The `machineapi` cloud provider (alias `clusterapi`) for clusterscaler.

Node groups are OpenShift `machine.openshift.io` MachineSets and Cluster API
`cluster.x-k8s.io` MachineSets, MachineDeployments and MachinePools that carry the
`<group>/cluster-api-autoscaler-node-group-min-size` / `-max-size` annotations. Sizes are
read and written through the scale subresource.
"""

from __future__ import annotations

__all__ = ["PROVIDER_ALIASES", "PROVIDER_NAME"]

PROVIDER_NAME = "machineapi"
PROVIDER_ALIASES = ("clusterapi",)
