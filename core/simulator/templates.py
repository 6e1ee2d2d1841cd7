"""Turning a node group's template node info into concrete simulated nodes."""

from __future__ import annotations

import dataclasses

from clusterscaler.model import HOSTNAME_LABEL, Node, NodeInfo, Pod

__all__ = ["AUTOSCALER_TAINTS", "sanitize_template"]

# Taints the autoscaler itself puts on nodes it is removing; a new node never has them.
AUTOSCALER_TAINTS = frozenset(
    {"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler"}
)


def sanitize_template(
    template: NodeInfo,
    name: str,
    ignored_taints: frozenset[str] = frozenset(),
    ignored_prefixes: tuple[str, ...] = (),
) -> tuple[Node, list[Pod]]:
    """A copy of `template` as a node called `name`, with its pods renamed to match.

        The hostname label follows the new name (so hostname anti-affinity treats copies as
        distinct nodes), the autoscaler's own taints, `ignored_taints` (startup and status taints,
    by key) and taints whose key starts with one of `ignored_prefixes` are dropped, and each
        template pod (DaemonSet pods, usually) becomes `<pod>-<name>` bound to the new node.
    """
    node = template.node
    labels = dict(node.labels)
    labels[HOSTNAME_LABEL] = name
    taints = tuple(
        t
        for t in node.taints
        if t.key not in AUTOSCALER_TAINTS
        and t.key not in ignored_taints
        and not (ignored_prefixes and t.key.startswith(ignored_prefixes))
    )
    new_node = dataclasses.replace(
        node,
        name=name,
        labels=labels,
        taints=taints,
        uid=f"{name}-uid",
        provider_id="",
        unschedulable=False,
        deletion_time=None,
    )
    pods = [
        dataclasses.replace(p, name=f"{p.name}-{name}", uid=f"{p.uid}-{name}", node_name=name)
        for p in template.pods
    ]
    return new_node, pods
