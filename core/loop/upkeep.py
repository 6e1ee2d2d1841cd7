"""Cluster upkeep, between observing the cluster and deciding: the taints an earlier run
(or a failed rollback of ours) left on nodes, instances that never registered in time or
failed to be created, and requested capacity of scale-ups that timed out.

Nothing here deletes on a guess: no instance goes while a cache is stale, and an instance
goes as unregistered only once a fresh list of the Nodes confirms that none carries it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import structlog
from clusterscaler.framework.clusteractions import ClusterActions
from clusterscaler.framework.errors import LoopError, describe
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import CloudProviderError, NodeGroup, delete_nodes
from clusterscaler.loop.clusterstate import (
    ClusterState,
    create_error_nodes,
    long_unregistered_nodes,
)
from clusterscaler.loop.decisions import DeletionKind, FailedRevert, NodeDeletion
from clusterscaler.loop.scaledown.actuator import Actuator, has_autoscaler_taint
from clusterscaler.model import Node

__all__ = ["ClusterUpkeep"]

log = structlog.get_logger()


class ClusterUpkeep:
    """The upkeep of one autoscaler, and what it remembers between loops."""

    def __init__(
        self, options: AutoscalingOptions, actions: ClusterActions, actuator: Actuator
    ) -> None:
        self.options = options
        self.actions = actions
        self.actuator = actuator
        # Nodes carrying our taints when this process first looked, left by an earlier run
        # (a crash mid-drain), and nodes a failed rollback left tainted; None until the
        # first loop. Cleaning is retried every loop until each of them is done.
        self.stale_taint_nodes: set[str] | None = None
        # Timed-out scale-ups whose target could not be decreased back, for the result.
        self._failed_reverts: list[FailedRevert] = []

    def take_failed_reverts(self) -> list[FailedRevert]:
        """The failed reverts of timed-out scale-ups since the last call."""
        failed, self._failed_reverts = self._failed_reverts, []
        return failed

    def clean_stale_taints(self, nodes: Sequence[Node], in_flight: Collection[str]) -> bool:
        """Remove the taints an earlier run left (see `stale_taint_nodes`), and those a
        failed rollback of ours left, node by node, until every such node is done; True
        when a node changed."""
        if self.options.dry_run:
            return False
        if self.stale_taint_nodes is None:
            self.stale_taint_nodes = {n.name for n in nodes if has_autoscaler_taint(n)}
        self.stale_taint_nodes |= self.actuator.take_untaint_failures()
        pending = self.stale_taint_nodes - set(in_flight)
        if not pending:
            self.stale_taint_nodes.clear()
            return False
        cleaned, failed = self.actuator.clean_stale_taints(n for n in nodes if n.name in pending)
        self.stale_taint_nodes = set(failed)
        if failed:
            log.warning("stale_taints_remaining", nodes=sorted(failed), retry="next loop")
        return bool(cleaned)

    def clean_up_instances(
        self, state: ClusterState, errors: list[str], stale: tuple[str, ...]
    ) -> list[NodeDeletion]:
        """Remove instances that never registered in time or failed to be created, and
        cancel requested capacity of scale-ups that timed out. The group states are updated
        so that the rest of the loop sees the new targets.

        Nothing is deleted while a cache is stale (an instance looks unregistered when the
        node cache missed its Node), and an unregistered instance only once a fresh list of
        the Nodes confirms that none belongs to it."""
        out: list[NodeDeletion] = []
        if self.options.dry_run:
            return out
        unregistered = list(long_unregistered_nodes(state))
        failed = list(create_error_nodes(state))
        if stale and (unregistered or failed):
            log.warning("instance_cleanup_skipped", reason="stale caches", caches=list(stale))
            unregistered, failed = [], []
        registered = self._registered(
            [f.provider_id for _, fakes in unregistered for f in fakes], errors
        )
        for g, fakes in unregistered:
            if registered is None:
                break
            fakes = [f for f in fakes if f.provider_id not in registered]
            allowed = len(fakes)
            if not self.options.force_delete_unregistered_nodes:
                allowed = max(0, min(allowed, g.target - g.group.min_size))
            if allowed <= 0:
                continue
            done = self._delete_instances(
                g.group,
                fakes[:allowed],
                DeletionKind.UNREGISTERED,
                errors,
                force=self.options.force_delete_unregistered_nodes,
            )
            g.target -= sum(1 for d in done if d.ok)
            out.extend(done)
        for g, fakes in failed:
            done = self._delete_instances(
                g.group,
                fakes,
                DeletionKind.CREATE_ERROR,
                errors,
                force=self.options.force_delete_failed_nodes,
            )
            g.target -= sum(1 for d in done if d.ok)
            out.extend(done)
        for req in state.timed_out:
            timed = state.groups.get(req.node_group)
            if timed is None:
                continue
            g = timed
            # Capacity requested but never turned into instances has nothing to delete.
            never_created = (
                g.target
                - g.counts.total
                - len(g.unregistered)
                - len(g.long_unregistered)
                - len(g.create_errors)
            )
            if never_created > 0:
                try:
                    g.group.decrease_target_size(-never_created)
                    # This loop must not count the cancelled capacity as upcoming.
                    g.target -= never_created
                    g.upcoming = max(0, g.upcoming - never_created)
                    log.info(
                        "scale_up_cancelled",
                        node_group=g.id,
                        delta=-never_created,
                        reason="timeout",
                    )
                except CloudProviderError as exc:
                    message = f"node group {g.id}: decrease_target_size failed: {exc}"
                    errors.append(LoopError(message, describe(exc).type))
                    self._failed_reverts.append(FailedRevert(g.id, -never_created, str(exc)))
                    log.warning(
                        "scale_up_revert_failed",
                        node_group=g.id,
                        delta=-never_created,
                        **describe(exc).fields(exc),
                    )
        return out

    def _registered(self, provider_ids: list[str], errors: list[str]) -> set[str] | None:
        """Which of these instances, unregistered by the cache, have a Node after all (a
        fresh read); None when the read failed, so nothing is deleted as unregistered."""
        if not provider_ids:
            return set()
        try:
            registered = self.actions.registered_instances(provider_ids)
        except Exception as exc:
            info = describe(exc)
            errors.append(LoopError(f"confirming unregistered instances failed: {info}", info.type))
            log.error("unregistered_check_failed", **info.fields(exc))
            return None
        for provider_id in sorted(registered):
            log.warning(
                "unregistered_instance_has_node",
                instance=provider_id,
                reason="the node cache missed its Node; not deleted",
            )
        return registered

    def _delete_instances(
        self,
        group: NodeGroup,
        fakes: list[Node],
        kind: DeletionKind,
        errors: list[str],
        *,
        force: bool = False,
    ) -> list[NodeDeletion]:
        """Delete the instances; with `force`, through the group's `force_delete_nodes`
        (whatever its min size) where it has one, as CA's --force-delete-* flags do."""
        try:
            delete_nodes(group, fakes, force=force)
        except CloudProviderError as exc:
            message = f"node group {group.id}: deleting {kind.value} instances failed: {exc}"
            error_type = describe(exc).type
            errors.append(LoopError(message, error_type))
            log.error(
                "instance_cleanup_failed", node_group=group.id, kind=kind.value, error=str(exc)
            )
            return [
                NodeDeletion(f.name, group.id, kind, error=str(exc), error_type=error_type)
                for f in fakes
            ]
        log.info("instances_removed", node_group=group.id, kind=kind.value, count=len(fakes))
        return [NodeDeletion(f.name, group.id, kind) for f in fakes]
