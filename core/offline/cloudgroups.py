"""Node groups read from a real cloud provider, for `simulate --from-cluster` and `explain
--from-cluster` with a `--cloud-provider` other than `sim`.

The provider (aws, gce, azure, clusterapi, ...) is built from its own flags
(`--node-group-auto-discovery`, `--nodes`, `--cloud-config`) and asked, once, which node
groups exist, their bounds and target sizes, which of the cluster's nodes each one owns,
and, for a group with no live node, its template (scale from zero). The provider is read
only: it is wrapped so that every write (`increase_size`, `delete_nodes`,
`decrease_target_size`) raises instead of reaching the cloud.

The simulation then runs on the `sim` provider over the in-memory cluster, as for an
inferred snapshot: one `sim` group per provider group, its member nodes labelled
`clusterscaler.io/node-group=<group>` in the in-memory copy, new nodes copied from a live
member or, for an empty group, made from the provider's template. Scale-ups and deletions
change the simulated cluster only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from clusterscaler.framework.dryrun import GuardedCloudProvider
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    NodeGroup,
    PricingModel,
)
from clusterscaler.model import HOSTNAME_LABEL, ClusterObjects, Node
from clusterscaler.offline.inference import NODE_GROUP_LABEL, Inference, LeftOut
from clusterscaler.offline.inference import render as render_inference
from clusterscaler.offline.output import render_table
from clusterscaler.offline.setup import EMBEDDED_CONFIG_KEY, SIM_PROVIDER

LIVE_NODE = "live node"
_INVALID = re.compile(r"[^A-Za-z0-9._-]+")


class CloudWriteRefusedError(CloudProviderError):
    """A write to the cloud was attempted through a read-only provider."""


def refuse_writes(action: str, node_group: str, change: object) -> bool:
    """The guard of a read-only provider: every write raises, naming it."""
    raise CloudWriteRefusedError(
        f"node group {node_group}: {action}({change!r}) refused: the cloud provider is read "
        "only here (simulate and explain act on the simulated cluster, never on the cloud)"
    )


def read_only(provider: CloudProvider) -> GuardedCloudProvider:
    """`provider` with its reads passed through and every write refused."""
    return GuardedCloudProvider(provider, refuse_writes)


@dataclass(frozen=True, slots=True)
class ProviderGroup:
    """A node group of the real provider, as the simulation uses it."""

    # The name in the simulation (the provider id's last path segment, made a label value).
    name: str
    provider_id: str
    nodes: tuple[str, ...]
    target_size: int
    min_size: int
    max_size: int
    # "--nodes" or "<provider> provider".
    bounds_from: str
    # "live node", or "<provider> provider (scale from zero)".
    template_from: str
    # The provider's template as a Node object, for a group with no live node.
    template: dict[str, Any] | None = None
    # The price of a node-hour, when the provider prices nodes (gce).
    price: float | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "name": self.name,
            "providerId": self.provider_id,
            "nodes": len(self.nodes),
            "targetSize": self.target_size,
            "minSize": self.min_size,
            "maxSize": self.max_size,
            "boundsFrom": self.bounds_from,
            "templateFrom": self.template_from,
        }
        if self.price is not None:
            doc["price"] = self.price
        return doc


@dataclass(frozen=True, slots=True)
class ProviderGroups:
    """The node groups of a real provider and the nodes they do not own."""

    cloud_provider: str
    groups: tuple[ProviderGroup, ...]
    not_in_group: tuple[LeftOut, ...]
    groups_left_out: tuple[LeftOut, ...] = ()

    def cloud_config(self) -> dict[str, Any]:
        """The `sim` cloud-config of the groups (members carry the group label)."""
        out = []
        for g in self.groups:
            doc: dict[str, Any] = {
                "name": g.name,
                "minSize": g.min_size,
                "maxSize": g.max_size,
                "nodeSelector": {NODE_GROUP_LABEL: g.name},
            }
            if g.template is not None:
                doc["template"] = g.template
            if g.price is not None:
                doc["price"] = g.price
            out.append(doc)
        return {"nodeGroups": out}

    def upcoming(self) -> dict[str, int]:
        """Per group, the instances the provider is still creating: its target size above
        the nodes registered, which the loop counts as upcoming capacity (as CA does)."""
        return {
            g.name: g.target_size - len(g.nodes)
            for g in self.groups
            if g.target_size > len(g.nodes)
        }

    def sim_options(self, options: AutoscalingOptions) -> AutoscalingOptions:
        """`options` running on the `sim` provider with these groups (the real provider's
        flags are dropped: the simulation never builds it again)."""
        extra = {**options.extra, EMBEDDED_CONFIG_KEY: self.cloud_config()}
        return dataclasses.replace(
            options,
            cloud_provider=SIM_PROVIDER,
            cloud_config="",
            nodes=[],
            node_group_auto_discovery=[],
            extra=extra,
        )

    def label_members(self, objects: ClusterObjects) -> ClusterObjects:
        """`objects` with every member node labelled with its group, and the group label
        taken off the others (copies: the objects read are left as they were)."""
        group_of = {node: g.name for g in self.groups for node in g.nodes}
        nodes = []
        for node in objects.nodes:
            group = group_of.get(node.name)
            if group is not None:
                node = node.with_(labels={**node.labels, NODE_GROUP_LABEL: group})
            elif NODE_GROUP_LABEL in node.labels:
                node = node.with_(
                    labels={k: v for k, v in node.labels.items() if k != NODE_GROUP_LABEL}
                )
            nodes.append(node)
        return dataclasses.replace(objects, nodes=nodes)

    def to_json(self) -> dict[str, Any]:
        return {
            "cloudProvider": self.cloud_provider,
            "providerNodeGroups": [g.to_json() for g in self.groups],
            "notInNodeGroup": [{"node": n.name, "reason": n.reason} for n in self.not_in_group],
            "nodeGroupsLeftOut": [
                {"nodeGroup": g.name, "reason": g.reason} for g in self.groups_left_out
            ],
        }


# The node groups shown before a report: inferred from the nodes, or read from a provider.
GroupsReport = Inference | ProviderGroups


def _sim_name(provider_id: str, taken: set[str]) -> str:
    """A `sim` group name (a label value) for a provider's group id: its last path segment
    (a MIG's URL, `MachineSet/<namespace>/<name>`), other characters replaced by `-`."""
    base = _INVALID.sub("-", _last_segment(provider_id))
    base = base[:63].strip("-_.") or "node-group"
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"-{n}"
        name = base[: 63 - len(suffix)].rstrip("-_.") + suffix
    taken.add(name)
    return name


def _template_doc(node: Node) -> dict[str, Any]:
    """A provider's template node as a `sim` template: no name, provider ID, hostname or
    conditions (the sim provider gives each new node its own)."""
    doc = node.to_k8s()
    labels = {k: v for k, v in node.labels.items() if k not in (HOSTNAME_LABEL, NODE_GROUP_LABEL)}
    spec, status = doc["spec"], doc["status"]
    assert isinstance(spec, dict) and isinstance(status, dict)  # Node.to_k8s writes objects
    doc["metadata"] = {"labels": labels}
    doc["spec"] = {k: v for k, v in spec.items() if k != "providerID"}
    doc["status"] = {k: v for k, v in status.items() if k != "conditions"}
    return doc


def _last_segment(name: str) -> str:
    return name.rstrip("/").rpartition("/")[2]


def _given_by_nodes_flag(group: NodeGroup, nodes_flags: Sequence[str]) -> bool:
    """Whether a `--nodes=<min>:<max>:<name>` flag declares `group`: its name is the group's
    id, or names the same group the provider's way (`<project>/<zone>/<mig>` for a MIG's
    URL: the same last segment, with the group's bounds)."""
    for spec in nodes_flags:
        parts = spec.split(":", 2)
        if len(parts) != 3:
            continue
        low, high, name = parts
        if name == group.id:
            return True
        if _last_segment(name) == _last_segment(group.id) and (low, high) == (
            str(group.min_size),
            str(group.max_size),
        ):
            return True
    return False


def _hourly_price(pricing: PricingModel | None, node: Node) -> float | None:
    """The provider's price of a node-hour of `node`; None when it has no price for it."""
    if pricing is None:
        return None
    start = datetime.now(UTC)
    try:
        price = pricing.node_price(node, start, start + timedelta(hours=1))
    except CloudProviderError:
        return None
    return price if price > 0 else None


def _group(
    group: NodeGroup,
    name: str,
    members: Sequence[Node],
    cloud: str,
    options: AutoscalingOptions,
    pricing: PricingModel | None,
) -> ProviderGroup:
    template: dict[str, Any] | None = None
    template_from = LIVE_NODE
    if members:
        node = members[0]
    else:
        node = group.template_node_info().node
        if node.capacity.cpu <= 0 or node.capacity.memory <= 0:
            raise CloudProviderError(
                f"template: expected a node with positive cpu and memory capacity, got "
                f"{node.capacity.to_k8s()}"
            )
        template = _template_doc(node)
        template_from = f"{cloud} provider (scale from zero)"
    return ProviderGroup(
        name=name,
        provider_id=group.id,
        nodes=tuple(sorted(n.name for n in members)),
        target_size=group.target_size(),
        min_size=group.min_size,
        max_size=group.max_size,
        bounds_from="--nodes"
        if _given_by_nodes_flag(group, options.nodes)
        else f"{cloud} provider",
        template_from=template_from,
        template=template,
        price=_hourly_price(pricing, node),
    )


def read_provider_groups(
    provider: CloudProvider, nodes: Sequence[Node], options: AutoscalingOptions
) -> ProviderGroups:
    """The node groups of `provider` (read only: a write raises) and which of `nodes` each
    one owns. A group with no live node and no template the provider can make is left out
    with the reason, as the loop skips it for scale-from-zero."""
    cloud = options.cloud_provider
    guarded = read_only(provider)
    guarded.refresh()
    members: dict[str, list[Node]] = {}
    not_in_group: list[LeftOut] = []
    for node in nodes:
        try:
            group = guarded.node_group_for_node(node)
        except CloudProviderError as exc:
            not_in_group.append(LeftOut(node.name, f"the {cloud} provider could not tell: {exc}"))
            continue
        if group is None:
            where = f"providerID {node.provider_id!r}" if node.provider_id else "no providerID"
            not_in_group.append(
                LeftOut(node.name, f"in no node group of the {cloud} provider ({where})")
            )
        else:
            members.setdefault(group.id, []).append(node)
    pricing = guarded.pricing()
    taken: set[str] = set()
    groups: list[ProviderGroup] = []
    left_out: list[LeftOut] = []
    for group in sorted(guarded.node_groups(), key=lambda g: g.id):
        name = _sim_name(group.id, taken)
        try:
            groups.append(_group(group, name, members.get(group.id, []), cloud, options, pricing))
        except (CloudProviderError, NotImplementedError) as exc:
            left_out.append(
                LeftOut(
                    group.id,
                    f"no live node, and the {cloud} provider has no template for it: {exc}",
                )
            )
            taken.discard(name)
    return ProviderGroups(
        cloud_provider=cloud,
        groups=tuple(groups),
        not_in_group=tuple(sorted(not_in_group, key=lambda n: n.name)),
        groups_left_out=tuple(left_out),
    )


def render(report: ProviderGroups) -> str:
    """The provider's groups, the groups left out and the nodes in no group, as tables."""
    lines = [
        f"Node groups of the {report.cloud_provider} provider (read only: the simulation "
        "changes no cloud resource)"
    ]
    if report.groups:
        priced = any(g.price is not None for g in report.groups)
        rows = [
            (
                g.name,
                g.provider_id,
                str(len(g.nodes)),
                str(g.target_size),
                str(g.min_size),
                str(g.max_size),
                g.bounds_from,
                g.template_from,
                *(["-" if g.price is None else f"{g.price:.4f}"] if priced else []),
            )
            for g in report.groups
        ]
        header = (
            "NODE GROUP", "PROVIDER ID", "NODES", "TARGET", "MIN", "MAX", "BOUNDS FROM",
            "TEMPLATE FROM", *(["PRICE/NODE-HOUR"] if priced else []),
        )  # fmt: skip
        lines.append(render_table(header, rows))
    else:
        lines.append("(none)")
    if report.groups_left_out:
        lines += ["", "Node groups left out"]
        lines.append(
            render_table(
                ("NODE GROUP", "REASON"), [(g.name, g.reason) for g in report.groups_left_out]
            )
        )
    if report.not_in_group:
        lines += ["", "Nodes in no node group"]
        lines.append(
            render_table(("NODE", "REASON"), [(n.name, n.reason) for n in report.not_in_group])
        )
    return "\n".join(lines)


def render_groups(report: GroupsReport) -> str:
    """The node groups, inferred or read from a provider, as tables."""
    if isinstance(report, ProviderGroups):
        return render(report)
    return render_inference(report)
