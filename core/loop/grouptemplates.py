"""Template nodes: what a new node of each node group would look like.

A template is a sanitised copy of a ready live node of the group (fresh name and uid, no
autoscaler, node-condition, startup or status taints, schedulable), keeping its DaemonSet
and mirror pods. A group
without a usable node falls back to the template last built from one of its nodes, then to
the provider's `template_node_info()` (scale from zero) plus the DaemonSet pods that would
run on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
from clusterscaler.interfaces.cloudprovider import CloudProviderError, NodeGroup, ProviderProblem
from clusterscaler.loop.balancing import ignored_labels
from clusterscaler.loop.clusterstate import ClusterState, is_being_deleted
from clusterscaler.loop.taints import (
    IGNORE_TAINT_PREFIX,
    NODE_CONDITION_TAINTS,
    STARTUP_TAINT_PREFIX,
    STATUS_TAINT_PREFIX,
    TaintConfig,
)
from clusterscaler.model import CSINode, DaemonSet, Node, NodeInfo, OwnerRef, Pod, ResourceSlice
from clusterscaler.model.quantity import format_bytes, format_cpu
from clusterscaler.model.resources import CPU, PODS, Resources
from clusterscaler.simulator import pod_matches_node_affinity, tolerates_taints
from clusterscaler.simulator.dra import template_slices, with_slices
from clusterscaler.simulator.templatecopier import sanitize_template

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

log = structlog.get_logger()

IGNORED_TAINT_PREFIXES = (IGNORE_TAINT_PREFIX, STARTUP_TAINT_PREFIX, STATUS_TAINT_PREFIX)

# CA's markers on the nodes it only simulates: a label on every template node (and so on
# every node made from one), and an annotation on the upcoming nodes it adds to the
# snapshot for the nodes a scale-up asked for that have not registered yet.
TEMPLATE_NODE_LABEL = "cluster-autoscaler.kubernetes.io/template-node"
UPCOMING_NODE_ANNOTATION = "cluster-autoscaler.k8s.io/upcoming-node"


@dataclass(frozen=True, slots=True)
class Template:
    """A group's template node, where it came from, or why there is none."""

    node_group: str
    node_info: NodeInfo | None
    source: str  # "node", "cache", "provider" or "" when unavailable
    error: str = ""


