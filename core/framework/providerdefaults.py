"""What a cloud provider answers the same way in every cloud: its name and GPU label as
constants, no pricing model and no resource limits of its own unless it overrides them,
and its problems in the core's shape when its cache keeps them as messages by group.

A provider class inherits `ProviderDefaults`, sets `PROVIDER_NAME` and `GPU_LABEL`, and
keeps to what its cloud does differently (`refresh`, `cleanup`, the lookups).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, ClassVar

from clusterscaler.interfaces.cloudprovider import ProviderProblem

if TYPE_CHECKING:
    from clusterscaler.interfaces.cloudprovider import PricingModel, ResourceLimiter


class ProviderDefaults:
    """`name`, `gpu_label`, `pricing` and `resource_limiter` of a `CloudProvider`."""

    PROVIDER_NAME: ClassVar[str]
    # The node label whose presence marks a GPU node in this cloud.
    GPU_LABEL: ClassVar[str]

    @property
    def name(self) -> str:
        return self.PROVIDER_NAME

    def gpu_label(self) -> str:
        return self.GPU_LABEL

    def pricing(self) -> PricingModel | None:
        return None

    def resource_limiter(self) -> ResourceLimiter | None:
        return None


def problems_by_group(messages: Mapping[str, Iterable[str]], reason: str) -> list[ProviderProblem]:
    """Each message of each group as a `ProviderProblem` with `reason`, groups in name order:
    the `problems()` of a provider whose cache keeps what is wrong as messages by group
    (`{"workers": ("tag ...: expected ...",)}`)."""
    return [
        ProviderProblem(node_group=group, reason=reason, message=message)
        for group, found in sorted(messages.items())
        for message in found
    ]
