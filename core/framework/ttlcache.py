"""Answers of a cloud reused for a while: the throttle on a provider's reads.

A provider asks its cloud some things far less often than the loop runs (a launch
template's instance type, whether an instance still exists): `TtlCache` keeps each answer
for `ttl` seconds of its clock, so that a loop every 10 seconds does not cost a call per
node per loop, and a changed answer is seen within `ttl`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Entry(Generic[T]):
    value: T
    expires: float


class TtlCache(Generic[T]):
    """A small thread-safe map whose entries expire `ttl` seconds (of `clock`) after they
    were computed; with `ttl_of`, each answer's own ttl (a read that failed, kept as an
    answer, is asked again sooner than one that succeeded)."""

    def __init__(
        self,
        ttl: float,
        clock: Callable[[], float],
        *,
        ttl_of: Callable[[T], float] | None = None,
    ) -> None:
        self._ttl = ttl
        self._clock = clock
        self._ttl_of = ttl_of
        self._entries: dict[Hashable, _Entry[T]] = {}
        self._lock = threading.Lock()

    def get_or(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The answer for `key`, computed by `compute` when there is none younger than the
        ttl. `compute` runs outside the lock; an exception from it is not kept."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and now < entry.expires:
                return entry.value
        value = compute()
        ttl = self._ttl if self._ttl_of is None else self._ttl_of(value)
        with self._lock:
            # Expired entries go when a new one comes, so the map stays as large as what is
            # asked within one ttl.
            self._entries = {k: e for k, e in self._entries.items() if now < e.expires}
            self._entries[key] = _Entry(value=value, expires=now + ttl)
        return value
