from __future__ import annotations

import math

import pytest
from clusterscaler.proportional.calculator import (
    MAX_REPLICAS,
    ClusterSize,
    compute_replicas,
    ladder_lookup,
)
from clusterscaler.proportional.params import LadderStep, parse_ladder, parse_linear
from hypothesis import given
from hypothesis import strategies as st

# (id, linear params, cluster size, expected replicas)
LINEAR_CASES = [
    # The upstream README's example: 4 nodes, 13 cores -> max(ceil(13/2), ceil(4/1)) = 7.
    (
        "readme-example",
        {"coresPerReplica": 2, "nodesPerReplica": 1, "min": 1, "max": 100},
        (4, 13),
        7,
    ),
    ("nodes-win", {"coresPerReplica": 64, "nodesPerReplica": 2}, (9, 36), 5),
    ("cores-only", {"coresPerReplica": 8}, (3, 17), 3),
    ("nodes-only", {"nodesPerReplica": 4}, (10, 1000), 3),
    ("float-per-replica", {"coresPerReplica": 2.5}, (2, 5), 2),
    ("float-per-replica-rounds-up", {"coresPerReplica": 2.5}, (2, 6), 3),
    ("empty-cluster-gives-min-1", {"nodesPerReplica": 1}, (0, 0), 1),
    ("min-raises", {"nodesPerReplica": 16, "min": 3}, (4, 16), 3),
    ("max-caps", {"nodesPerReplica": 1, "max": 5}, (40, 160), 5),
    ("max-0-means-none", {"nodesPerReplica": 1, "max": 0}, (40, 160), 40),
    ("spof-two-nodes", {"nodesPerReplica": 16, "preventSinglePointFailure": True}, (2, 8), 2),
    ("spof-one-node", {"nodesPerReplica": 16, "preventSinglePointFailure": True}, (1, 8), 1),
    (
        "spof-above-max",
        {"nodesPerReplica": 16, "max": 1, "preventSinglePointFailure": True},
        (3, 8),
        2,
    ),
    ("spof-cores-only", {"coresPerReplica": 100, "preventSinglePointFailure": True}, (2, 4), 2),
    ("spof-already-more", {"nodesPerReplica": 1, "preventSinglePointFailure": True}, (5, 8), 5),
    ("tiny-per-replica-capped", {"coresPerReplica": 1e-300}, (1, 4), MAX_REPLICAS),
]


@pytest.mark.parametrize(
    ("params", "size", "expected"),
    [c[1:] for c in LINEAR_CASES],
    ids=[c[0] for c in LINEAR_CASES],
)
def test_linear(params, size, expected):
    decision = compute_replicas(parse_linear(params), ClusterSize.uniform(*size))
    assert decision.replicas == expected
    assert decision.mode == "linear"


LADDER_README = {
    "coresToReplicas": [[1, 1], [64, 3], [512, 5], [1024, 7], [2048, 10], [4096, 15]],
    "nodesToReplicas": [[1, 1], [2, 2]],
}

LADDER_CASES = [
    # The upstream README's example: 100 nodes, 400 cores -> max(3, 2) = 3.
    ("readme-example", LADDER_README, (100, 400), 3),
    ("exact-threshold", LADDER_README, (2, 64), 3),
    ("just-below-threshold", LADDER_README, (2, 63), 2),
    ("top-step", LADDER_README, (500, 10000), 15),
    ("below-first-step-uses-first", {"coresToReplicas": [[4, 2], [8, 3]]}, (1, 1), 2),
    ("empty-cluster-below-first", LADDER_README, (0, 0), 1),
    ("zero-replicas-small-cluster", {"nodesToReplicas": [[0, 0], [6, 1]]}, (5, 40), 0),
    ("zero-replicas-grows-to-one", {"nodesToReplicas": [[0, 0], [6, 1]]}, (6, 48), 1),
    (
        "empty-table-contributes-nothing",
        {"coresToReplicas": [], "nodesToReplicas": [[0, 0]]},
        (3, 12),
        0,
    ),
    ("unsorted-input", {"nodesToReplicas": [[10, 4], [1, 1], [5, 2]]}, (7, 0), 2),
]


@pytest.mark.parametrize(
    ("params", "size", "expected"),
    [c[1:] for c in LADDER_CASES],
    ids=[c[0] for c in LADDER_CASES],
)
def test_ladder(params, size, expected):
    decision = compute_replicas(parse_ladder(params), ClusterSize.uniform(*size))
    assert decision.replicas == expected
    assert decision.mode == "ladder"


# 10 nodes / 40 cores in all, of which 6 nodes / 24 cores are schedulable.
MIXED = ClusterSize(nodes=10, cores=40, schedulable_nodes=6, schedulable_cores=24)

UNSCHEDULABLE_CASES = [
    ("linear-schedulable-only", parse_linear({"nodesPerReplica": 1}), 6),
    (
        "linear-include-unschedulable",
        parse_linear({"nodesPerReplica": 1, "includeUnschedulableNodes": True}),
        10,
    ),
    ("linear-cores-schedulable-only", parse_linear({"coresPerReplica": 4}), 6),
    (
        "linear-cores-include",
        parse_linear({"coresPerReplica": 4, "includeUnschedulableNodes": True}),
        10,
    ),
    ("ladder-schedulable-only", parse_ladder({"nodesToReplicas": [[1, 1], [8, 2]]}), 1),
    (
        "ladder-include-unschedulable",
        parse_ladder({"nodesToReplicas": [[1, 1], [8, 2]], "includeUnschedulableNodes": True}),
        2,
    ),
]


