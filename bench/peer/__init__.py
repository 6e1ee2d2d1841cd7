"""Side by side with upstream Cluster Autoscaler on a real control plane (`python -m bench
peer`): `scenarios` (node groups, workload, flags), `workload` (the objects applied),
`observe` (watches, process usage, /metrics) and `run` (the command, rows and targets).
Upstream CA itself is built by `clusterscaler.testing.upstreamca`."""
