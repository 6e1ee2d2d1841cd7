"""When the next loop starts (CA's LoopTrigger, --frequent-loops-enabled).

A loop starts --scan-interval after the previous one started. With
--frequent-loops-enabled (the default), a productive loop (one that scaled up, or started
deleting a node) is followed at once by the next, and so is the loop after it: a loop that
scales up does not scale down, so the scale-down it skipped, and the scale-up that may
follow a scale-down, are not left waiting a whole interval.
"""

from __future__ import annotations

from collections import deque
from datetime import timedelta

import structlog
from clusterscaler.loop.decisions import LoopResult, ScaleDownStatus, ScaleUpStatus

__all__ = ["LoopTrigger", "productive"]

log = structlog.get_logger()


def productive(result: LoopResult) -> bool:
    """Whether a loop scaled up or started a node's deletion."""
    return (
        result.scale_up.status is ScaleUpStatus.SUCCESSFUL
        or result.scale_down.status is ScaleDownStatus.NODE_DELETE_STARTED
    )


class LoopTrigger:
    """Remembers whether the last two loops were productive, and says how long to wait."""

    def __init__(self, scan_interval: timedelta, *, frequent_loops_enabled: bool) -> None:
        self.interval = scan_interval.total_seconds()
        self.frequent = frequent_loops_enabled
        self._recent: deque[bool] = deque([False, False], maxlen=2)

    def record(self, result: LoopResult | None) -> None:
        """The loop that just ended (`None`: it ended early, without a result)."""
        self._recent.append(result is not None and productive(result))

    def wait_seconds(self, elapsed: float) -> float:
        """How long to wait before the next loop, `elapsed` seconds after the last began."""
        if self.frequent and any(self._recent):
            log.debug("loop_triggered", reason="recent scale-up or scale-down")
            return 0.0
        return max(0.0, self.interval - elapsed)