@pytest.mark.parametrize(
    ("params", "expected"),
    [c[1:] for c in UNSCHEDULABLE_CASES],
    ids=[c[0] for c in UNSCHEDULABLE_CASES],
)
def test_include_unschedulable_nodes(params, expected):
    assert compute_replicas(params, MIXED).replicas == expected


def test_spof_counts_the_same_nodes_as_the_params():
    # 3 nodes in all but only one schedulable: with schedulable counting there is a single
    # node, so no second replica is forced.
    size = ClusterSize(nodes=3, cores=12, schedulable_nodes=1, schedulable_cores=4)
    params = parse_linear({"nodesPerReplica": 16, "preventSinglePointFailure": True})
    assert compute_replicas(params, size).replicas == 1
    params = parse_linear(
        {
            "nodesPerReplica": 16,
            "preventSinglePointFailure": True,
            "includeUnschedulableNodes": True,
        }
    )
    assert compute_replicas(params, size).replicas == 2


def test_decision_explains_dimensions():
    decision = compute_replicas(
        parse_linear({"coresPerReplica": 2, "nodesPerReplica": 1}), ClusterSize.uniform(4, 13)
    )
    assert (decision.replicas_from_cores, decision.replicas_from_nodes) == (7, 4)
    assert (decision.nodes, decision.cores) == (4, 13)
    decision = compute_replicas(parse_linear({"coresPerReplica": 2}), ClusterSize.uniform(4, 13))
    assert decision.replicas_from_nodes is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"nodes": -1, "cores": 0, "schedulable_nodes": 0, "schedulable_cores": 0}, "nodes"),
        (
            {"nodes": 1, "cores": 0, "schedulable_nodes": 2, "schedulable_cores": 0},
            "schedulable_nodes",
        ),
        (
            {"nodes": 1, "cores": 4, "schedulable_nodes": 1, "schedulable_cores": 5},
            "schedulable_cores",
        ),
    ],
    ids=["negative", "more-schedulable-nodes", "more-schedulable-cores"],
)
def test_cluster_size_rejects_impossible_counts(kwargs, field):
    with pytest.raises(ValueError, match=f"ClusterSize.{field}"):
        ClusterSize(**kwargs)


sizes = st.integers(min_value=0, max_value=100_000)
per_replica = st.one_of(st.just(0), st.floats(min_value=0.01, max_value=1000))


@given(
    cores=sizes,
    nodes=sizes,
    cpr=per_replica,
    npr=per_replica,
    min_replicas=st.integers(min_value=0, max_value=50),
    extra=st.integers(min_value=0, max_value=500),
    spof=st.booleans(),
)
def test_linear_matches_the_documented_formula(cores, nodes, cpr, npr, min_replicas, extra, spof):
    if cpr == 0 and npr == 0:
        npr = 1
    max_replicas = 0 if extra == 0 else max(min_replicas, 1) + extra
    params = parse_linear(
        {
            "coresPerReplica": cpr,
            "nodesPerReplica": npr,
            "min": min_replicas,
            "max": max_replicas,
            "preventSinglePointFailure": spof,
        }
    )
    expected = max(
        math.ceil(cores / cpr) if cpr else 0,
        math.ceil(nodes / npr) if npr else 0,
    )
    if max_replicas:
        expected = min(expected, max_replicas)
    expected = max(expected, min_replicas, 1)
    if spof and nodes > 1:
        expected = max(expected, 2)
    assert compute_replicas(params, ClusterSize.uniform(nodes, cores)).replicas == expected


@given(
    steps=st.dictionaries(
        st.integers(min_value=0, max_value=1000),
        st.integers(min_value=0, max_value=100),
        min_size=1,
    ),
    value=st.integers(min_value=0, max_value=2000),
)
def test_ladder_lookup_is_the_last_step_at_or_below(steps, value):
    table = sorted(LadderStep(t, r) for t, r in steps.items())
    at_or_below = [s for s in table if s.threshold <= value]
    expected = at_or_below[-1].replicas if at_or_below else table[0].replicas
    assert ladder_lookup(table, value) == expected


@given(
    steps=st.dictionaries(
        st.integers(min_value=0, max_value=1000),
        st.integers(min_value=0, max_value=100),
        min_size=1,
    ),
    small=st.integers(min_value=0, max_value=2000),
    grow=st.integers(min_value=0, max_value=2000),
)
def test_ladder_with_increasing_steps_never_shrinks_as_the_cluster_grows(steps, small, grow):
    # With replicas non-decreasing in the threshold, a bigger cluster never gets fewer.
    thresholds = sorted(steps)
    replicas = sorted(steps.values())
    table = [LadderStep(t, r) for t, r in zip(thresholds, replicas, strict=True)]
    assert ladder_lookup(table, small) <= ladder_lookup(table, small + grow)


def test_ladder_lookup_empty():
    assert ladder_lookup([], 10) is None
