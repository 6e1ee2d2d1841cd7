"""The standard drainability rules, each registered as its own pod filter.

They decide which pods block the removal of a node during scale-down, in Cluster
Autoscaler's order; flags such as --skip-nodes-with-local-storage switch rules off.
"""

from __future__ import annotations

from clusterscaler.api import Registry, hookimpl
from clusterscaler.plugins.pod_filters import rules

FILTERS = (
    ("mirror", rules.mirror, "Mirror pods stay with their node."),
    ("long-terminating", rules.long_terminating, "Pods terminating for too long are ignored."),
    ("expendable", rules.expendable, "Pods below the expendable priority cutoff never block."),
    (
        "replica-count",
        rules.replica_count,
        "Missing controllers and --min-replica-count block "
        "(--skip-nodes-with-custom-controller-pods).",
    ),
    ("daemonset", rules.daemonset, "DaemonSet pods are evicted, never moved."),
    ("safe-to-evict", rules.safe_to_evict, 'safe-to-evict: "true" always moves.'),
    ("terminal", rules.terminal, "Succeeded and Failed pods are ignored."),
    (
        "on-completion",
        rules.on_completion,
        'safe-to-evict: "on-completion" pods finish before their node goes.',
    ),
    ("not-replicated", rules.not_replicated, "Pods without a controller block."),
    ("system", rules.system, "kube-system pods without a PDB block (--skip-nodes-with-system-pods)."),
    ("not-safe-to-evict", rules.not_safe_to_evict, 'safe-to-evict: "false" blocks.'),
    (
        "local-storage",
        rules.local_storage,
        "hostPath and disk emptyDir volumes block (--skip-nodes-with-local-storage).",
    ),
    ("pdb", rules.pdb, "PodDisruptionBudgets with no disruption left block."),
)


@hookimpl
def clusterscaler_register_pod_filters(registry: Registry) -> None:
    for name, factory, description in FILTERS:
        registry.add_pod_filter(name, factory, description=description)
