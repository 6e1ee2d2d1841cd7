"""clusterscaler-kwok: upstream Cluster Autoscaler's kwok cloud provider for clusterscaler.

Node groups are made of KWOK's fake nodes: growing a group creates Node objects from the
group's template node, annotated `kwok.x-k8s.io/node=fake` so that a kwok controller plays
their kubelet; shrinking it deletes them. The `kwok-provider-config` ConfigMap and the
templates ConfigMap of an upstream installation work unchanged (docs/providers/kwok.md).
"""

PROVIDER_NAME = "kwok"
