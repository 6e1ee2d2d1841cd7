"""Faults the fake API server can inject: one-off rules and a seeded random schedule.

Every fault is one ``FaultKind``, the ways real API servers, proxies and networks misbehave:

- ``ERROR``, ``ERROR_500``, ``ERROR_503``, ``ERROR_429``: an error answer (a ``Status``
  object; 429 carries ``Retry-After: 1``). The request is not carried out.
- ``SLOW``: the request waits ``delay`` seconds, then is carried out and answered. Past the
  client's read timeout the answer is lost, but the change (if any) is made, as on a real
  server whose client gave up.
- ``TIMEOUT``: the request waits ``delay`` seconds, is carried out, and the connection is
  closed without an answer: what a client sees when its timeout passed, without having to
  wait for it.
- ``DROP``: the connection is closed at once, without an answer; nothing is carried out.
- ``WATCH_END``: a watch is answered 200 with a stream that ends at once, with no event.
- ``WATCH_LIST``: a watch is answered with the plain list body, as a server or proxy that
  ignores ``watch=true`` would.
- ``WATCH_GARBAGE``: a watch stream starts with lines that are not JSON watch events, then
  goes on as usual.
- ``WATCH_GONE``: a watch gets an ``ERROR`` event carrying a 410 ``Status`` (too old
  resource version) and ends, whatever resourceVersion it asked for.

The watch kinds only apply to watch requests.

``Fault`` is a rule a test adds with ``FakeKubeServer.add_fault`` (these requests, this
many times). ``FaultSchedule`` decides for every request, at given rates per kind, whether
to inject a fault: the decision for the n-th request of a (method, path, watch) is a function
of the seed and n only, so a run is reproducible as far as the order of requests on one path
is (threads interleave different paths freely; that does not change any decision). Setting
``enabled`` to False lets the cluster converge; ``injected`` counts what was injected.
"""

from __future__ import annotations

import random
import re
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "WATCH_KINDS",
    "Fault",
    "FaultKind",
    "FaultSchedule",
    "Injection",
]


class FaultKind(Enum):
    """How a request misbehaves (see the module docstring)."""

    ERROR = "error"  # the status of the rule
    ERROR_500 = "500"
    ERROR_503 = "503"
    ERROR_429 = "429"
    SLOW = "slow"
    TIMEOUT = "timeout"
    DROP = "drop"
    WATCH_END = "watch-end"
    WATCH_LIST = "watch-list"
    WATCH_GARBAGE = "watch-garbage"
    WATCH_GONE = "watch-gone"

    @property
    def status(self) -> int | None:
        """The HTTP status an error kind answers with (None for ``ERROR``: the rule's)."""
        return int(self.value) if self.value.isdigit() else None


WATCH_KINDS = frozenset(
    {FaultKind.WATCH_END, FaultKind.WATCH_LIST, FaultKind.WATCH_GARBAGE, FaultKind.WATCH_GONE}
)
_ERROR_KINDS = frozenset(
    {FaultKind.ERROR, FaultKind.ERROR_500, FaultKind.ERROR_503, FaultKind.ERROR_429}
)

# Lines a broken proxy or a truncated write puts on a watch stream.
GARBAGE_LINES = (
    b"<html><body><h1>502 Bad Gateway</h1></body></html>",
    b'{"type": "MODIFIED", "object": {"metadata": ',
    b"\x00\xff not json",
)


@dataclass(frozen=True)
class Injection:
    """What to do with one request: the fault kind and its parameters."""

    kind: FaultKind
    status: int | None = None
    delay: float = 0.0
    message: str = "injected fault"

    @property
    def is_error(self) -> bool:
        return self.kind in _ERROR_KINDS

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": "1"} if self.status == 429 else {}


