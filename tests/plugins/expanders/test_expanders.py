from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.expander import ExpanderContext, Option
from clusterscaler.interfaces.registry import Registry
from clusterscaler.loop.expanderchain import ExpanderConfigError, build_expander_chain
from clusterscaler.model import ConfigMap, NodeInfo
from clusterscaler.plugins.expanders import clusterscaler_register_expanders
from clusterscaler.plugins.expanders.least_nodes import LeastNodesExpander
from clusterscaler.plugins.expanders.least_waste import LeastWasteExpander
from clusterscaler.plugins.expanders.most_pods import MostPodsExpander
from clusterscaler.plugins.expanders.price import PriceExpander, preferred_node
from clusterscaler.plugins.expanders.priority import PriorityExpander
from clusterscaler.plugins.expanders.random import RandomExpander
from clusterscaler.simulator.builders import make_node, make_pod
from hypothesis import given
from hypothesis import strategies as st


@dataclass
class Group:
    id: str
    exists: bool = True

    def exist(self) -> bool:
        return self.exists


def opt(
    group: str,
    nodes: int = 1,
    pods: int = 1,
    cpu: str = "1",
    mem: str = "1Gi",
    tmpl_cpu: str = "4",
    tmpl_mem: str = "16Gi",
    exists: bool = True,
    labels=None,
    extended=None,
) -> Option:
    template = NodeInfo(
        make_node(f"{group}-tmpl", tmpl_cpu, tmpl_mem, labels=labels, extended=extended)
    )
    return Option(
        node_group=Group(group, exists),
        node_count=nodes,
        pods=tuple(make_pod(f"{group}-p{i}", cpu, mem) for i in range(pods)),
        template=template,
    )


def ids(options):
    return [o.node_group.id for o in options]


FILTER_CASES = [
    (
        "most-pods picks most",
        MostPodsExpander(),
        [opt("a", pods=3), opt("b", pods=5), opt("c", pods=4)],
        ["b"],
    ),
    (
        "most-pods keeps ties",
        MostPodsExpander(),
        [opt("a", pods=5), opt("b", pods=5), opt("c", pods=1)],
        ["a", "b"],
    ),
    (
        "least-nodes picks fewest",
        LeastNodesExpander(),
        [opt("a", nodes=3), opt("b", nodes=2)],
        ["b"],
    ),
    (
        "least-nodes keeps ties",
        LeastNodesExpander(),
        [opt("a", nodes=2), opt("b", nodes=2), opt("c", nodes=4)],
        ["a", "b"],
    ),
    ("least-nodes skips zero", LeastNodesExpander(), [opt("a", nodes=0), opt("b", nodes=2)], ["b"]),
    ("least-nodes nothing valid", LeastNodesExpander(), [opt("a", nodes=0)], []),
    (
        # a: 1 of 4 cpu and 4 of 16Gi used: 0.75 + 0.75; b: 2 nodes of 1 cpu / 4Gi fully used: 0.
        "least-waste picks the fullest nodes",
        LeastWasteExpander(),
        [
            opt("a", pods=1, cpu="1", mem="4Gi"),
            opt("b", nodes=2, pods=2, cpu="1", mem="4Gi", tmpl_cpu="1", tmpl_mem="4Gi"),
        ],
        ["b"],
    ),
    (
        "least-waste ties kept",
        LeastWasteExpander(),
        [opt("a", pods=2, cpu="1", mem="4Gi"), opt("b", pods=2, cpu="1", mem="4Gi")],
        ["a", "b"],
    ),
    (
        "least-waste cpu and memory both count",
        LeastWasteExpander(),
        # a wastes 0.5 cpu + 0 memory = 0.5; b wastes 0 cpu + 0.75 memory = 0.75
        [opt("a", pods=1, cpu="2", mem="16Gi"), opt("b", pods=1, cpu="4", mem="4Gi")],
        ["a"],
    ),
]


