"""`least-waste`: the options leaving the least idle CPU and memory on the new nodes.

score = (available cpu - requested cpu) / available cpu
      + (available memory - requested memory) / available memory
where "available" is the template node's capacity times the node count and "requested" the
sum of the option's pod requests. Lowest wins; ties are kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog
from clusterscaler.api import AutoscalingOptions, ExpanderContext, Option, options_by_score

log = structlog.get_logger()


def waste_score(option: Option) -> float | None:
    """The option's wasted share of cpu plus memory, or `None` without a usable template."""
    if option.template is None or option.node_count <= 0:
        return None
    capacity = option.template.node.capacity
    avail_cpu = capacity.cpu * option.node_count
    avail_mem = capacity.memory * option.node_count
    if avail_cpu <= 0 or avail_mem <= 0:
        return None
    req_cpu = req_mem = 0
    for p in option.pods:
        r = p.requests
        req_cpu += r.cpu
        req_mem += r.memory
    return (avail_cpu - req_cpu) / avail_cpu + (avail_mem - req_mem) / avail_mem


class LeastWasteExpander:
    name = "least-waste"

    requires_pricing = False

    def __init__(self, options: AutoscalingOptions | None = None) -> None:
        pass

    def best_options(self, options: Sequence[Option], context: ExpanderContext) -> list[Option]:
        # One score per option: each sums the requests of every pod the option helps.
        scores = [waste_score(option) for option in options]
        for option, score in zip(options, scores, strict=True):
            if score is None:
                log.info(
                    "least_waste_skipped",
                    node_group=option.node_group.id,
                    reason="no template capacity",
                )
        by_option = {id(option): score for option, score in zip(options, scores, strict=True)}
        return options_by_score(options, lambda option: by_option[id(option)])
