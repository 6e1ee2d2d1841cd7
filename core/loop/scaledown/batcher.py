"""--node-deletion-batcher-interval: nodes of one node group whose deletion is ready within
the interval are deleted with one `delete_nodes` call (CA's NodeDeletionBatcher).

The first node of a group that is ready (drained, or empty past
--node-delete-delay-after-taint) opens the group's batch and starts a work on the
`DeletionExecutor` that waits the interval; every node of the group ready meanwhile joins
the batch, and the work then hands the whole batch to the actuator, which deletes it in one
call. A failed call fails the nodes of that batch only, each rolled back as after any
failed deletion. With an interval of 0 there is no batcher: each node is deleted as soon as
it is ready.

The simulator's inline executor runs each work as soon as it is submitted: nothing could
join a batch, and the wait would only move the simulated clock, so the actuator makes no
batcher for it (each deletion has the same outcome; only the calls are not gathered).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

import structlog
from clusterscaler.framework.errors import describe
from clusterscaler.interfaces.cloudprovider import NodeGroup
from clusterscaler.loop.scaledown.executor import DeletionExecutor

__all__ = ["DeletionBatcher"]

log = structlog.get_logger()

Item = TypeVar("Item")


class DeletionBatcher(Generic[Item]):
    """Gathers the nodes ready for deletion per node group for `interval` seconds, then
    calls `flush(group, items)` once per batch (on the executor); thread-safe.

    `flush` reports the outcome of every item it is given and never raises; the batcher
    only decides which items go together and when.
    """

    def __init__(
        self,
        interval: float,
        executor: DeletionExecutor,
        sleep: Callable[[float], None],
        flush: Callable[[NodeGroup, list[Item]], None],
    ) -> None:
        if interval <= 0:
            raise ValueError(f"deletion batcher: interval {interval}: expected > 0")
        self.interval = interval
        self.executor = executor
        self.sleep = sleep
        self.flush = flush
        self._lock = threading.Lock()
        self._batches: dict[str, tuple[NodeGroup, list[tuple[str, Item]]]] = {}
        # Nodes added and not yet flushed: their deletion is in flight in a batch.
        self._held: set[str] = set()

    def add(self, group: NodeGroup, name: str, item: Item) -> None:
        """Node `name`, ready for deletion, joins the open batch of its group, or opens one."""
        with self._lock:
            batch = self._batches.get(group.id)
            opened = batch is None
            if batch is None:
                batch = self._batches[group.id] = (group, [])
            batch[1].append((name, item))
            self._held.add(name)
        log.debug("scale_down_batched", node=name, node_group=group.id, opened=opened)
        if opened:
            self.executor.submit(f"batch-{group.id}", functools.partial(self._run, group.id))

    def holds(self, name: str) -> bool:
        """Whether node `name` waits in a batch that has not been flushed yet."""
        with self._lock:
            return name in self._held

    def _run(self, group_id: str) -> None:
        try:
            self.sleep(self.interval)
        except Exception as exc:
            # The batch is deleted now rather than never.
            log.error("scale_down_batch_wait_failed", **describe(exc).fields(exc))
        finally:
            with self._lock:
                group, batch = self._batches.pop(group_id)
            try:
                self.flush(group, [item for _, item in batch])
            finally:
                with self._lock:
                    self._held.difference_update(name for name, _ in batch)
