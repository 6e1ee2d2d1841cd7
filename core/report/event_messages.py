"""Cluster Autoscaler's event messages, word for word, and the one value they quote (a
group's resize). `events.py` decides which event goes on which object; this module says
each in CA's words."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from clusterscaler.framework.durations import format_duration

__all__ = ["GroupResize", "messages"]


@dataclass(frozen=True)
class GroupResize:
    """One node group's planned resize, as CA prints it in scale-up events."""

    group: str
    current: int
    new: int
    max: int

    def __str__(self) -> str:
        return f"{{{self.group} {self.current}->{self.new} (max: {self.max})}}"


class messages:
    """CA's event messages, word for word."""

    @staticmethod
    def scaled_up_group(group: str, current: int, new: int, max_size: int) -> str:
        return (
            f"Scale-up: setting group {group} size to {new} instead of {current} (max: {max_size})"
        )

    @staticmethod
    def triggered_scale_up(resizes: Iterable[GroupResize]) -> str:
        return f"pod triggered scale-up: [{' '.join(str(r) for r in resizes)}]"

    @staticmethod
    def not_trigger_scale_up(reasons: Iterable[str]) -> str:
        return f"pod didn't trigger scale-up: {', '.join(reasons)}"

    @staticmethod
    def scale_down_empty(node: str) -> str:
        # Current CA quotes the name (%q).
        return f'Scale-down: removing empty node "{node}"'

    @staticmethod
    def scale_down(node: str, utilization: float, pods: Iterable[str]) -> str:
        return (
            f"Scale-down: removing node {node}, utilization: {utilization:g}, "
            f"pods to reschedule: {','.join(pods)}"
        )

    @staticmethod
    def node_marked() -> str:
        return "marked the node as toBeDeleted/unschedulable"

    @staticmethod
    def node_deleted() -> str:
        return "nodes removed by cluster autoscaler"

    @staticmethod
    def node_removed(node: str, *, drain: bool) -> str:
        """On the status ConfigMap once the node is gone."""
        if drain:
            return f"Scale-down: node {node} removed with drain"
        return f"Scale-down: empty node {node} removed"

    @staticmethod
    def pod_evicted() -> str:
        return "deleting pod for node scale down"

    @staticmethod
    def scale_down_failed(error: str, *, drain: bool) -> str:
        if drain:
            return f"failed to drain and delete node: {error}"
        return f"failed to delete empty node: {error}"

    @staticmethod
    def taint_failed(error: str) -> str:
        return f"failed to mark the node as toBeDeleted/unschedulable: {error}"

    @staticmethod
    def pod_eviction_failed() -> str:
        """On each pod whose eviction failed (ScaleDownFailed, Warning)."""
        return "failed to delete pod for ScaleDown"

    @staticmethod
    def failed_to_scale_up_group(group: str, error: str) -> str:
        return f"Scale-up failed for group {group}: {error}"

    @staticmethod
    def scale_up_failed(nodes: int, group: str, error: str, sources: str) -> str:
        return (
            f"Failed adding {nodes} nodes to group {group} due to {error}; source errors: {sources}"
        )

    @staticmethod
    def scale_up_timed_out(group: str, waited: timedelta) -> str:
        return f"Nodes added to group {group} failed to register within {format_duration(waited)}"

    @staticmethod
    def failed_to_revert_scale_up(group: str, error: str) -> str:
        return f"Failed to revert scale-up of group {group} after it timed out: {error}"

    @staticmethod
    def max_nodes_total_reached(max_nodes_total: int) -> str:
        return f"Max total nodes in cluster reached: {max_nodes_total}"

    @staticmethod
    def cluster_unhealthy() -> str:
        return "Cluster is unhealthy"

    @staticmethod
    def delete_unregistered(node: str) -> str:
        return f"Removed unregistered node {node}"

    @staticmethod
    def delete_unregistered_failed(node: str, error: str) -> str:
        return f"Failed to remove node {node}: {error}"

    @staticmethod
    def taint_cleaned(taint: str, node: str) -> str:
        return f"removed {taint} taint from node {node}"

    @staticmethod
    def taint_cleanup_failed(taint: str, node: str, error: str) -> str:
        return f"failed to clean {taint} on node {node}: {error}"
