"""What the loop tells the world: events (deduplicated), Prometheus metrics and the
health check, the status ConfigMap's content, and structured logs.

Imports: `framework`, `model`, `loop.decisions` (the values it reports). Writing to the
API server is `kube`'s job.
"""
