"""Standard estimators: `binpacking` (the default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterscaler.api import hookimpl
from clusterscaler.plugins.estimators.binpacking import BinpackingEstimator, order_groups

if TYPE_CHECKING:
    from clusterscaler.api import Registry

__all__ = ["BinpackingEstimator", "clusterscaler_register_estimators", "order_groups"]


@hookimpl
def clusterscaler_register_estimators(registry: Registry) -> None:
    registry.add_estimator(
        "binpacking",
        BinpackingEstimator,
        description="First-fit decreasing onto copies of the node group's template node.",
    )
