"""Which nodes scale-down may consider, and why the others are excluded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from clusterscaler.loop.clusterstate import (
    SCALE_DOWN_DISABLED_ANNOTATION,
    ClusterState,
    is_being_deleted,
)
from clusterscaler.loop.decisions import UnremovableNode, UnremovableReason
from clusterscaler.model import Node, Pod, UnreadableObject
from clusterscaler.simulator.utilization import Utilization, is_gpu_node, node_utilization

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.simulator.dra import DraState


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node that passed eligibility: it may be removed if its pods can move."""

    node: Node
    node_group: str
    utilization: Utilization
    ready: bool


def check_eligibility(
    nodes: Sequence[Node],
    pods_by_node: Mapping[str, Sequence[Pod]],
    state: ClusterState,
    options: AutoscalingOptions,
    now: datetime,
    *,
    gpu_label: str = "",
    unreadable_pods: Mapping[str, Sequence[UnreadableObject]] | None = None,
    dra: DraState | None = None,
) -> tuple[list[Candidate], list[UnremovableNode]]:
    """Split nodes into candidates and unremovable ones (with CA's reason names).

    A node bound to a pod the model could not read (`unreadable_pods`, by node) is never a
    candidate: its pods are not known, so it would look emptier than it is. Nor is a node
    with a DRA device pool whose slices are not all published (`dra`): how many of its
    devices are in use is not known."""
    candidates: list[Candidate] = []
    unremovable: list[UnremovableNode] = []
    unreadable_pods = unreadable_pods or {}
    for node in nodes:
        name = node.name
        if name in state.being_deleted or is_being_deleted(node):
            unremovable.append(UnremovableNode(name, UnremovableReason.CURRENTLY_BEING_DELETED))
            continue
        if name in unreadable_pods:
            bad = unreadable_pods[name]
            unremovable.append(
                UnremovableNode(
                    name,
                    UnremovableReason.NOT_UNNEEDED_OTHER_REASON,
                    detail=f"runs {len(bad)} pod(s) that cannot be read, e.g. {bad[0].key}: "
                    f"{bad[0].error}",
                )
            )
            continue
        if node.annotations.get(SCALE_DOWN_DISABLED_ANNOTATION) == "true":
            unremovable.append(
                UnremovableNode(name, UnremovableReason.SCALE_DOWN_DISABLED_ANNOTATION)
            )
            continue
        group = state.node_group(name)
        if group is None:
            unremovable.append(UnremovableNode(name, UnremovableReason.NOT_AUTOSCALED))
            continue
        if group.scale_down_blocked:
            # The provider says the group may not shrink now (a Cluster API
            # MachineDeployment rolling out): as CA's clusterapi provider, its nodes are no
            # candidates, and they still receive the pods of removed nodes.
            unremovable.append(
                UnremovableNode(
                    name,
                    UnremovableReason.NOT_UNNEEDED_OTHER_REASON,
                    detail=f"node group {group.id}: scale-down blocked: {group.scale_down_blocked}",
                )
            )
            continue
        if name in state.not_started:
            # CA counts such a node as upcoming capacity, so it is no candidate until it has
            # been unready for longer than --max-node-startup-time.
            unremovable.append(
                UnremovableNode(
                    name,
                    UnremovableReason.NOT_UNNEEDED_OTHER_REASON,
                    detail="not started: registered, not Ready within --max-node-startup-time",
                )
            )
            continue
        ready = name in state.ready
        if not ready and not options.scale_down_unready_enabled:
            unremovable.append(UnremovableNode(name, UnremovableReason.SCALE_DOWN_UNREADY_DISABLED))
            continue
        gopts = group.options
        ignore_ds = (
            gopts.ignore_daemonsets_utilization
            if gopts.ignore_daemonsets_utilization is not None
            else options.ignore_daemonsets_utilization
        )
        util = node_utilization(
            node,
            pods_by_node.get(name, ()),
            now=now,
            gpu_label=gpu_label,
            ignore_daemonsets=ignore_ds,
            ignore_mirror_pods=options.ignore_mirror_pods_utilization,
            dra=dra,
        )
        if util.unknown:
            unremovable.append(
                UnremovableNode(
                    name,
                    UnremovableReason.NOT_UNDERUTILIZED,
                    detail=f"device utilization unknown: {util.unknown}",
                )
            )
            continue
        if ready:
            # As CA: a node the provider labels as a GPU node is held to the GPU
            # threshold, whether its GPUs are extended resources or DRA devices.
            if is_gpu_node(node, gpu_label) and (util.gpu is not None or util.dra is not None):
                threshold = gopts.scale_down_gpu_utilization_threshold
            else:
                threshold = gopts.scale_down_utilization_threshold
            assert threshold is not None
            if util.value >= threshold:
                unremovable.append(
                    UnremovableNode(
                        name,
                        UnremovableReason.NOT_UNDERUTILIZED,
                        detail=f"{util.resource} utilization {util.value:.3f} >= {threshold:g}",
                    )
                )
                continue
        candidates.append(Candidate(node, group.id, util, ready))
    return candidates, unremovable
