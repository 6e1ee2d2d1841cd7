"""Which non-empty scale-down candidates the planner simulates on a loop.

Cluster Autoscaler's current planner simulates every eligible candidate (within the
simulation timeout); the candidates pool flags belonged to its legacy scale-down and no
longer cut the candidates, on the first loop or later ones.
"""

from __future__ import annotations

import pytest
from clusterscaler.loop.decisions import UnremovableReason
from loopkit import Harness, running_pod

NODES = 8


def busy_cluster(**options: object) -> Harness:
    """Eight half-idle nodes, each with one small pod that fits on any other node."""
    h = Harness(**options)
    h.provider.add_group("g", 0, 20, nodes=NODES)
    h.add_pods([running_pod(f"p{i}", f"g-{i}") for i in range(1, NODES + 1)])
    return h


@pytest.mark.parametrize(
    ("ratio", "min_count", "non_empty", "unneeded"),
    [
        # The defaults' pool would be max(ceil(0.1 x 8), 50): no cut either way.
        (0.1, 50, 30, NODES - 1),
        # A pool of one node (the legacy cut) no longer limits the simulation.
        (0.1, 1, 30, NODES - 1),
        (0.0, 0, 30, NODES - 1),
        (1.0, 1, 30, NODES - 1),
        # The heuristic off: every candidate, as with a large count.
        (0.1, 1, 0, NODES - 1),
        # --scale-down-non-empty-candidates-count still stops the search.
        (0.1, 1, 3, 3),
        (1.0, 50, 3, 3),
    ],
    ids=[
        "defaults",
        "pool-of-one",
        "pool-zero",
        "pool-whole",
        "count-off",
        "count-3-small-pool",
        "count-3-whole-pool",
    ],
)
def test_first_loop_simulates_every_candidate_whatever_the_pool(
    ratio: float, min_count: int, non_empty: int, unneeded: int
) -> None:
    h = busy_cluster(
        scale_down_candidates_pool_ratio=ratio,
        scale_down_candidates_pool_min_count=min_count,
        scale_down_non_empty_candidates_count=non_empty,
    )
    result = h.run()
    assert len(result.scale_down.unneeded) == unneeded
    details = {u.detail for u in result.scale_down.unremovable}
    assert not any("pool" in d for d in details)


def test_later_loops_keep_the_previous_candidates_and_add_new_ones_beyond_the_pool() -> None:
    h = busy_cluster(
        scale_down_candidates_pool_ratio=0.1,
        scale_down_candidates_pool_min_count=1,
        scale_down_non_empty_candidates_count=3,
    )
    first = h.run()
    kept = {u.node for u in first.scale_down.unneeded}
    assert len(kept) == 3
    # More room for non-empty candidates: the new ones are simulated too, not a pool of one.
    h.set_options(scale_down_non_empty_candidates_count=0)
    second = h.run()
    now_unneeded = {u.node for u in second.scale_down.unneeded}
    assert kept <= now_unneeded
    assert len(now_unneeded) == NODES - 1
    limited = [
        u
        for u in second.scale_down.unremovable
        if u.reason is UnremovableReason.NOT_UNNEEDED_OTHER_REASON
    ]
    assert limited == []
