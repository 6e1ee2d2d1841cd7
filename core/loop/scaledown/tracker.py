"""Deletions in flight between loops (CA's `NodeDeletionTracker`).

The loop records a node here when it starts deleting it; the background work records the
outcome when it finishes. Until then the next loops treat the node as being deleted: it is
counted in the status as beingDeleted, is never a scale-down candidate nor a destination for
moved pods, counts against --max-scale-down-parallelism and --max-drain-parallelism, and is
subtracted from its group's size for the min-size check. Finished deletions wait here until
the next loop takes them, so their events and metrics are reported exactly once.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

import structlog
from clusterscaler.loop.decisions import NodeDeletion

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class InFlightDeletion:
    """A node whose deletion has started and not finished."""

    node: str
    node_group: str
    drain: bool
    started: datetime


class DeletionTracker:
    """Thread-safe record of deletions in flight and finished ones not yet reported."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight: dict[str, InFlightDeletion] = {}
        self._finished: list[NodeDeletion] = []

    def start(self, node: str, node_group: str, *, drain: bool, now: datetime) -> None:
        with self._lock:
            if node in self._in_flight:
                raise ValueError(f"node {node}: a deletion is already in flight")
            self._in_flight[node] = InFlightDeletion(node, node_group, drain, now)

    def finish(self, result: NodeDeletion) -> None:
        """Record the outcome of a deletion (started or refused before it could start)."""
        with self._lock:
            self._in_flight.pop(result.node, None)
            self._finished.append(result)

    def in_flight(self) -> Mapping[str, InFlightDeletion]:
        """A copy of the deletions in flight, by node name."""
        with self._lock:
            return MappingProxyType(dict(self._in_flight))

    def take_finished(self) -> list[NodeDeletion]:
        """The deletions finished since the last call, in the order they finished."""
        with self._lock:
            out, self._finished = self._finished, []
            return out
