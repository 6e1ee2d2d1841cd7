"""The expander chain's pick among the options, and --balance-similar-node-groups
spreading its nodes over similar groups: the decisions of a scale-up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from clusterscaler.interfaces.expander import Option
from clusterscaler.loop.balancing import GroupSize, balance
from clusterscaler.loop.clusterstate import ClusterState, GroupState
from clusterscaler.loop.decisions import ScaleUpDecision, ScaleUpOption
from clusterscaler.loop.scaleup.estimate import PodKeys


def option_value(o: Option, keys: PodKeys) -> ScaleUpOption:
    """The option as a plain value for the loop's result (pods by key, groups by id)."""
    return ScaleUpOption(
        node_group=o.node_group.id,
        node_count=o.node_count,
        pods=tuple(keys.all(o.pods)),
        similar_node_groups=tuple(g.id for g in o.similar_node_groups),
        debug=o.debug,
    )


def decide(
    best: Option,
    options: Sequence[Option],
    values: Sequence[ScaleUpOption],
    *,
    keys: PodKeys,
    eligible: Mapping[str, GroupState],
    state: ClusterState,
    balance_similar: bool,
) -> tuple[tuple[ScaleUpDecision, ...], tuple[str, ...], dict[str, int]]:
    """The decisions for the chosen option `best`: its group grows by its node count, or,
    balancing, that count is spread over it and its eligible similar groups. A zero-or-max
    group is never balanced, nor given a share of another group's count. Returns the
    decisions, the pods they are for, and the increase of each group."""
    best_id = best.node_group.id
    best_pods = next(
        (v.pods for o, v in zip(options, values, strict=True) if o is best),
        None,
    ) or tuple(keys.all(best.pods))
    increases = {best_id: best.node_count}
    if balance_similar and not eligible[best_id].atomic:
        similar = [
            g.id for g in best.similar_node_groups if g.id in eligible and not eligible[g.id].atomic
        ]
        if similar:
            sizes = [
                GroupSize(gid, eligible[gid].target, eligible[gid].group.max_size)
                for gid in (best_id, *similar)
            ]
            increases = balance(sizes, best.node_count)
    decisions = tuple(
        ScaleUpDecision(
            node_group=gid,
            delta=delta,
            target_before=state.groups[gid].target,
            pods=best_pods,
        )
        for gid, delta in sorted(increases.items())
        if delta > 0
    )
    return decisions, best_pods, increases
