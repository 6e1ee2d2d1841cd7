"""Unneeded-since timers, how long each node must stay unneeded, and the recheck delay of
unremovable nodes."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import structlog
from clusterscaler.interfaces.cloudprovider import NodeGroupOptions
from clusterscaler.loop.decisions import UnremovableReason
from clusterscaler.loop.taints import DELETION_CANDIDATE_TAINT
from clusterscaler.model import Node

log = structlog.get_logger()


def required_unneeded_time(
    options: NodeGroupOptions, ready: bool
) -> tuple[timedelta, UnremovableReason]:
    """How long a node of a group with these (effective) options must be unneeded before
    it may go: --scale-down-unneeded-time for a ready node, --scale-down-unready-time for
    an unready one, each overridable per group; and the reason a node that has not waited
    that long is kept."""
    if ready:
        t = options.scale_down_unneeded_time
        assert t is not None, "effective options carry every value"
        return t, UnremovableReason.NOT_UNNEEDED_LONG_ENOUGH
    t = options.scale_down_unready_time
    assert t is not None, "effective options carry every value"
    return t, UnremovableReason.NOT_UNREADY_LONG_ENOUGH


class UnneededTimers:
    """When each node became unneeded; a node that stops being unneeded starts over."""

    def __init__(self) -> None:
        self.since: dict[str, datetime] = {}

    def update(self, unneeded: Iterable[str], now: datetime) -> None:
        current = set(unneeded)
        self.since = {n: t for n, t in self.since.items() if n in current}
        for n in current:
            self.since.setdefault(n, now)

    def load_from_taints(self, nodes: Iterable[Node], now: datetime, ttl: timedelta) -> None:
        """Take up the unneeded times an earlier run left on the nodes (with
        --node-deletion-candidate-ttl, as CA's LoadFromExistingTaints): a node whose
        DeletionCandidateOfClusterAutoscaler taint (its value, the unix time it was set) is
        not older than `ttl` counts as unneeded since then, once it is found unneeded
        again."""
        for node in nodes:
            taint = next((t for t in node.taints if t.key == DELETION_CANDIDATE_TAINT), None)
            if taint is None:
                continue
            try:
                since = datetime.fromtimestamp(int(taint.value), UTC)
            except (ValueError, OverflowError, OSError):
                log.info("deletion_candidate_taint_unreadable", node=node.name, value=taint.value)
                continue
            if since + ttl < now:
                log.debug("deletion_candidate_taint_stale", node=node.name, since=since.isoformat())
                continue
            self.since.setdefault(node.name, min(since, now))
            log.debug("deletion_candidate_taint_loaded", node=node.name, since=since.isoformat())

    def unneeded_for(self, node: str, now: datetime) -> timedelta:
        since = self.since.get(node)
        return timedelta(0) if since is None else now - since

    def drop(self, node: str) -> None:
        self.since.pop(node, None)

    def clear(self) -> None:
        """Forget every node: each must be unneeded for the full time again."""
        self.since.clear()


class UnremovableCache:
    """Nodes found unremovable are not simulated again until
    --unremovable-node-recheck-timeout has passed, unless the pods on them changed (a node
    whose blocking pod went away is worth checking at once)."""

    def __init__(self, recheck: timedelta) -> None:
        self.recheck = recheck
        self.until: dict[str, tuple[datetime, frozenset[str] | None]] = {}

    def add(self, node: str, now: datetime, pods: Iterable[str] | None = None) -> None:
        """Remember `node` as unremovable. With `pods` (the pods it had), a change of its
        pods ends the wait early; without, only time does (failed deletions)."""
        self.until[node] = (now + self.recheck, None if pods is None else frozenset(pods))

    def recently_unremovable(
        self, node: str, now: datetime, pods: Iterable[str] | None = None
    ) -> bool:
        entry = self.until.get(node)
        if entry is None:
            return False
        until, seen = entry
        if now >= until or (seen is not None and pods is not None and frozenset(pods) != seen):
            del self.until[node]
            return False
        return True

    def forget_missing(self, present: Iterable[str]) -> None:
        keep = set(present)
        self.until = {n: t for n, t in self.until.items() if n in keep}
