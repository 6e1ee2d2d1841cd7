"""The `smallest-group` expander: prefer the node groups that are currently the smallest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from clusterscaler.api import hookimpl

if TYPE_CHECKING:
    from clusterscaler.api import AutoscalingOptions, ExpanderContext, Option, Registry

NAME = "smallest-group"


class SmallestGroup:
    """Keeps the options whose node group has the smallest target size; ties are kept.

    Used as a filter in a chain (`--expander=smallest-group,least-waste`), so that the next
    expander, or the final random pick, decides among the equally small groups.
    """

    # Prices play no part here (the `price` expander sets this to True).
    requires_pricing = False

    def best_options(self, options: Sequence[Option], context: ExpanderContext) -> list[Option]:
        if not options:
            return []
        sizes = [option.node_group.target_size() for option in options]
        smallest = min(sizes)
        return [option for option, size in zip(options, sizes, strict=True) if size == smallest]


def build(options: AutoscalingOptions) -> SmallestGroup:
    return SmallestGroup()


@hookimpl
def clusterscaler_register_expanders(registry: Registry) -> None:
    registry.add_expander(
        NAME, build, description="Prefer the node groups that are currently the smallest."
    )
