"""The registration hook of a distribution that brings one cloud provider.

Every provider's plugin module registers its factory the same way: under its name, with a
description for `clusterscaler plugins` and `--help`, and the check of the options it reads.
`cloud_provider_hook` is that `clusterscaler_register_cloud_providers` implementation; the
plugin module binds it to the hook's name, after its factory::

    clusterscaler_register_cloud_providers = cloud_provider_hook(
        "mycloud", build_provider, description="...", check_options=check_options
    )
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from clusterscaler.interfaces.hookspecs import hookimpl

if TYPE_CHECKING:
    from clusterscaler.interfaces.registry import CloudProviderFactory, OptionsCheck, Registry


def cloud_provider_hook(
    name: str,
    factory: CloudProviderFactory,
    *,
    description: str,
    check_options: OptionsCheck | None = None,
    aliases: Iterable[str] = (),
) -> Callable[[Registry], None]:
    """A `clusterscaler_register_cloud_providers` implementation that registers `factory`
    as `name` (and `aliases`) with `registry.add_cloud_provider`."""
    names = tuple(aliases)

    @hookimpl
    def clusterscaler_register_cloud_providers(registry: Registry) -> None:
        registry.add_cloud_provider(
            name, factory, aliases=names, description=description, check_options=check_options
        )

    return clusterscaler_register_cloud_providers
