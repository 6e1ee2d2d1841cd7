"""The Kubernetes edge of the autoscaler: client configuration, list+watch caches, actions
on nodes and pods, events, the status ConfigMap and leader election."""
