"""clusterscaler-externalgrpc: the `externalgrpc` cloud provider, whose node groups are
served by a gRPC service speaking upstream Cluster Autoscaler's `externalgrpc.proto`
(service `clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider`), so a provider
service written for Cluster Autoscaler works unchanged."""

PROVIDER_NAME = "externalgrpc"
