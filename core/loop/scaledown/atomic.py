"""Deleting the nodes of a zero-or-max (atomic) node group together (CA's
GroupDeletionScheduler, for one group).

Each node is prepared on its own (drained, or its DaemonSet pods evicted) and then waits in
the group's `AtomicDeletion` until all of the group's nodes are ready; the last one in
deletes them all with one `delete_nodes` call. When one node fails, the group fails as a
whole: the nodes already waiting, and those that finish later, are rolled back (their
taint removed) and reported failed, and nothing is deleted. Pods already evicted stay
evicted: their controllers recreate them, as after any failed drain.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Item = TypeVar("Item")


@dataclass(frozen=True, slots=True)
class Waiting(Generic[Item]):
    """A node prepared for deletion, waiting for the rest of its group."""

    name: str
    item: Item


class AtomicDeletion(Generic[Item]):
    """The deletion of all the nodes of one group at once; thread-safe.

    `ready` adds a prepared node; `fail` fails the group. Each returns the nodes the caller
    now acts on, so that every node is acted on exactly once: deleted with the others, or
    rolled back.
    """

    def __init__(self, group: str, nodes: Sequence[str]) -> None:
        self.group = group
        self.nodes = tuple(nodes)
        self._lock = threading.Lock()
        self._waiting: list[Waiting[Item]] = []
        self._failure = ""

    @property
    def failure(self) -> str:
        """Why the group failed, or "" while it has not."""
        with self._lock:
            return self._failure

    def ready(self, name: str, item: Item) -> list[Waiting[Item]] | None:
        """Node `name` is prepared. Returns every node of the group when it is the last
        one (the caller deletes them all), [] when others are still being prepared (it
        waits), or None when the group has failed (the caller rolls it back)."""
        with self._lock:
            if self._failure:
                return None
            self._waiting.append(Waiting(name, item))
            if len(self._waiting) < len(self.nodes):
                return []
            done, self._waiting = self._waiting, []
            return done

    def fail(self, why: str) -> list[Waiting[Item]]:
        """The group fails because of `why` (the first failure is kept). Returns the nodes
        that were waiting: the caller rolls them back."""
        with self._lock:
            if not self._failure:
                self._failure = why
            waiting, self._waiting = self._waiting, []
            return waiting
