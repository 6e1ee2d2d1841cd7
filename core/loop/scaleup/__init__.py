"""Scale-up: which node group grows, by how much, for which pending pods.

For every node group that can grow (it exists, is not backed off, is healthy, is below its
max size, has a template node), the estimator says how many template nodes the pending pods
need; the count is capped by the group's headroom, --max-nodes-total, --max-nodes-per-scaleup
and the cluster's cores, memory and GPU limits. The expander chain picks one option;
--balance-similar-node-groups spreads its nodes over similar groups. The result is a value;
`execute_scale_up` makes the provider calls.

The steps, one module each: `groupeligibility` (which groups may grow at all), `estimate`
(how many template nodes each group needs, and why pods stay pending), `choose` (the
expander chain's pick, balanced over similar groups), `plan` (the three together, from one
`ScaleUpInputs`), `min_size` (--enforce-node-group-min-size) and `execute` (the provider
calls).
"""

from clusterscaler.loop.scaleup.execute import execute_scale_up
from clusterscaler.loop.scaleup.min_size import plan_min_size_enforcement
from clusterscaler.loop.scaleup.plan import (
    Chooser,
    PodsToHelp,
    ScaleUpInputs,
    ScaleUpPlan,
    current_totals,
    plan_scale_up,
)

__all__ = [
    "Chooser",
    "PodsToHelp",
    "ScaleUpInputs",
    "ScaleUpPlan",
    "current_totals",
    "execute_scale_up",
    "plan_min_size_enforcement",
    "plan_scale_up",
]
