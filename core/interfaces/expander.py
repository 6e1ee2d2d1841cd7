"""The expander interface: options to grow a node group, and the filter that picks among them.

An expander plugin is registered with `registry.add_expander(name, factory)`;
`factory(options)` returns an object satisfying `Expander`. Its `best_options(options,
context)` receives every scale-up `Option` still in the race and an `ExpanderContext`, and
returns the ones it prefers. `options_by_score` and `debug_with` are the two steps most
expanders are made of. How `--expander=a,b,c` chains them is the loop's
(`clusterscaler.loop.expanderchain`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import structlog

if TYPE_CHECKING:
    from clusterscaler.interfaces.cloudprovider import NodeGroup, PricingModel
    from clusterscaler.model import ConfigMap, NodeInfo, Pod

__all__ = [
    "Expander",
    "ExpanderContext",
    "ExpanderWarning",
    "Option",
    "debug_with",
    "options_by_score",
]

log = structlog.get_logger()


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