@pytest.mark.parametrize(
    ("expander", "options", "expected"),
    [c[1:] for c in FILTER_CASES],
    ids=[c[0] for c in FILTER_CASES],
)
def test_filters(expander, options, expected):
    assert ids(expander.best_options(options, ExpanderContext())) == expected


def test_random_picks_exactly_one_and_every_option_can_win():
    options = [opt("a"), opt("b"), opt("c")]
    seen = set()
    for seed in range(50):
        picked = RandomExpander().best_options(options, ExpanderContext(rng=random.Random(seed)))
        assert len(picked) == 1
        seen.add(picked[0].node_group.id)
    assert seen == {"a", "b", "c"}
    assert RandomExpander().best_options([], ExpanderContext()) == []


# ----------------------------------------------------------------------------- price


class Pricing:
    """0.5 per core-hour for nodes and pods alike; GPU nodes cost 10 extra."""

    def node_price(self, node, start, end):
        hours = (end - start).total_seconds() / 3600
        gpu = node.capacity.extended.get("nvidia.com/gpu", 0)
        return (node.capacity.cpu / 1000 * 0.5 + 10 * gpu) * hours

    def pod_price(self, pod, start, end):
        hours = (end - start).total_seconds() / 3600
        return pod.requests.cpu / 1000 * 0.5 * hours


def test_price_score_formula():
    # 3 nodes in the cluster: preferred node has 2 cpus. One 2-cpu node for two 500m pods:
    # ratio = (1.0 + 0.25) / (0.5 + 0.25), unfitness 1.
    option = opt("a", pods=2, cpu="500m", tmpl_cpu="2")
    (best,) = PriceExpander().best_options(
        [option], ExpanderContext(pricing=Pricing(), cluster_node_count=3)
    )
    assert "final_score=1.666667" in best.debug
    assert "unfitness=1.000000" in best.debug


PRICE_CASES = [
    (
        "preferred size wins at equal price ratio",
        3,
        [
            opt("big", pods=2, cpu="500m", tmpl_cpu="8"),
            opt("fit", pods=2, cpu="500m", tmpl_cpu="2"),
        ],
        ["fit"],
    ),
    (
        "large clusters prefer large nodes",
        500,
        [
            opt("small", nodes=16, pods=16, cpu="1500m", tmpl_cpu="2"),
            opt("big", nodes=1, pods=16, cpu="1500m", tmpl_cpu="32"),
        ],
        ["big"],
    ),
    (
        "missing groups cost double",
        3,
        [opt("new", exists=False, tmpl_cpu="2"), opt("old", tmpl_cpu="2")],
        ["old"],
    ),
    (
        "gpu groups are unattractive",
        3,
        [opt("gpu", tmpl_cpu="2", extended={"nvidia.com/gpu": 1}), opt("cpu", tmpl_cpu="8")],
        ["cpu"],
    ),
    (
        "gpu label marks gpu groups",
        3,
        [opt("gpu", tmpl_cpu="2", labels={"accel": "t4"}), opt("cpu", tmpl_cpu="8")],
        ["cpu"],
    ),
]


@pytest.mark.parametrize(
    ("cluster", "options", "expected"),
    [c[1:] for c in PRICE_CASES],
    ids=[c[0] for c in PRICE_CASES],
)
def test_price(cluster, options, expected):
    context = ExpanderContext(pricing=Pricing(), cluster_node_count=cluster, gpu_label="accel")
    assert ids(PriceExpander().best_options(options, context)) == expected


@pytest.mark.parametrize(
    ("size", "cpu"),
    [
        (1, 1000),
        (2, 1000),
        (3, 2000),
        (6, 2000),
        (20, 4000),
        (21, 8000),
        (60, 8000),
        (200, 16000),
        (201, 32000),
    ],
    ids=str,
)
def test_preferred_node_by_cluster_size(size, cpu):
    assert preferred_node(size).capacity.cpu == cpu


def test_price_without_pricing_keeps_options_and_warns():
    context = ExpanderContext()
    options = [opt("a"), opt("b")]
    assert PriceExpander().best_options(options, context) == options
    assert [w.reason for w in context.warnings] == ["PricingNotAvailable"]


