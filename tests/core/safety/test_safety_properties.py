"""Safety properties of the real loop over generated clusters.

`clustergen.clusters()` draws small clusters that call for scale-up and scale-down together
(several node groups of different shapes, some zero-or-max; running pods of varied sizes and
kinds under two PodDisruptionBudgets; pending pods of varied sizes; cluster-wide limits close
to the cluster's size) and `clustergen.simulate()` runs the `Autoscaler` over each for a few
loops past --scale-down-unneeded-time, playing the cloud, the scheduler and the controllers
in between. After every loop:
- no unsafe removal: every pod evicted by a drain is re-created on the node the removal
  simulation chose for it (following the chain when that node was itself drained), and
  that node still exists and passes the scheduler predicates for it; no pod without a
  controller is evicted;
- no PDB violation: the API server refused no eviction of a pod under a budget, and no
  more of a budget's pods were evicted than it allowed (DaemonSet pods aside: they go with
  their node whatever the budget, as in CA);
- no limit exceeded: a loop that scales up leaves the cluster within --max-nodes-total and
  the --cores-total / --memory-total maxima, and every group within its max size; a loop
  that scales down does not take the cluster below the cores or memory minimum;
- min/max held: no cloud call takes a group above its max size or below its min size (nor
  lower, when it is already below it);
- zero-or-max: a group scaling zero-or-max is empty or full after every loop.

These tests carry the `properties` marker. `.ci/run` runs them with
`pytest -m properties --hypothesis-profile=properties` (see tests/conftest.py): 2,000
derandomized examples each. The normal run gives them a quick random pass.
"""

from __future__ import annotations

from collections import Counter

import pytest
from clustergen import (
    DEFAULTS,
    PDB_APPS,
    ClusterSpec,
    GroupSpec,
    PendingSpec,
    PodSpec,
    Trace,
    clusters,
    describe,
    group_id,
    simulate,
)
from clusterscaler.framework.options import MinMax
from hypothesis import example, given, settings

pytestmark = pytest.mark.properties

PROFILE = "properties"
QUICK_EXAMPLES = 40


def property_settings() -> settings:
    """The `properties` profile when it is loaded; else a quick random pass of it."""
    full = settings.get_profile(PROFILE)
    if settings.get_current_profile_name() == PROFILE:
        return full
    return settings(full, max_examples=QUICK_EXAMPLES, derandomize=False)


PROPERTY = property_settings()


def _fail(trace: Trace, message: str) -> str:
    return f"{message}\n{describe(trace)}"


@PROPERTY
@given(clusters())
def test_no_unsafe_removal(spec: ClusterSpec) -> None:
    """Every pod a drain evicts has a home that exists and admits it."""
    trace = simulate(spec)
    for i, rec in enumerate(trace.loops):
        assert not rec.homeless, _fail(trace, f"loop {i}: {rec.homeless}")


def _daemonset_budget_example() -> ClusterSpec:
    """Two nodes drained in one loop, each with a `db` pod to move; the first also runs a
    DaemonSet pod under the same budget (2 disruptions). Its eviction spends one of them,
    so both drains together would have the API server refuse the second `db` pod."""
    db, web = PodSpec(100, 128, "db", "rs", False), PodSpec(100, 128, "web", "rs", False)
    return ClusterSpec(
        groups=(
            GroupSpec("big", 0, 1, True, ((web, PodSpec(100, 128, "web", "rs", True)),)),
            GroupSpec(
                "big",
                0,
                2,
                False,
                (
                    (db, PodSpec(100, 128, "db", "ds", True)),
                    (PodSpec(100, 128, "web", "ds", True), db),
                ),
            ),
        ),
        static=None,
        pending=(),
        pdb_allowed=(2, 0),
        max_nodes_total=0,
        cores_total=MinMax(0, 24),
        memory_total=MinMax(0, 6_400_000),
        enforce_min_size=False,
        balance=False,
        expander="least-waste",
        max_drain_parallelism=2,
        max_scale_down_parallelism=2,
        utilization_threshold=0.5,
        register_lag=0,
    )


@PROPERTY
@given(clusters())
@example(_daemonset_budget_example())
def test_no_pdb_violation(spec: ClusterSpec) -> None:
    """No eviction is refused for a PDB, and no budget is overspent."""
    trace = simulate(spec)
    evicted: Counter[str] = Counter()
    for i, rec in enumerate(trace.loops):
        # Retried evictions repeat the same refusal: each message once.
        refused = sorted({msg for p, msg in rec.refused if not p.is_daemonset})
        assert not refused, _fail(trace, f"loop {i}: evictions refused: {refused}")
        evicted.update(p.labels.get("app", "") for p in rec.evicted if not p.is_daemonset)
    for app, allowed in zip(PDB_APPS, spec.pdb_allowed, strict=True):
        assert evicted[app] <= allowed, _fail(
            trace, f"{evicted[app]} {app} pods evicted, the budget allowed {allowed}"
        )


