"""Choosing which node group to grow: expansion options, expanders and their chaining.

An expander plugin is registered with `registry.add_expander(name, factory)`;
`factory(options)` returns an object satisfying `Expander`. `--expander=a,b,c` builds a
chain with `build_expander_chain`: each expander filters the options in turn, the chain
stops as soon as one option is left, and a random choice breaks whatever tie remains.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import structlog
from clusterscaler.model import ConfigMap, NodeInfo, Pod

if TYPE_CHECKING:
    from clusterscaler.framework.cloudprovider import NodeGroup, PricingModel
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.framework.pluginmanager import Registry

__all__ = [
    "RANDOM",
    "Expander",
    "ExpanderChain",
    "ExpanderConfigError",
    "ExpanderContext",
    "ExpanderWarning",
    "Option",
    "build_expander_chain",
    "debug_with",
    "options_by_score",
]

log = structlog.get_logger()

RANDOM = "random"


class ExpanderConfigError(ValueError):
    """`--expander` names an unknown expander, repeats one, or misplaces a final-only one."""


@dataclass(frozen=True, slots=True)
class Option:
    """Growing `node_group` by `node_count` nodes would schedule `pods`.

    `similar_node_groups` are groups the scale-up may be balanced across; `template` is the
    node a new instance of the group would become (with its DaemonSet pods); `debug` is
    free text expanders may extend with their reasoning.
    """

    node_group: NodeGroup
    node_count: int
    pods: tuple[Pod, ...] = ()
    similar_node_groups: tuple[NodeGroup, ...] = ()
    template: NodeInfo | None = None
    debug: str = ""

    @property
    def node_group_id(self) -> str:
        return self.node_group.id


@dataclass(frozen=True, slots=True)
class ExpanderWarning:
    """Something an expander wants users to see (the loop turns these into events)."""

    expander: str
    reason: str
    message: str
    object_ref: str = ""


@dataclass
class ExpanderContext:
    """What expanders may consult when choosing.

    `config_maps` maps `namespace/name` to the current ConfigMaps the autoscaler watches
    (re-read every loop). `cluster_node_count` is the number of nodes in the cluster.
    `warn(...)` records a warning in `warnings` and logs it.
    """

    pricing: PricingModel | None = None
    cluster_node_count: int = 0
    config_maps: Mapping[str, ConfigMap] = field(default_factory=dict)
    namespace: str = "kube-system"
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    gpu_label: str = ""
    rng: random.Random = field(default_factory=random.Random)
    warnings: list[ExpanderWarning] = field(default_factory=list)

    def config_map(self, name: str, namespace: str | None = None) -> ConfigMap | None:
        return self.config_maps.get(f"{namespace or self.namespace}/{name}")

    def warn(self, expander: str, reason: str, message: str, object_ref: str = "") -> None:
        self.warnings.append(ExpanderWarning(expander, reason, message, object_ref))
        log.warning("expander_warning", expander=expander, reason=reason, message=message)


@runtime_checkable
class Expander(Protocol):
    """A filter over expansion options."""

    # True when the expander needs the cloud provider's pricing model (as `price`): the
    # chain is refused at start-up when the provider has none.
    requires_pricing: bool

    def best_options(self, options: Sequence[Option], context: ExpanderContext) -> list[Option]:
        """The best options (a subset, in input order); ties are kept.

        An expander that cannot decide (missing configuration, no pricing) returns the
        options unchanged and reports why through `context.warn`. A final-only expander
        (such as `random`) returns exactly one option for a non-empty input.
        """
        ...


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
    options: AutoscalingOptions | None,
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


def options_by_score(
    options: Sequence[Option], score: Callable[[Option], float | None], *, lowest: bool = True
) -> list[Option]:
    """Options with the best score (ties kept, input order). `None` scores are dropped;
    if every score is `None` the input is returned unchanged."""
    scored: list[tuple[float, Option]] = []
    for option in options:
        s = score(option)
        if s is not None:
            scored.append((s, option))
    if not scored:
        return list(options)
    best = min(s for s, _ in scored) if lowest else max(s for s, _ in scored)
    return [o for s, o in scored if s == best]


def debug_with(option: Option, text: str) -> Option:
    """A copy of `option` with `text` appended to its debug string."""
    return replace(option, debug=f"{option.debug} | {text}" if option.debug else text)