# ----------------------------------------------------------------------------- priority

PRIO_OPTIONS = [opt("ng-ondemand-1"), opt("ng-spot-1"), opt("ng-spot-2"), opt("gpu-pool")]


def cm(text: str | None, namespace: str = "kube-system") -> dict:
    data = {} if text is None else {"priorities": text}
    return {
        f"{namespace}/cluster-autoscaler-priority-expander": ConfigMap(
            namespace, "cluster-autoscaler-priority-expander", data
        )
    }


PRIORITY_CASES = [
    (
        "highest priority wins, ties kept",
        "10:\n  - .*ondemand.*\n50:\n  - spot\n",
        ["ng-spot-1", "ng-spot-2"],
        ["PriorityConfigMapNotMatchedGroup"],
    ),
    (
        "unanchored search",
        "5:\n  - ondemand\n",
        ["ng-ondemand-1"],
        ["PriorityConfigMapNotMatchedGroup"] * 3,
    ),
    (
        "a group takes its highest match",
        "1:\n  - ng-.*\n20:\n  - ng-ondemand\n",
        ["ng-ondemand-1"],
        ["PriorityConfigMapNotMatchedGroup"],
    ),
    ("minus one can win", "-1:\n  - gpu\n", ["gpu-pool"], ["PriorityConfigMapNotMatchedGroup"] * 3),
    (
        "below minus one never wins",
        "-5:\n  - .*\n",
        ["ng-ondemand-1", "ng-spot-1", "ng-spot-2", "gpu-pool"],
        ["PriorityConfigMapNoGroupMatched"],
    ),
    (
        "invalid yaml",
        "10: [unclosed\n",
        ["ng-ondemand-1", "ng-spot-1", "ng-spot-2", "gpu-pool"],
        ["PriorityConfigMapInvalid"],
    ),
    (
        "bad regex",
        "10:\n  - '(['\n",
        ["ng-ondemand-1", "ng-spot-1", "ng-spot-2", "gpu-pool"],
        ["PriorityConfigMapInvalid"],
    ),
    (
        "not integer priority",
        "high:\n  - spot\n",
        ["ng-ondemand-1", "ng-spot-1", "ng-spot-2", "gpu-pool"],
        ["PriorityConfigMapInvalid"],
    ),
    (
        "empty",
        "",
        ["ng-ondemand-1", "ng-spot-1", "ng-spot-2", "gpu-pool"],
        ["PriorityConfigMapInvalid"],
    ),
    (
        "missing key",
        None,
        ["ng-ondemand-1", "ng-spot-1", "ng-spot-2", "gpu-pool"],
        ["PriorityConfigMapInvalid"],
    ),
]


@pytest.mark.parametrize(
    ("text", "expected", "warnings"),
    [c[1:] for c in PRIORITY_CASES],
    ids=[c[0] for c in PRIORITY_CASES],
)
def test_priority(text, expected, warnings):
    context = ExpanderContext(config_maps=cm(text))
    assert ids(PriorityExpander().best_options(PRIO_OPTIONS, context)) == expected
    assert [w.reason for w in context.warnings] == warnings


def test_priority_config_map_missing_or_in_another_namespace():
    for maps in ({}, cm("10:\n  - spot\n", namespace="other")):
        context = ExpanderContext(config_maps=maps)
        assert ids(PriorityExpander().best_options(PRIO_OPTIONS, context)) == ids(PRIO_OPTIONS)
        assert [w.reason for w in context.warnings] == ["PriorityConfigMapNotFound"]
    context = ExpanderContext(
        config_maps=cm("10:\n  - spot\n", namespace="autoscaler"), namespace="autoscaler"
    )
    assert ids(PriorityExpander().best_options(PRIO_OPTIONS, context)) == ["ng-spot-1", "ng-spot-2"]


def test_priority_config_is_read_again_every_call():
    expander = PriorityExpander()
    assert ids(
        expander.best_options(PRIO_OPTIONS, ExpanderContext(config_maps=cm("10:\n  - spot\n")))
    ) == ["ng-spot-1", "ng-spot-2"]
    assert ids(
        expander.best_options(PRIO_OPTIONS, ExpanderContext(config_maps=cm("10:\n  - gpu\n")))
    ) == ["gpu-pool"]


