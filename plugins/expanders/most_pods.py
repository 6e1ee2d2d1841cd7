"""`most-pods`: the options that schedule the most pods (ties kept)."""

from __future__ import annotations

from collections.abc import Sequence

from clusterscaler.api import AutoscalingOptions, ExpanderContext, Option, options_by_score


class MostPodsExpander:
    name = "most-pods"

    requires_pricing = False

    def __init__(self, options: AutoscalingOptions | None = None) -> None:
        pass

    def best_options(self, options: Sequence[Option], context: ExpanderContext) -> list[Option]:
        return options_by_score(options, lambda o: float(len(o.pods)), lowest=False)
