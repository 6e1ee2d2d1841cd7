"""`random`: pick one option at random (the final tie-break of every chain)."""

from __future__ import annotations

from collections.abc import Sequence

from clusterscaler.api import AutoscalingOptions, ExpanderContext, Option


class RandomExpander:
    name = "random"

    requires_pricing = False

    def __init__(self, options: AutoscalingOptions | None = None) -> None:
        pass

    def best_options(self, options: Sequence[Option], context: ExpanderContext) -> list[Option]:
        if not options:
            return []
        return [context.rng.choice(list(options))]