# ----------------------------------------------------------------------------- chain


@pytest.fixture
def registry() -> Registry:
    reg = Registry()
    clusterscaler_register_expanders(reg)
    return reg


CHAIN_ERRORS = [
    ([], "empty list"),
    (["nope"], "unknown expander 'nope'"),
    (["least-waste", "least-waste"], "listed twice"),
    (["random", "least-waste"], "must be the last"),
]


@pytest.mark.parametrize(("names", "message"), CHAIN_ERRORS, ids=[m for _, m in CHAIN_ERRORS])
def test_chain_configuration_errors(registry, names, message):
    with pytest.raises(ExpanderConfigError, match=message):
        build_expander_chain(names, registry, AutoscalingOptions())


def test_price_needs_pricing(registry):
    with pytest.raises(ExpanderConfigError, match="pricing"):
        build_expander_chain(["price"], registry, AutoscalingOptions(), pricing_available=False)
    build_expander_chain(["price"], registry, AutoscalingOptions(), pricing_available=True)


def test_registered_names(registry):
    assert sorted(registry.expanders) == [
        "grpc",
        "least-nodes",
        "least-waste",
        "most-pods",
        "price",
        "priority",
        "random",
    ]
    assert [n for n, e in registry.expanders.items() if e.final_only] == ["random"]


class Counting:
    calls = 0
    requires_pricing = False

    def __init__(self, options=None):
        pass

    def best_options(self, options, context):
        Counting.calls += 1
        return list(options)


def test_chain_filters_in_order_and_stops_at_one(registry):
    registry.add_expander("counting", Counting)
    chain = build_expander_chain(
        ["priority", "most-pods", "counting"], registry, AutoscalingOptions()
    )
    options = [opt("ng-spot-1", pods=2), opt("ng-spot-2", pods=3), opt("gpu-pool", pods=9)]
    context = ExpanderContext(config_maps=cm("10:\n  - spot\n"))
    Counting.calls = 0
    best = chain.best_option(options, context)
    # priority keeps both spot groups (gpu-pool dropped despite most pods), most-pods picks one.
    assert best is not None and best.node_group.id == "ng-spot-2"
    assert Counting.calls == 0


def test_chain_random_breaks_final_tie(registry):
    chain = build_expander_chain(["most-pods"], registry, AutoscalingOptions())
    options = [opt("a", pods=2), opt("b", pods=2), opt("c", pods=1)]
    picks = {
        chain.best_option(options, ExpanderContext(rng=random.Random(s))).node_group.id
        for s in range(40)
    }
    assert picks == {"a", "b"}


def test_chain_returns_none_when_filters_leave_nothing(registry):
    chain = build_expander_chain(["least-nodes"], registry, AutoscalingOptions())
    assert chain.best_option([opt("a", nodes=0), opt("b", nodes=0)], ExpanderContext()) is None


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 8)), min_size=1, max_size=8),
    st.integers(0, 100),
)
def test_chain_result_is_one_of_the_options(pairs, seed):
    reg = Registry()
    clusterscaler_register_expanders(reg)
    chain = build_expander_chain(["least-nodes", "most-pods"], reg, AutoscalingOptions())
    options = [opt(f"g{i}", nodes=n, pods=p) for i, (n, p) in enumerate(pairs)]
    best = chain.best_option(options, ExpanderContext(rng=random.Random(seed)))
    valid = [o for o in options if o.node_count > 0]
    if not valid:
        assert best is None
    else:
        assert best in valid
        assert best.node_count == min(o.node_count for o in valid)


def test_registered_through_the_entry_point():
    from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry

    registry = collect_registry(build_plugin_manager())
    for name in ("random", "most-pods", "least-waste", "least-nodes", "price", "priority"):
        assert name in registry.expanders
    assert registry.expanders["random"].final_only
