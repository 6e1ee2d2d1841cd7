"""Chaining the expanders `--expander=a,b,c` names.

`build_expander_chain` builds the chain from the registered expanders (the `Expander`
interface is `clusterscaler.interfaces.expander`): each expander filters the options in
turn, the chain stops as soon as one option is left, and a random choice breaks whatever
tie remains.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
from clusterscaler.interfaces.expander import Expander, ExpanderContext, Option

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.interfaces.registry import Registry

__all__ = [
    "RANDOM",
    "ExpanderChain",
    "ExpanderConfigError",
    "build_expander_chain",
]

log = structlog.get_logger()

RANDOM = "random"


class ExpanderConfigError(ValueError):
    """`--expander` names an unknown expander, repeats one, or misplaces a final-only one."""


@dataclass
class ExpanderChain:
    """`--expander=a,b,c`: filters applied in order, random as the final tie-break."""

    names: tuple[str, ...]
    expanders: tuple[Expander, ...]
    fallback: Expander

    def best_options(self, options: Sequence[Option], context: ExpanderContext) -> list[Option]:
        remaining = list(options)
        for name, expander in zip(self.names, self.expanders, strict=True):
            remaining = expander.best_options(remaining, context)
            log.debug("expander_filtered", expander=name, options=len(remaining))
            if len(remaining) <= 1:
                break
        return remaining

    def best_option(self, options: Sequence[Option], context: ExpanderContext) -> Option | None:
        """The one option to scale up, or `None` when the filters left nothing."""
        remaining = self.best_options(options, context)
        if len(remaining) > 1:
            remaining = self.fallback.best_options(remaining, context)
        return remaining[0] if remaining else None


def build_expander_chain(
    names: Sequence[str],
    registry: Registry,
    options: AutoscalingOptions,
    *,
    pricing_available: bool | None = None,
) -> ExpanderChain:
    """Build the chain for `--expander`.

    Raises `ExpanderConfigError` for an empty list, an unknown or repeated name, or a
    final-only expander that is not last. With `pricing_available=False`, an expander
    that needs prices (`requires_pricing = True`, like `price`) is an error too.
    """
    cleaned = [n.strip() for n in names if n.strip()]
    if not cleaned:
        raise ExpanderConfigError(
            "--expander: expected a comma-separated list of expander names, got an empty list"
        )
    known = sorted(registry.expanders)
    seen: set[str] = set()
    built: list[Expander] = []
    for index, name in enumerate(cleaned):
        entry = registry.expanders.get(name)
        if entry is None:
            raise ExpanderConfigError(
                f"--expander: unknown expander {name!r}; expected one of {', '.join(known)}"
            )
        if name in seen:
            raise ExpanderConfigError(
                f"--expander: expander {name!r} is listed twice in {','.join(cleaned)}"
            )
        seen.add(name)
        if entry.final_only and index != len(cleaned) - 1:
            raise ExpanderConfigError(
                f"--expander: {name!r} always picks a single option, so it must be the last "
                f"expander in the chain, got {','.join(cleaned)}"
            )
        expander = entry.factory(options)
        if pricing_available is False and expander.requires_pricing:
            raise ExpanderConfigError(
                f"--expander: {name!r} needs prices, but the cloud provider has no pricing model"
            )
        built.append(expander)
    fallback_entry = registry.expanders.get(RANDOM)
    fallback: Expander = (
        fallback_entry.factory(options) if fallback_entry is not None else _FirstOption()
    )
    return ExpanderChain(tuple(cleaned), tuple(built), fallback)


class _FirstOption:
    """Tie-break when no `random` expander is installed: keep the first option."""

    requires_pricing = False

    def best_options(self, options: Sequence[Option], context: ExpanderContext) -> list[Option]:
        return list(options[:1])
