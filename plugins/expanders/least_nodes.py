"""`least-nodes`: the options that add the fewest nodes (ties kept; zero-node options are
never chosen)."""

from __future__ import annotations

from collections.abc import Sequence

from clusterscaler.api import AutoscalingOptions, ExpanderContext, Option


class LeastNodesExpander:
    name = "least-nodes"

    requires_pricing = False

    def __init__(self, options: AutoscalingOptions | None = None) -> None:
        pass

    def best_options(self, options: Sequence[Option], context: ExpanderContext) -> list[Option]:
        valid = [o for o in options if o.node_count > 0]
        if not valid:
            return []
        fewest = min(o.node_count for o in valid)
        return [o for o in valid if o.node_count == fewest]
