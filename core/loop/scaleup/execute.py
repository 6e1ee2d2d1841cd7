"""Carrying out scale-up decisions: `increase_size` per group; a group whose call fails is
backed off.

As in CA's scale-up executor, the groups of one scale-up (similar groups balanced, or the
groups raised to their min size) are increased one after another, and the first failure
ends the scale-up: the groups after it are not asked. With --parallel-scale-up every group
is asked at once, and each failure is reported."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import structlog
from clusterscaler.framework.errors import ErrorType, LoopError, describe
from clusterscaler.interfaces.cloudprovider import (
    CloudProviderError,
    InstanceCreationError,
    InstanceErrorClass,
)
from clusterscaler.loop.clusterstate import ClusterState, ClusterStateTracker
from clusterscaler.loop.decisions import ScaleUpDecision, ScaleUpFailure, ScaleUpFailureKind

log = structlog.get_logger()


def execute_scale_up(
    decisions: Sequence[ScaleUpDecision],
    state: ClusterState,
    state_tracker: ClusterStateTracker,
    now: datetime,
    *,
    dry_run: bool = False,
    parallel: bool = False,
) -> tuple[list[ScaleUpDecision], list[str]]:
    """Call `increase_size` for each decision (all at once with `parallel`, otherwise in
    order until one fails). Returns what succeeded and error messages; a failing group is
    backed off."""
    done: list[ScaleUpDecision] = []
    errors: list[str] = []
    if dry_run:
        for d in decisions:
            log.info("scale_up", node_group=d.node_group, delta=d.delta, dry_run=True)
            done.append(d)
        return done, errors
    outcomes: list[CloudProviderError | None] = []
    if parallel and len({d.node_group for d in decisions}) != len(decisions):
        # Two calls on one group at once could each read the same old size (CA checks
        # this too, and fails the scale-up).
        groups = ", ".join(d.node_group for d in decisions)
        log.error("scale_up_failed", node_groups=groups, error="a node group is named twice")
        errors.append(LoopError(f"scale-up names a node group twice: {groups}", ErrorType.INTERNAL))
        return done, errors
    if parallel and len(decisions) > 1:
        with ThreadPoolExecutor(max_workers=len(decisions)) as pool:
            outcomes = list(pool.map(lambda d: _increase(state, d), decisions))
    else:
        for d in decisions:
            outcome = _increase(state, d)
            outcomes.append(outcome)
            if outcome is not None:
                break
    for d, outcome in zip(decisions, outcomes, strict=False):
        g = state.groups[d.node_group]
        if outcome is not None:
            exc = outcome
            message = f"node group {d.node_group}: increase_size({d.delta}) failed: {exc}"
            log.error("scale_up_failed", node_group=d.node_group, delta=d.delta, error=str(exc))
            error_type = describe(exc).type
            # A refusal the provider classifies (a stockout, a quota) backs off as such.
            info = exc.info if isinstance(exc, InstanceCreationError) else None
            state_tracker.register_failed_scale_up(
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
        state_tracker.register_scale_up(g.group, d.delta, now)
        log.info(
            "scale_up",
            node_group=d.node_group,
            delta=d.delta,
            target=d.target_before + d.delta,
            pods=len(d.pods),
            reason=d.reason,
        )
        done.append(d)
    for d in decisions[len(outcomes) :]:
        log.warning(
            "scale_up_not_attempted",
            node_group=d.node_group,
            delta=d.delta,
            reason="an earlier group of this scale-up failed",
        )
    return done, errors


def _increase(state: ClusterState, d: ScaleUpDecision) -> CloudProviderError | None:
    """One `increase_size` call; the provider's error, if any, as a value."""
    try:
        state.groups[d.node_group].group.increase_size(d.delta)
    except CloudProviderError as exc:
        return exc
    return None
