"""A scale-up decided: the eligible groups, their estimates as options, the chosen option
balanced over similar groups, and why each pod left pending stays pending."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from clusterscaler.interfaces.estimator import Estimator
from clusterscaler.interfaces.expander import Option
from clusterscaler.loop.clusterstate import ClusterState
from clusterscaler.loop.decisions import (
    GroupRejection,
    NoScaleUpReason,
    ScaleUpDecision,
    ScaleUpResult,
    ScaleUpStatus,
)
from clusterscaler.loop.grouptemplates import Template
from clusterscaler.loop.limits import Limits, Totals, node_totals
from clusterscaler.loop.quotas import QuotaTracker
from clusterscaler.loop.scaleup.choose import decide, option_value
from clusterscaler.loop.scaleup.estimate import PodKeys, Rejections, estimate_options
from clusterscaler.loop.scaleup.groupeligibility import eligible_groups
from clusterscaler.model import Pod
from clusterscaler.simulator import ClusterSnapshot
from clusterscaler.simulator.equivalence import PodGroup, group_pods

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

__all__ = [
    "Chooser",
    "PodsToHelp",
    "ScaleUpInputs",
    "ScaleUpPlan",
    "cap_by_quotas",
    "current_totals",
    "plan_scale_up",
]

# Picks the option to execute among several: the expander chain with this loop's context.
Chooser = Callable[[Sequence[Option]], Option | None]


@dataclass
class ScaleUpPlan:
    """A decided scale-up before it is executed."""

    result: ScaleUpResult
    increases: dict[str, int] = field(default_factory=dict)


def current_totals(
    state: ClusterState, templates: Mapping[str, Template], gpu_label: str, base: Totals
) -> Totals:
    """`base` (the registered nodes) plus upcoming nodes counted as their templates."""
    out = base
    for gid, g in state.groups.items():
        tpl = templates.get(gid)
        if g.upcoming and tpl is not None and tpl.node_info is not None:
            out = out.plus(node_totals(tpl.node_info.node, gpu_label), g.upcoming)
    return out


def cap_by_quotas(
    decisions: Sequence[ScaleUpDecision],
    increases: Mapping[str, int],
    templates: Mapping[str, Template],
    quotas: QuotaTracker,
) -> tuple[tuple[ScaleUpDecision, ...], dict[str, int]]:
    """As CA's capScaleUpsByQuota: each increase, in turn, capped at what the quotas still
    allow and then taken from them, so that groups sharing a quota do not both spend it;
    an increase capped to nothing is dropped. What a capped group gives up is not handed to
    another (the pods left wait for the next loop)."""
    kept: list[ScaleUpDecision] = []
    capped: dict[str, int] = {}
    for d in decisions:
        tpl = templates.get(d.node_group)
        delta = d.delta
        if tpl is not None and tpl.node_info is not None:
            delta = quotas.check(tpl.node_info.node, delta).allowed
            if delta > 0:
                quotas.consume(tpl.node_info.node, delta)
        if delta > 0:
            kept.append(dataclasses.replace(d, delta=delta) if delta != d.delta else d)
            capped[d.node_group] = delta
    return tuple(kept), {gid: capped.get(gid, 0) for gid in increases}


@dataclass(frozen=True, slots=True)
class PodsToHelp:
    """The pending pods a scale-up should help (none fits existing or upcoming capacity),
    with their equivalence groups and their `namespace/name` keys in the same order, each
    computed once: `of(pods)` computes them, a caller that already has them (the loop's
    `PendingPods`) passes them."""

    pods: tuple[Pod, ...]
    groups: tuple[PodGroup, ...]
    keys: tuple[str, ...]

    @classmethod
    def of(cls, pods: Sequence[Pod]) -> PodsToHelp:
        return cls(tuple(pods), tuple(group_pods(pods)), tuple(p.key for p in pods))


@dataclass(frozen=True, slots=True)
class ScaleUpInputs:
    """Everything one scale-up decision reads.

    `totals` covers registered and upcoming nodes; the snapshot is left as given. `choose`
    is the expander chain with this loop's context. `quotas` (CapacityQuotas,
    --capacity-quotas-enabled) hold groups back as CA's scale-up orchestrator does, and are
    consumed by the increases decided. `monotonic` times the estimations
    (--max-binpacking-time)."""

    now: datetime
    pods: PodsToHelp
    state: ClusterState
    templates: Mapping[str, Template]
    snapshot: ClusterSnapshot
    estimator: Estimator
    choose: Chooser
    limits: Limits
    totals: Totals
    options: AutoscalingOptions
    gpu_label: str = ""
    monotonic: Callable[[], float] = time.monotonic
    quotas: QuotaTracker | None = None


def plan_scale_up(inputs: ScaleUpInputs) -> ScaleUpPlan:
    """Decide a scale-up for `inputs.pods`: the eligible groups, their estimates as
    options, the chosen option balanced over similar groups, and why each pod left pending
    stays pending."""
    pods = inputs.pods.pods
    state, templates, options, quotas = (
        inputs.state, inputs.templates, inputs.options, inputs.quotas
    )
    if not pods:
        return ScaleUpPlan(ScaleUpResult(status=ScaleUpStatus.NOT_NEEDED))
    keys = PodKeys(pods, inputs.pods.keys)
    if not options.scale_up_from_zero and not state.ready:
        reason = GroupRejection("", NoScaleUpReason.SCALE_UP_FROM_ZERO_DISABLED)
        return ScaleUpPlan(
            ScaleUpResult(
                status=ScaleUpStatus.NOT_TRIED,
                pods_remaining={k: (reason,) for k in keys.all(pods)},
            )
        )
    rejections = Rejections(keys)
    eligible, rejected = eligible_groups(state, templates, inputs.now)
    for rejection in rejected:
        rejections.add(rejection, pods)
    options_out = estimate_options(
        pods=pods,
        pod_groups=inputs.pods.groups,
        eligible=eligible,
        templates=templates,
        snapshot=inputs.snapshot,
        estimator=inputs.estimator,
        limits=inputs.limits,
        totals=inputs.totals,
        options=options,
        gpu_label=inputs.gpu_label,
        monotonic=inputs.monotonic,
        rejections=rejections,
        quotas=quotas,
    )
    values = tuple(option_value(o, keys) for o in options_out)
    helped = set().union(*(v.pods for v in values))
    remaining = rejections.remaining(helped)
    if not options_out:
        return ScaleUpPlan(
            ScaleUpResult(
                status=ScaleUpStatus.NO_OPTIONS_AVAILABLE,
                pods_remaining=remaining,
                group_rejections=rejections.by_pod,
            )
        )
    best = inputs.choose(options_out)
    if best is None:
        return ScaleUpPlan(
            ScaleUpResult(
                status=ScaleUpStatus.NO_OPTIONS_AVAILABLE,
                options=values,
                pods_remaining=remaining,
                group_rejections=rejections.by_pod,
            )
        )
    decisions, best_pods, increases = decide(
        best,
        options_out,
        values,
        keys=keys,
        eligible=eligible,
        state=state,
        balance_similar=options.balance_similar_node_groups,
    )
    if quotas:
        decisions, increases = cap_by_quotas(decisions, increases, templates, quotas)
        if not decisions:
            return ScaleUpPlan(
                ScaleUpResult(
                    status=ScaleUpStatus.NO_OPTIONS_AVAILABLE,
                    options=values,
                    pods_remaining=remaining,
                    group_rejections=rejections.by_pod,
                )
            )
    return ScaleUpPlan(
        ScaleUpResult(
            status=ScaleUpStatus.SUCCESSFUL,
            decisions=decisions,
            triggered_pods=best_pods,
            pods_remaining=remaining,
            group_rejections=rejections.by_pod,
            options=values,
        ),
        increases,
    )
