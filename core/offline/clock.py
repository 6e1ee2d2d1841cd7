"""A virtual clock: time only moves when the simulation (or a sleeping actuator) moves it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# A fixed start makes runs reproducible; the date has no meaning.
DEFAULT_START = datetime(2024, 1, 1, tzinfo=UTC)


class VirtualClock:
    """`now()` and `sleep()` for the loop and the actuator, on simulated time."""

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        if start.tzinfo is None:
            raise ValueError(f"virtual clock: start: expected a timezone-aware datetime, got {start!r}")
        self.start = start
        self._now = start

    def now(self) -> datetime:
        return self._now

    def sleep(self, seconds: float) -> None:
        """Waiting moves simulated time forward at once."""
        if seconds > 0:
            self._now += timedelta(seconds=seconds)

    def advance(self, delta: timedelta) -> datetime:
        if delta < timedelta(0):
            raise ValueError(f"virtual clock: advance: expected a non-negative duration, got {delta}")
        self._now += delta
        return self._now

    def advance_to(self, when: datetime) -> datetime:
        """Move to `when`; never backwards (a sleeping actuator may already be past it)."""
        if when > self._now:
            self._now = when
        return self._now

    def elapsed(self) -> timedelta:
        return self._now - self.start
