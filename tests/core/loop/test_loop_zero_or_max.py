"""Zero-or-max (atomic) node groups, `NodeGroupOptions.zero_or_max_node_scaling`: such a
group grows from its size straight to its max size or not at all, is never balanced with
similar groups, and shrinks by all of its nodes at once or not at all (CA's
ZeroOrMaxNodeScaling: the scale-up orchestrator, the atomic scale-down filters and budgets,
the group deletion scheduler)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.framework.cloudprovider import NodeGroupOptions
from clusterscaler.framework.options import GpuLimit, MinMax
from clusterscaler.loop.decisions import NoScaleUpReason, ScaleUpStatus
from clusterscaler.simulator.utilization import GPU_RESOURCE
from loopkit import GPU_LABEL, GROUP_LABEL, Harness, pending_pod, running_pod

ATOMIC = NodeGroupOptions(zero_or_max_node_scaling=True)
ZONE = "topology.kubernetes.io/zone"
# Balancing, with the fake cloud's groups told apart by their group label only.
BALANCING: dict[str, Any] = {
    "balance_similar_node_groups": True,
    "balancing_ignore_label": [GROUP_LABEL],
}


# ---------------------------------------------------------------------------- scale-up


@dataclass(frozen=True)
class GroupSpec:
    name: str
    max_size: int
    atomic: bool = False
    nodes: int = 0
    cpu: str = "4"
    memory: str = "16Gi"
    gpus: int = 0
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ScaleUpCase:
    groups: tuple[GroupSpec, ...]
    # Pending pods: (count, cpu) each, optionally asking for GPUs.
    pods: tuple[tuple[int, str], ...]
    # The increase of each group that grows.
    expected: dict[str, int]
    flags: dict[str, Any] = field(default_factory=dict)
    pod_gpus: int = 0
    # The reason each pending pod gives for the atomic group when it is no option.
    rejected: NoScaleUpReason | None = None
    # The pods' node selector: which groups can hold them at all.
    selector: dict[str, str] = field(default_factory=dict)


SCALE_UP_CASES = {
    "one-pod-grows-the-group-to-max": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={"slice": 4},
    ),
    "pods-needing-more-than-max-still-max": ScaleUpCase(
        groups=(GroupSpec("slice", 3, atomic=True),),
        pods=((5, "3"),),
        expected={"slice": 3},
    ),
    "partly-scaled-group-grows-to-max": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True, nodes=1),),
        pods=((1, "3500m"),),
        expected={"slice": 3},
    ),
    "plain-group-grows-by-what-the-pods-need": ScaleUpCase(
        groups=(GroupSpec("plain", 4),),
        pods=((1, "1"),),
        expected={"plain": 1},
    ),
    "max-nodes-total-forbids-the-whole-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={},
        flags={"max_nodes_total": 3},
        rejected=NoScaleUpReason.ATOMIC_MAX_NODES_TOTAL,
    ),
    "max-nodes-total-allows-exactly-the-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={"slice": 4},
        flags={"max_nodes_total": 4},
    ),
    "cores-total-forbids-the-whole-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={},
        flags={"cores_total": MinMax(0, 12)},
        rejected=NoScaleUpReason.CPU_LIMIT_REACHED,
    ),
    "memory-total-forbids-the-whole-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={},
        flags={"memory_total": MinMax(0, 48)},
        rejected=NoScaleUpReason.MEMORY_LIMIT_REACHED,
    ),
    "gpu-total-forbids-the-whole-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True, gpus=2, labels={GPU_LABEL: "a100"}),),
        pods=((1, "1"),),
        pod_gpus=1,
        expected={},
        flags={"gpu_total": [GpuLimit("a100", 0, 6)]},
        rejected=NoScaleUpReason.GPU_LIMIT_REACHED,
    ),
    "max-nodes-per-scaleup-forbids-the-whole-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={},
        flags={"max_nodes_per_scaleup": 3},
        rejected=NoScaleUpReason.ATOMIC_MAX_NODES_PER_SCALE_UP,
    ),
    "refused-atomic-group-leaves-the-plain-one": ScaleUpCase(
        groups=(GroupSpec("plain", 10, cpu="2"), GroupSpec("slice", 4, atomic=True)),
        pods=((1, "1"),),
        expected={"plain": 1},
        flags={"max_nodes_total": 3},
        rejected=NoScaleUpReason.ATOMIC_MAX_NODES_TOTAL,
    ),
    # The pods fit only zone a; balancing spreads the count over the groups similar to the
    # chosen one (zones do not count), except atomic ones.
    "atomic-group-is-not-balanced-with-similar-ones": ScaleUpCase(
        groups=(
            GroupSpec("slice-a", 4, atomic=True, labels={ZONE: "a"}),
            GroupSpec("plain-b", 4, labels={ZONE: "b"}),
        ),
        pods=((3, "3"),),
        selector={ZONE: "a"},
        expected={"slice-a": 4},
        flags=BALANCING,
    ),
    "plain-group-gives-no-share-to-a-similar-atomic-one": ScaleUpCase(
        groups=(
            GroupSpec("plain-a", 4, labels={ZONE: "a"}),
            GroupSpec("slice-b", 4, atomic=True, labels={ZONE: "b"}),
            GroupSpec("plain-c", 4, labels={ZONE: "c"}),
        ),
        pods=((4, "3"),),
        selector={ZONE: "a"},
        expected={"plain-a": 2, "plain-c": 2},
        flags=BALANCING,
    ),
}


def _harness(case: ScaleUpCase) -> Harness:
    h = Harness(**case.flags)
    for spec in case.groups:
        h.provider.add_group(
            spec.name,
            0,
            spec.max_size,
            nodes=spec.nodes,
            cpu=spec.cpu,
            memory=spec.memory,
            gpus=spec.gpus,
            labels=spec.labels,
            options=ATOMIC if spec.atomic else None,
        )
        for i in range(spec.nodes):
            # Running nodes are busy: the pending pods need new ones.
            h.add_pods([running_pod(f"{spec.name}-busy-{i}", f"{spec.name}-{i + 1}", cpu="3900m")])
    n = 0
    for count, cpu in case.pods:
        extended = {GPU_RESOURCE: case.pod_gpus} if case.pod_gpus else None
        for _ in range(count):
            pod = pending_pod(
                f"p{n}", cpu=cpu, memory="1Gi", extended=extended, node_selector=case.selector
            )
            h.add_pods([pod])
            n += 1
    return h


@pytest.mark.parametrize("case", SCALE_UP_CASES.values(), ids=SCALE_UP_CASES.keys())
def test_zero_or_max_scale_up(case: ScaleUpCase) -> None:
    h = _harness(case)
    before = {gid: g.target for gid, g in h.provider.groups.items()}
    result = h.run()
    grown = {gid: g.target - before[gid] for gid, g in h.provider.groups.items()}
    assert {gid: d for gid, d in grown.items() if d} == case.expected
    assert {d.node_group: d.delta for d in result.scale_up.decisions} == case.expected
    if not case.expected:
        assert result.scale_up.status is ScaleUpStatus.NO_OPTIONS_AVAILABLE
    atomic = [s for s in case.groups if s.atomic]
    for spec in atomic:
        # Never a partial increase: nothing, or all the way to the max.
        target = h.provider.groups[spec.name].target
        assert target in (spec.nodes, spec.max_size)
    if case.rejected is not None:
        (spec,) = atomic
        for pod, rejections in result.scale_up.pods_remaining.items():
            mine = [r for r in rejections if r.node_group == spec.name]
            assert [r.reason for r in mine] == [case.rejected], pod
            assert f"needs {spec.max_size - spec.nodes} nodes" in mine[0].detail
        assert result.scale_up.pods_remaining or case.expected


def test_atomic_option_asks_for_the_whole_group_and_says_why() -> None:
    h = Harness()
    h.provider.add_group("slice", 0, 4, options=ATOMIC)
    h.add_pods([pending_pod("p", cpu="1")])
    result = h.run()
    (option,) = result.scale_up.options
    assert option.node_count == 4
    assert "the pods need 1 nodes" in option.debug
    assert "max size 4" in option.debug


def test_pending_pods_after_an_atomic_scale_up_wait_for_the_group() -> None:
    h = Harness()
    g = h.provider.add_group("slice", 0, 3, options=ATOMIC)
    h.add_pods([pending_pod("p", cpu="1")])
    h.run()
    assert g.target == 3
    # The group is at its max size: nothing more is asked while its nodes come.
    h.add_pods([pending_pod("q", cpu="1")])
    result = h.run(timedelta(seconds=10))
    assert result.scale_up.decisions == ()
    assert g.increases == [3]


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({}, 4),
        ({"max_nodes_total": 3}, 0),
        ({"cores_total": MinMax(0, 8)}, 0),
    ],
    ids=["grows-to-max", "node-limit-leaves-it", "core-limit-leaves-it"],
)
def test_min_size_enforcement_of_an_atomic_group(limits: dict[str, Any], expected: int) -> None:
    h = Harness(enforce_node_group_min_size=True, **limits)
    g = h.provider.add_group("slice", 2, 4, options=ATOMIC)
    h.run()
    assert g.target == expected
    assert g.increases == ([expected] if expected else [])