@PROPERTY
@given(clusters())
def test_no_limit_exceeded(spec: ClusterSpec) -> None:
    """A scale-up stays within the cluster's maxima and the groups' max sizes; a scale-down
    stays above the cluster's minima."""
    trace = simulate(spec)
    for i, rec in enumerate(trace.loops):
        before, after = rec.capacity_before, rec.capacity_after
        increased = {
            gid for gid, calls in rec.calls.items() for c, _ in calls if c == "increase_size"
        }
        if increased:
            where = f"loop {i} scaled up {sorted(increased)} to {after}"
            if spec.max_nodes_total:
                assert after.nodes <= spec.max_nodes_total, _fail(
                    trace, f"{where}, past --max-nodes-total={spec.max_nodes_total}"
                )
            assert after.cores <= spec.cores_total.max, _fail(
                trace, f"{where}, past --cores-total={spec.cores_total}"
            )
            assert after.gib <= spec.memory_total.max, _fail(
                trace, f"{where}, past --memory-total={spec.memory_total}"
            )
            for j, g in enumerate(spec.groups):
                gid = group_id(j)
                assert gid not in increased or rec.targets_after[gid] <= g.max_size, _fail(
                    trace, f"{where}, {gid} past its max size {g.max_size}"
                )
        deleted = any(c == "delete_nodes" for calls in rec.calls.values() for c, _ in calls)
        if deleted:
            where = f"loop {i} scaled down from {before} to {after}"
            if before.cores >= spec.cores_total.min:
                assert after.cores >= spec.cores_total.min, _fail(
                    trace, f"{where}, below --cores-total={spec.cores_total}"
                )
            if before.gib >= spec.memory_total.min:
                assert after.gib >= spec.memory_total.min, _fail(
                    trace, f"{where}, below --memory-total={spec.memory_total}"
                )


@PROPERTY
@given(clusters())
def test_min_max_held_on_every_group(spec: ClusterSpec) -> None:
    """Replaying each group's cloud calls: none goes above max or below min."""
    trace = simulate(spec)
    for i, rec in enumerate(trace.loops):
        for j, g in enumerate(spec.groups):
            gid = group_id(j)
            target = rec.targets_before[gid]
            for call, arg in rec.calls[gid]:
                where = f"loop {i}: {gid} (min {g.min_size}, max {g.max_size}) {call}({arg})"
                if call == "increase_size":
                    assert arg > 0 and target + arg <= g.max_size, _fail(
                        trace, f"{where} from {target}"
                    )
                    target += arg
                elif call == "delete_nodes":
                    after = target - len(arg)
                    assert after >= min(g.min_size, target), _fail(trace, f"{where} from {target}")
                    target = after
                elif call == "decrease_target_size":
                    target += arg
            assert target == rec.targets_after[gid], _fail(
                trace, f"loop {i}: {gid} target {rec.targets_after[gid]}, calls give {target}"
            )


def _zero_or_max_example() -> ClusterSpec:
    """An empty zero-or-max group of 3 and one pending pod that one of its nodes holds:
    the group must go to 3 (or stay at 0), not to 1."""
    return ClusterSpec(
        groups=(GroupSpec("std", 0, 3, True, ()),),
        static=None,
        pending=(PendingSpec(1000, 1024, None, False),),
        pdb_allowed=(0, 0),
        max_nodes_total=0,
        cores_total=DEFAULTS.cores_total,
        memory_total=DEFAULTS.memory_total,
        enforce_min_size=False,
        balance=False,
        expander="least-waste",
        max_drain_parallelism=1,
        max_scale_down_parallelism=10,
        utilization_threshold=0.5,
        register_lag=0,
    )


@PROPERTY
@given(clusters(zero_or_max=True))
@example(_zero_or_max_example())
def test_zero_or_max_groups_all_or_nothing(spec: ClusterSpec) -> None:
    """A zero-or-max group is empty or at its max size after every loop."""
    trace = simulate(spec)
    for i, rec in enumerate(trace.loops):
        for j, g in enumerate(spec.groups):
            gid = group_id(j)
            if g.zero_or_max:
                assert rec.targets_after[gid] in (0, g.max_size), _fail(
                    trace,
                    f"loop {i}: zero-or-max {gid} (max {g.max_size}) at {rec.targets_after[gid]}",
                )