def template_name(group_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-." else "-" for c in group_id.lower())
    return f"template-node-for-{safe}"


def ignored_taint_keys(options: AutoscalingOptions) -> frozenset[str]:
    """Taint keys a template node drops: node-condition, startup and status taints."""
    config = TaintConfig.from_options(options)
    return frozenset((*NODE_CONDITION_TAINTS, *config.startup_keys, *config.status_keys))


def ignored_taint_prefixes(options: AutoscalingOptions) -> tuple[str, ...]:
    """Taint key prefixes a template node drops: startup (built-in and
    --startup-taint-prefix) and status prefixes."""
    config = TaintConfig.from_options(options)
    return (*config.startup_prefixes, *config.status_prefixes)


def sanitize(
    node_info: NodeInfo, group_id: str, options: AutoscalingOptions, name: str | None = None
) -> NodeInfo:
    """A copy of `node_info` as a brand-new node of `group_id` would be: DaemonSet and
    mirror pods only, no autoscaler, startup or status taints, and ready; schedulable
    unless `node_info` is not and --scale-from-unschedulable is off."""
    kept = NodeInfo(
        node_info.node, tuple(p for p in node_info.pods if p.is_daemonset or p.is_mirror)
    )
    node, pods = sanitize_template(
        kept,
        name or template_name(group_id),
        ignored_taint_keys(options),
        ignored_taint_prefixes(options),
    )
    node = node.with_(
        ready=True,
        conditions=(),
        labels={**node.labels, TEMPLATE_NODE_LABEL: "true"},
        # As CA: a template keeps the .spec.unschedulable of what it is made from (a
        # provider's template may be cordoned) unless --scale-from-unschedulable.
        unschedulable=node_info.node.unschedulable and not options.scale_from_unschedulable,
    )
    return NodeInfo(
        node,
        tuple(p.with_(phase="Running", unschedulable=False) for p in pods),
        template_slices(node_info.resource_slices, node.name),
    )


def instantiate(template: NodeInfo, name: str) -> NodeInfo:
    """Another node made from a template under a new name (upcoming nodes, estimation),
    with the template's ResourceSlices renamed for it."""
    node, pods = sanitize_template(template, name)
    return NodeInfo(node, tuple(pods), template_slices(template.resource_slices, name))


def upcoming_node(template: NodeInfo, name: str) -> NodeInfo:
    """A node a scale-up asked for that has not registered yet, as the snapshot holds it:
    made from its group's template and annotated as upcoming."""
    info = instantiate(template, name)
    node = info.node.with_(annotations={**info.node.annotations, UPCOMING_NODE_ANNOTATION: "true"})
    return NodeInfo(node, info.pods, info.resource_slices)


def daemonset_pods_for(node: Node, daemonsets: Iterable[DaemonSet]) -> list[Pod]:
    """Pods of the DaemonSets that would run on `node` (selector, affinity, taints)."""
    out: list[Pod] = []
    for ds in daemonsets:
        tpl = ds.template
        if tpl is None:
            continue
        pod = tpl.with_(
            name=f"{ds.name}-{node.name}"[:253],
            namespace=ds.namespace,
            uid=f"uid-{ds.namespace}-{ds.name}-{node.name}",
            owner=OwnerRef("DaemonSet", ds.name, ds.uid, True, "apps/v1"),
            owners=(OwnerRef("DaemonSet", ds.name, ds.uid, True, "apps/v1"),),
            node_name=node.name,
            phase="Running",
        )
        if not pod_matches_node_affinity(pod, node):
            continue
        if tolerates_taints(pod, node.taints) is not None:
            continue
        out.append(pod)
    return out


TEMPLATE_MISMATCH = "TemplateMismatch"
_GI = 1 << 30


def _amount(resource: str, value: int) -> str:
    if resource == CPU:
        return format_cpu(value)
    if resource == PODS or "/" in resource:
        return str(value)
    if value >= _GI and value % _GI:
        return f"{value / _GI:.1f}Gi"
    return format_bytes(value)


def _disagreeing_resources(node: Resources, template: Resources, ratio: float) -> list[str]:
    """`<resource> (node N, template M)` for each allocatable resource whose amounts differ
    by more than `ratio` of the larger (or that only one side has)."""
    out = []
    for name in sorted(set(node.names()) | set(template.names())):
        a, b = node.get(name), template.get(name)
        if max(a, b) * (1 - ratio) > min(a, b):
            out.append(f"{name} (node {_amount(name, a)}, template {_amount(name, b)})")
    return out


# Deprecated labels the kubelet still sets beside their stable names (and cloud templates
# may set or leave out): one missing on a side that holds its stable name with the same
# value is not a disagreement.
DEPRECATED_LABEL_ALIASES = {
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
}


def _with_deprecated_aliases(labels: Mapping[str, str]) -> Mapping[str, str]:
    """`labels` with each deprecated alias or stable label it lacks filled from the other."""
    missing = {}
    for alias, stable in DEPRECATED_LABEL_ALIASES.items():
        if alias not in labels and stable in labels:
            missing[alias] = labels[stable]
        elif stable not in labels and alias in labels:
            missing[stable] = labels[alias]
    return {**labels, **missing} if missing else labels


def _disagreeing_labels(
    node: Mapping[str, str], template: Mapping[str, str], ignored: frozenset[str]
) -> list[str]:
    out = []
    node, template = _with_deprecated_aliases(node), _with_deprecated_aliases(template)
    for key in sorted((set(node) | set(template)) - ignored):
        a, b = node.get(key), template.get(key)
        if a != b:
            node_side = "missing" if a is None else repr(a)
            template_side = "missing" if b is None else repr(b)
            out.append(f"{key} (node {node_side}, template {template_side})")
    return out


# A log line or status message names at most this many items, then counts the rest.
LISTED_AT_MOST = 10


def _listed(items: Sequence[str]) -> str:
    """`a, b, c` for a few items; the first `LISTED_AT_MOST` and a count of the others for
    many (a node with 5,000 labels must not make a 250 KB log line)."""
    if len(items) <= LISTED_AT_MOST:
        return ", ".join(items)
    return ", ".join(items[:LISTED_AT_MOST]) + f" and {len(items) - LISTED_AT_MOST} more"


def template_mismatch(
    group_id: str, live: Node, provided: Node, options: AutoscalingOptions
) -> ProviderProblem | None:
    """A problem naming the allocatable resources and labels on which a group's live node
    and its provider's template disagree, or None when they agree.

    The loop plans a group's new nodes from a live node while the cloud builds them from
    the template: when the two differ, a scale-up can add nodes that do not fit the pods it
    was for, and the group flaps. Labels that differ between the nodes of one group by
    design (hostname, zone, the group's own name, --balancing-ignore-label) are not
    compared; allocatable amounts within --max-allocatable-difference-ratio agree.
    """
    resources = _disagreeing_resources(
        live.allocatable, provided.allocatable, options.max_allocatable_difference_ratio
    )
    labels = _disagreeing_labels(
        live.labels,
        provided.labels,
        ignored_labels(options) | {TEMPLATE_NODE_LABEL},
    )
    if not resources and not labels:
        return None
    parts = []
    if resources:
        parts.append("allocatable " + _listed(resources))
    if labels:
        parts.append("labels " + _listed(labels))
    return ProviderProblem(
        group_id,
        TEMPLATE_MISMATCH,
        f"node group {group_id}: live node {live.name} and the provider's template disagree "
        f"on {'; '.join(parts)}: the loop plans new nodes from the live node, the provider "
        "makes them from the template",
    )


class TemplateCache:
    """Templates per node group, remembered across loops."""

    def __init__(self, options: AutoscalingOptions) -> None:
        self.options = options
        self._from_nodes: dict[str, NodeInfo] = {}
        # The templates of the last `build`, by node group.
        self.last: dict[str, Template] = {}
        # Per group, the live node's shape last compared with the provider's template, and
        # the outcome: the provider is asked again only when that shape changes.
        self._compared: dict[str, tuple[object, ProviderProblem | None]] = {}

    def mismatches(self) -> tuple[ProviderProblem, ...]:
        """The groups whose live node (the last `build` planned from) and provider
        template disagree, as problems naming the fields."""
        return tuple(
            problem
            for gid, (_, problem) in sorted(self._compared.items())
            if problem is not None and gid in self.last and self.last[gid].source == "node"
        )

    def _compare(self, gid: str, group: NodeGroup, live: Node) -> None:
        shape = (live.allocatable, tuple(sorted(live.labels.items())))
        seen = self._compared.get(gid)
        if seen is not None and seen[0] == shape:
            return
        problem: ProviderProblem | None = None
        try:
            provided = group.template_node_info()
        except (CloudProviderError, ValueError, NotImplementedError):
            # No template to compare with: the group only scales from its live nodes.
            provided = None
        if provided is not None:
            problem = template_mismatch(gid, live, provided.node, self.options)
        self._compared[gid] = (shape, problem)

    def build(
        self,
        state: ClusterState,
        pods_by_node: Mapping[str, Sequence[Pod]],
        daemonsets: Sequence[DaemonSet],
        csinodes: Mapping[str, CSINode] | None = None,
        node_slices: Callable[[str], Sequence[ResourceSlice]] | None = None,
    ) -> dict[str, Template]:
        """Each group's template. `csinodes` (by node name) gives a template copied from a
        live node the CSI attach limits of that node's CSINode: a new node of the group
        has the same drivers and limits. `node_slices` gives it the ResourceSlices local
        to that node (DRA devices), renamed for the template: the same devices."""
        out: dict[str, Template] = {}
        for gid, group in sorted(state.groups.items()):
            live = self._usable_node(group.nodes, state)
            if live is not None:
                csinode = csinodes.get(live.name) if csinodes else None
                if csinode is not None:
                    live = live.with_(csi_volume_limits=dict(csinode.drivers))
                info = sanitize(
                    NodeInfo(live, tuple(pods_by_node.get(live.name, ()))), gid, self.options
                )
                if node_slices is not None:
                    info = with_slices(info, node_slices(live.name))
                self._from_nodes[gid] = info
                out[gid] = Template(gid, info, "node")
                self._compare(gid, group.group, live)
                continue
            cached = self._from_nodes.get(gid)
            if cached is not None:
                out[gid] = Template(gid, cached, "cache")
                continue
            try:
                provided = group.group.template_node_info()
            except (CloudProviderError, ValueError) as exc:
                # A provider that cannot describe one group (or describes it with a malformed
                # quantity) costs that group its scale-from-zero, never the whole loop.
                log.info("template_unavailable", node_group=gid, error=str(exc))
                out[gid] = Template(gid, None, "", str(exc))
                continue
            info = sanitize(provided, gid, self.options)
            ds_pods = daemonset_pods_for(info.node, daemonsets)
            known = {(p.namespace, p.owner.name) for p in info.pods if p.owner is not None}
            extra = tuple(
                p for p in ds_pods if p.owner is None or (p.namespace, p.owner.name) not in known
            )
            out[gid] = Template(
                gid, NodeInfo(info.node, info.pods + extra, info.resource_slices), "provider"
            )
        for gone in [g for g in self._from_nodes if g not in state.groups]:
            del self._from_nodes[gone]
        for gone in [g for g in self._compared if g not in state.groups]:
            del self._compared[gone]
        self.last = out
        return out

    @staticmethod
    def _usable_node(nodes: Iterable[Node], state: ClusterState) -> Node | None:
        best: Node | None = None
        for n in nodes:
            if n.name not in state.ready or is_being_deleted(n) or n.unschedulable:
                continue
            if best is None or n.name < best.name:
                best = n
        return best
