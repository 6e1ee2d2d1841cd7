"""Carrying out scale-up decisions: `increase_size` per group; a group whose call fails is
backed off and the others go on."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import structlog
from clusterscaler.framework.cloudprovider import (
    CloudProviderError,
    InstanceCreationError,
    InstanceErrorClass,
)
from clusterscaler.framework.errors import LoopError, describe
from clusterscaler.loop.clusterstate import ClusterState, ClusterStateRegistry
from clusterscaler.loop.decisions import ScaleUpDecision, ScaleUpFailure, ScaleUpFailureKind

log = structlog.get_logger()


def execute_scale_up(
    decisions: Sequence[ScaleUpDecision],
    state: ClusterState,
    registry: ClusterStateRegistry,
    now: datetime,
    *,
    dry_run: bool = False,
) -> tuple[list[ScaleUpDecision], list[str]]:
    """Call `increase_size` for each decision. Returns what succeeded and error messages;
    a failing group is backed off."""
    done: list[ScaleUpDecision] = []
    errors: list[str] = []
    for d in decisions:
        g = state.groups[d.node_group]
        if dry_run:
            log.info("scale_up", node_group=d.node_group, delta=d.delta, dry_run=True)
            done.append(d)
            continue
        try:
            g.group.increase_size(d.delta)
        except CloudProviderError as exc:
            message = f"node group {d.node_group}: increase_size({d.delta}) failed: {exc}"
            log.error("scale_up_failed", node_group=d.node_group, delta=d.delta, error=str(exc))
            error_type = describe(exc).type
            # A refusal the provider classifies (a stockout, a quota) backs off as such.
            info = exc.info if isinstance(exc, InstanceCreationError) else None
            registry.register_failed_scale_up(
                d.node_group,
                now,
                error_class=(info.error_class if info else InstanceErrorClass.OTHER).value,
                error_code=info.error_code if info else "cloudProviderError",
                message=str(exc),
                failures=(
                    ScaleUpFailure(
                        d.node_group,
                        ScaleUpFailureKind.INCREASE_SIZE,
                        error_type.value,
                        d.delta,
                        error=str(exc),
                    ),
                ),
            )
            errors.append(LoopError(message, error_type))
            continue
        registry.register_scale_up(g.group, d.delta, now)
        log.info(
            "scale_up",
            node_group=d.node_group,
            delta=d.delta,
            target=d.target_before + d.delta,
            pods=len(d.pods),
            reason=d.reason,
        )
        done.append(d)
    return done, errors
