from __future__ import annotations

from dataclasses import dataclass

import clusterscaler_example_expander as plugin
from clusterscaler.api import ExpanderContext, Option


@dataclass
class Group:
    """Just enough of a node group for an expander: an id and a target size."""

    id: str
    size: int

    def target_size(self) -> int:
        return self.size


def option(group_id: str, size: int, nodes: int = 1) -> Option:
    return Option(node_group=Group(group_id, size), node_count=nodes)  # type: ignore[arg-type]


def test_keeps_the_smallest_groups_and_their_ties() -> None:
    options = [option("zone-a", 5), option("zone-b", 2), option("zone-c", 2), option("zone-d", 9)]
    kept = plugin.SmallestGroup().best_options(options, ExpanderContext())
    assert [o.node_group_id for o in kept] == ["zone-b", "zone-c"]


def test_no_options_gives_no_options() -> None:
    assert plugin.SmallestGroup().best_options([], ExpanderContext()) == []
