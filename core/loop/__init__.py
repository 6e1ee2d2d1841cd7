"""The autoscaling loop: one `Autoscaler.run_once` observes the cluster, updates the
cluster state (readiness, upcoming nodes, backoff), picks the pending pods, scales up
(templates, estimator, expander, limits, balancing) and scales down (`scaledown/`), and
returns its decisions as plain values (`decisions`).

Imports: `framework`, `model`, `simulator`. Never `kube`, `report` or `commands`: the loop
reads and writes the cluster only through the framework's protocols.
"""
