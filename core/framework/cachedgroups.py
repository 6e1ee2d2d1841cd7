"""Node groups over a provider's cache of its cloud, as every cloud provider keeps them.

A provider reads its cloud once per refresh into records, one per node group, and hands
out node group objects that read the current record on each call: a group that left the
cache (deleted, no longer discovered) raises `NodeGroupNotFoundError` naming it instead of
answering with stale sizes. `CachedNodeGroup` is that object's common part (the record
lookup, the limits, the debug line), `NodeGroupMemo` keeps one object per group, so
that the core may compare groups by identity between loops, and `GroupIndex` is the cache's
own common part: the records by key and the group listing each instance, so that a node is
mapped to its group by its provider ID without a call to the cloud.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Generic, Protocol, Self, TypeVar

from clusterscaler.interfaces.cloudprovider import GroupRecord, NodeGroupNotFoundError

R = TypeVar("R", bound=GroupRecord)
K = TypeVar("K", bound=Hashable)
G = TypeVar("G")


class SortableKey(Protocol):
    """A key that can be hashed and sorted (a name, a frozen ordered dataclass)."""

    def __hash__(self) -> int: ...

    def __lt__(self, other: Self, /) -> bool: ...


GK = TypeVar("GK", bound=SortableKey)
IK = TypeVar("IK", bound=Hashable)


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


class GroupIndex(Generic[GK, R, IK]):
    """The records of a provider's node groups by key (`GK`), and which group lists each
    instance (by the instance key `IK` the cloud's provider IDs reduce to), read and
    replaced under one re-entrant lock, `_lock`.

    A provider's cache subclasses it and guards its own fields with the same `_lock`, so
    that a refresh swaps the records, the instance map and its own bookkeeping at once:
    a reader never sees records of one refresh with instances of another."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._records: dict[GK, R] = {}
        self._groups: dict[IK, GK] = {}

    def records(self) -> list[R]:
        """Every record, in the order of their keys."""
        with self._lock:
            return [self._records[key] for key in sorted(self._records)]

    def get(self, key: GK) -> R | None:
        """The record of group `key`, or None when the last refresh did not keep it."""
        with self._lock:
            return self._records.get(key)

    def group_of(self, instance: IK) -> GK | None:
        """The key of the group listing `instance`, or None when no group lists it."""
        with self._lock:
            return self._groups.get(instance)

    def replace(self, records: Mapping[GK, R], instances: Mapping[IK, GK] | None = None) -> None:
        """Swap in the records of a refresh and, when given, its instance map; without
        one, each instance stays with its group while that group is still in `records`
        (for a cache that lists the instances of each group on its own schedule)."""
        with self._lock:
            self._records = dict(records)
            if instances is None:
                self._groups = {i: k for i, k in self._groups.items() if k in self._records}
            else:
                self._groups = dict(instances)

    def add_instances(self, key: GK, instances: Iterable[IK]) -> None:
        """Record that group `key` lists `instances` (a fresh listing of one group)."""
        with self._lock:
            for instance in instances:
                self._groups[instance] = key

    def relist(self, key: GK, instances: Iterable[IK]) -> None:
        """Record that group `key` lists exactly `instances` now: those it listed before
        and no longer does belong to no group."""
        with self._lock:
            self._groups = {i: k for i, k in self._groups.items() if k != key}
            self.add_instances(key, instances)
