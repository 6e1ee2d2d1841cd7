"""--balance-similar-node-groups: finding node groups that are alike, and spreading a
scale-up over them.

Two groups are similar when their template nodes have the same capacity (memory within
--memory-difference-ratio), allocatable and free resources within
--max-allocatable-difference-ratio and --max-free-difference-ratio, and equal labels except
zone, region, hostname, node group names, the provider's own labels (on AWS: eniConfig,
lifecycle, zone id) and --balancing-ignore-label. With --balancing-label, only the named
labels are compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterscaler.model import (
    HOSTNAME_LABEL,
    LEGACY_REGION_LABEL,
    LEGACY_ZONE_LABEL,
    REGION_LABEL,
    ZONE_LABEL,
    NodeInfo,
    Resources,
)

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

# Labels that legitimately differ between otherwise identical groups.
BASIC_IGNORED_LABELS = frozenset(
    {
        HOSTNAME_LABEL,
        ZONE_LABEL,
        REGION_LABEL,
        LEGACY_ZONE_LABEL,
        LEGACY_REGION_LABEL,
        "topology.ebs.csi.aws.com/zone",
        "topology.gke.io/zone",
        "topology.disk.csi.azure.com/zone",
        # Labels naming the node group itself (sim, EKS, eksctl, GKE, AKS).
        "clusterscaler.io/node-group",
        "eks.amazonaws.com/nodegroup",
        "alpha.eksctl.io/nodegroup-name",
        "alpha.eksctl.io/instance-id",
        "cloud.google.com/gke-nodepool",
        "agentpool",
        "kubernetes.azure.com/agentpool",
        # Internal to fluentd's DaemonSet (the 1.8 to 1.9 migration).
        "beta.kubernetes.io/fluentd-ds-ready",
        # kops' instance group name: it differs between groups by design.
        "kops.k8s.io/instancegroup",
    }
)

# Labels that also differ between otherwise identical AWS groups (CA's AWS comparator): the
# CNI's custom networking config, the spot marker, and the zone id.
AWS_IGNORED_LABELS = frozenset(
    {"k8s.amazonaws.com/eniConfig", "lifecycle", "topology.k8s.aws/zone-id"}
)


def ignored_labels(options: AutoscalingOptions) -> frozenset[str]:
    """The labels two groups may differ in and still be similar, for the cloud provider in
    use, plus --balancing-ignore-label."""
    ignored = BASIC_IGNORED_LABELS | frozenset(options.balancing_ignore_label)
    if options.cloud_provider == "aws":
        ignored |= AWS_IGNORED_LABELS
    return ignored


def _names(a: Resources, b: Resources) -> set[str]:
    return set(a.names()) | set(b.names())


def _within(a: int, b: int, ratio: float) -> bool:
    small, large = sorted((a, b))
    return large * (1 - ratio) <= small


def _maps_within(a: Resources, b: Resources, ratio: float) -> bool:
    return all(_within(a.get(n), b.get(n), ratio) for n in _names(a, b))


def similar(a: NodeInfo, b: NodeInfo, options: AutoscalingOptions) -> bool:
    """Whether two groups' template nodes are interchangeable for balancing."""
    na, nb = a.node, b.node
    if options.balancing_label:
        return all(na.labels.get(k) == nb.labels.get(k) for k in options.balancing_label)
    for name in _names(na.capacity, nb.capacity):
        ca, cb = na.capacity.get(name), nb.capacity.get(name)
        if name == "memory":
            if not _within(ca, cb, options.memory_difference_ratio):
                return False
        elif ca != cb:
            return False
    if not _maps_within(na.allocatable, nb.allocatable, options.max_allocatable_difference_ratio):
        return False
    free_a = na.allocatable - a.requested()
    free_b = nb.allocatable - b.requested()
    if not _maps_within(free_a, free_b, options.max_free_difference_ratio):
        return False
    ignored = ignored_labels(options)
    la = {k: v for k, v in na.labels.items() if k not in ignored}
    lb = {k: v for k, v in nb.labels.items() if k not in ignored}
    return la == lb


def find_similar(
    group_id: str,
    templates: Mapping[str, NodeInfo],
    options: AutoscalingOptions,
    candidates: Iterable[str],
) -> list[str]:
    """The other groups among `candidates` similar to `group_id`, sorted by id."""
    mine = templates.get(group_id)
    if mine is None:
        return []
    out = []
    for other in sorted(candidates):
        if other == group_id:
            continue
        tpl = templates.get(other)
        if tpl is not None and similar(mine, tpl, options):
            out.append(other)
    return out


@dataclass(frozen=True, slots=True)
class GroupSize:
    node_group: str
    current: int
    max_size: int


def balance(groups: Sequence[GroupSize], new_nodes: int) -> dict[str, int]:
    """Spread `new_nodes` so that group sizes end up as even as possible, never above a
    group's max. Returns the increase per group (groups that get nothing are left out);
    the total may be less than `new_nodes` when every group is full."""
    sizes = {g.node_group: g.current for g in groups}
    caps = {g.node_group: g.max_size for g in groups}
    out: dict[str, int] = {}
    for _ in range(new_nodes):
        open_groups = [g for g in sizes if sizes[g] < caps[g]]
        if not open_groups:
            break
        pick = min(open_groups, key=lambda g: (sizes[g], g))
        sizes[pick] += 1
        out[pick] = out.get(pick, 0) + 1
    return out