@dataclass
class Fault:
    """An injected failure: requests matching every given criterion are faulted.

    ``path`` is a regular expression searched in the request path; ``times`` limits how many
    requests are affected (None: all until removed). Without ``kind``, ``status`` fails the
    request after ``delay`` seconds (None only delays); with ``kind``, the request
    misbehaves that way (``delay`` is the wait of ``SLOW`` and ``TIMEOUT``). A watch kind
    only matches watch requests.
    """

    method: str | None = None
    path: str | None = None
    status: int | None = None
    delay: float = 0.0
    times: int | None = None
    watch: bool | None = None
    message: str = "injected fault"
    hits: int = 0
    kind: FaultKind | None = None

    def __post_init__(self) -> None:
        if self.kind is FaultKind.ERROR and self.status is None:
            raise ValueError("Fault(kind=FaultKind.ERROR) needs a status")
        if self.kind is not None and self.kind.status is not None:
            if self.status not in (None, self.kind.status):
                raise ValueError(f"Fault kind {self.kind.name} answers {self.kind.status}")
            self.status = self.kind.status

    def matches(self, method: str, path: str, watch: bool) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method is not None and self.method.upper() != method:
            return False
        if self.watch is not None and self.watch != watch:
            return False
        if self.kind in WATCH_KINDS and not watch:
            return False
        return self.path is None or re.search(self.path, path) is not None

    def injection(self) -> Injection:
        if self.kind is None:
            if self.status is None:
                return Injection(FaultKind.SLOW, delay=self.delay, message=self.message)
            return Injection(FaultKind.ERROR, self.status, self.delay, self.message)
        return Injection(self.kind, self.status, self.delay, self.message)


@dataclass
class FaultSchedule:
    """Seeded random faults on every matching request, at ``rates`` per kind.

    ``rates`` maps kinds to the probability that one request gets that fault; watch kinds
    count only for watch requests, and the rates a request can get must add up to at most
    1. ``paths`` (a regular expression searched in the request path) and ``methods`` limit
    the requests considered. ``slow_seconds`` is the wait of ``SLOW`` and ``TIMEOUT``.
    ``ERROR`` cannot be scheduled: use the kinds with a status.
    """

    seed: int
    rates: Mapping[FaultKind, float]
    paths: str | None = None
    methods: frozenset[str] | None = None
    slow_seconds: float = 1.0
    enabled: bool = True
    injected: Counter[FaultKind] = field(default_factory=Counter)
    # (method, path, kind) of every injected fault, in the order they were decided.
    history: list[tuple[str, str, FaultKind]] = field(default_factory=list)
    _counts: Counter[tuple[str, str, bool]] = field(default_factory=Counter, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if FaultKind.ERROR in self.rates:
            raise ValueError("FaultSchedule: schedule ERROR_500, ERROR_503 or ERROR_429")
        for kind, rate in self.rates.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"FaultSchedule: rate of {kind.name} must be in [0, 1]")
        if sum(self.rates.values()) > 1.0 + 1e-9:
            raise ValueError("FaultSchedule: the rates add up to more than 1")
        if self.methods is not None:
            self.methods = frozenset(m.upper() for m in self.methods)
        # A fixed order, so a decision never depends on how `rates` was built.
        self._order = [k for k in FaultKind if self.rates.get(k, 0.0) > 0.0]

    def decide(self, method: str, path: str, watch: bool) -> Injection | None:
        """The fault for this request, if any (counted in ``injected`` and ``history``)."""
        if not self.enabled:
            return None
        if self.methods is not None and method not in self.methods:
            return None
        if self.paths is not None and re.search(self.paths, path) is None:
            return None
        with self._lock:
            key = (method, path, watch)
            n = self._counts[key]
            self._counts[key] = n + 1
            # A string seed is hashed with SHA-512: stable across runs and interpreters.
            draw = random.Random(f"{self.seed}|{method}|{path}|{watch}|{n}").random()
            chosen: FaultKind | None = None
            cumulative = 0.0
            for kind in self._order:
                if kind in WATCH_KINDS and not watch:
                    continue
                cumulative += self.rates[kind]
                if draw < cumulative:
                    chosen = kind
                    break
            if chosen is None:
                return None
            self.injected[chosen] += 1
            self.history.append((method, path, chosen))
        delay = self.slow_seconds if chosen in (FaultKind.SLOW, FaultKind.TIMEOUT) else 0.0
        return Injection(
            chosen, chosen.status, delay, f"injected {chosen.value} (seed {self.seed})"
        )
