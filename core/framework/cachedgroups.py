"""Node groups over a provider's cache of its cloud, as every cloud provider keeps them.

A provider reads its cloud once per refresh into records, one per node group, and hands
out node group objects that read the current record on each call: a group that left the
cache (deleted, no longer discovered) raises `NodeGroupNotFoundError` naming it instead of
answering with stale sizes. `CachedNodeGroup` is that object's common part (the record
lookup, the limits, the debug line) and `NodeGroupMemo` keeps one object per group, so
that the core may compare groups by identity between loops.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

from clusterscaler.interfaces.cloudprovider import GroupRecord, NodeGroupNotFoundError

R = TypeVar("R", bound=GroupRecord)
K = TypeVar("K", bound=Hashable)
G = TypeVar("G")


class CachedNodeGroup(abc.ABC, Generic[R]):
    """The part of a node group that reads its provider's cache: `record()` and the
    limits. A subclass says how to find its record and how its cloud calls it."""

    @abc.abstractmethod
    def lookup(self) -> R | None:
        """The group's record in the provider's cache, or None when it left it."""

    @abc.abstractmethod
    def describe(self) -> str:
        """The group as its cloud calls it, for errors (`ASG 'workers'`)."""

    def exist(self) -> bool:
        """Whether the group is still in the provider's cache."""
        return self.lookup() is not None

    def record(self) -> R:
        """The group's current record; raises `NodeGroupNotFoundError` once it is gone."""
        record = self.lookup()
        if record is None:
            raise NodeGroupNotFoundError(f"{self.describe()} is no longer managed or {self.gone_reason}")
        return record

    # How a group whose record is gone is described after "no longer managed or".
    gone_reason = "no longer exists"

    @property
    def min_size(self) -> int:
        return self.record().min_size

    @property
    def max_size(self) -> int:
        return self.record().max_size

    @property
    @abc.abstractmethod
    def id(self) -> str:
        """The group's id, as the core and the status ConfigMap name it."""

    @abc.abstractmethod
    def target_size(self) -> int:
        """The group's target size, from its record."""

    def debug(self) -> str:
        """`<id> (<min>:<max>, target <size><details>)` and the first of the group's
        problems, or `<id> (<gone_reason>)` once its record is gone."""
        record = self.lookup()
        if record is None:
            return f"{self.id} ({self.gone_reason})"
        text = (
            f"{self.id} ({record.min_size}:{record.max_size}, target {self.target_size()}"
            f"{self.debug_details(record)})"
        )
        problems = self.debug_problems(record)
        if problems:
            # Bad tags are otherwise only in the logs; status readers see them here.
            text += f"; {len(problems)} problem(s): {problems[0]}"
        return text

    def debug_details(self, record: R) -> str:
        """What the cloud adds after the target in `debug()` (`, Standard_D4s_v3`)."""
        return ""

    def debug_problems(self, record: R) -> Sequence[object]:
        """What is wrong with the group in `record` (bad tags), for `debug()`."""
        return ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r})"


class NodeGroupMemo(Generic[K, G]):
    """One node group object per key, made by `make` on first use; thread-safe."""

    def __init__(self, make: Callable[[K], G]) -> None:
        self._make = make
        self._groups: dict[K, G] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> G:
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = self._make(key)
            return group

    def clear(self) -> None:
        with self._lock:
            self._groups.clear()
