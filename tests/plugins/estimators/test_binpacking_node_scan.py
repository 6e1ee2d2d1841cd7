"""The estimator's shortcuts never change where a pod goes.

The pod-by-pod search passes over nodes without free room for a pod's requests and nodes
an equal pod already failed for a lasting reason (`node_scan`), and groups that only need
resources are filled arithmetically. A reference estimator that places every pod on its
own and runs the filters on every node, round from the last placement as the scheduler
does, must produce the very same estimate for mixed workloads: spread, pod affinity,
anti-affinity (own and of pods already in the cluster), host ports, taints and resources.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from clusterscaler.framework.schedulerconfig import SchedulerConfig
from clusterscaler.interfaces.estimator import Estimate
from clusterscaler.loop.estimationlimits import EstimationLimits, ThresholdLimiter
from clusterscaler.model import NodeInfo, OwnerRef, Pod, Taint, Toleration
from clusterscaler.plugins.estimators import BinpackingEstimator
from clusterscaler.plugins.estimators.node_scan import FreeRoom, OpenNodes
from clusterscaler.simulator import ClusterSnapshot, check_predicates
from clusterscaler.simulator.builders import affinity_term, make_node, make_pod, spread
from clusterscaler.simulator.equivalence import group_pods
from clusterscaler.simulator.profile import configured_filters
from clusterscaler.simulator.snapshot import SimNodeInfo
from hypothesis import given, settings
from hypothesis import strategies as st

Filters = tuple[tuple[str, Callable[..., str | None]], ...]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
TAINT = Taint("dedicated", "batch", "NoSchedule")


class EveryNodeEstimator(BinpackingEstimator):
    """The reference: every pod placed on its own (no arithmetic fill), every added node
    tried in turn with the filters run on each."""

    def _existing_arithmetic(self, state, pods, snapshot):  # type: ignore[no-untyped-def]
        return self._existing(state, pods, snapshot)

    def _new_arithmetic(self, state, pods, snapshot, limiter):  # type: ignore[no-untyped-def]
        self._new(state, pods, snapshot, limiter)

    def _runs(self, groups, ordered):  # type: ignore[no-untyped-def]
        # Each group on its own, as it comes.
        return [[group] for group in ordered]

    def _existing(self, state, pods, snapshot):  # type: ignore[no-untyped-def]
        names = state.new_nodes
        count = len(names)
        if not count:
            return pods
        for i, pod in enumerate(pods):
            for step in range(count):
                index = (state.last_index + step) % count
                if check_predicates(pod, snapshot.get(names[index]), snapshot) is None:
                    self._place(state, snapshot, pod, index)
                    state.last_index = index
                    break
            else:
                return pods[i:]
        return ()


def template(zone: str, cpu: str, memory: str, pods: int, tainted: bool) -> NodeInfo:
    node = make_node(
        "tmpl",
        cpu,
        memory,
        pods,
        labels={ZONE: zone, HOST: "tmpl"},
        taints=[TAINT] if tainted else [],
    )
    return NodeInfo(node, ())


TEMPLATES = st.builds(
    template,
    st.sampled_from(["a", "b"]),
    st.sampled_from(["1", "2", "4"]),
    st.sampled_from(["2Gi", "4Gi", "8Gi"]),
    st.sampled_from([4, 8, 110]),
    st.booleans(),
)
KINDS = (
    "plain",
    "zone-spread",
    "host-spread",
    "zone-affinity",
    "zone-affinity-to-x",
    "host-anti",
    "zone-anti",
    "port",
)


@st.composite
def workloads(draw: st.DrawFn) -> list[Pod]:
    """Workloads of every kind; several share requests or labels, so closures are shared."""
    pods: list[Pod] = []
    for w in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(KINDS))
        # Few labels and sizes: different workloads often look alike to the closures.
        app = draw(st.sampled_from(["x", "y", f"w{w}"]))
        cpu = draw(st.sampled_from(["100m", "300m", "500m", "900m"]))
        memory = draw(st.sampled_from(["100Mi", "500Mi", "1Gi", "3Gi"]))
        tolerate = draw(st.booleans())
        owner = OwnerRef("ReplicaSet", f"rs{w}", f"rs-{w}", True) if draw(st.booleans()) else None
        selector = {"app": app}
        extra: dict[str, object] = {}
        if kind == "zone-spread":
            extra["topology_spread"] = [spread(ZONE, selector, draw(st.integers(1, 2)))]
        elif kind == "host-spread":
            extra["topology_spread"] = [spread(HOST, selector, draw(st.integers(1, 2)))]
        elif kind == "zone-affinity":
            extra["affinity"] = [affinity_term(ZONE, selector)]
        elif kind == "zone-affinity-to-x":
            extra["affinity"] = [affinity_term(ZONE, {"app": "x"})]
        elif kind == "host-anti":
            extra["anti_affinity"] = [affinity_term(HOST, selector)]
        elif kind == "zone-anti":
            extra["anti_affinity"] = [affinity_term(ZONE, selector)]
        elif kind == "port":
            extra["host_ports"] = [8000 + draw(st.integers(0, 1))]
        for i in range(draw(st.integers(1, 25))):
            pods.append(
                make_pod(
                    f"{kind}-{w}-{i}",
                    cpu,
                    memory,
                    owner=owner,
                    labels=selector,
                    tolerations=[Toleration("dedicated", "Exists")] if tolerate else [],
                    **extra,  # type: ignore[arg-type]
                )
            )
    return pods


def cluster(old_node: bool, anti_app: str | None, filters: Filters | None = None) -> ClusterSnapshot:
    """Maybe an existing node in zone a (without a hostname label, so that it is no
    hostname domain and hostname spread can tighten and relax), maybe with a pod whose
    anti-affinity repels some new pods from zone a; `filters`: the scheduler profile's."""
    snap = ClusterSnapshot(filters=filters)
    if old_node:
        snap.add_node(make_node("old", "1", "1Gi", labels={ZONE: "a"}))
        if anti_app is not None:
            guard = make_pod(
                "guard",
                "10m",
                labels={"app": "guard"},
                anti_affinity=[affinity_term(ZONE, {"app": anti_app})],
            )
            snap.add_pod(guard, "old")
    return snap


def run(
    estimator: BinpackingEstimator,
    pods: Sequence[Pod],
    tmpl: NodeInfo,
    snap: ClusterSnapshot,
    cap: int | None,
) -> Estimate:
    limits = EstimationLimits(max_nodes_per_scale_up=cap, max_duration=None)
    return estimator.estimate(group_pods(pods), tmpl, snap, ThresholdLimiter(limits))


def shape(result: Estimate) -> tuple[object, ...]:
    return (
        result.node_count,
        result.limited_by,
        [p.key for p in result.scheduled_pods],
        [p.key for p in result.unscheduled_pods],
        [(ni.node.name, [p.key for p in ni.pods]) for ni in result.new_nodes],
    )


# Workloads, a template, an existing node or not, a guard pod's anti-affinity target, and
# the estimate's node cap.
ESTIMATES = (
    workloads(),
    TEMPLATES,
    st.booleans(),
    st.sampled_from([None, "x", "y"]),
    st.one_of(st.none(), st.integers(0, 12)),
)


@settings(max_examples=120, deadline=None)
@given(*ESTIMATES)
def test_skipping_nodes_gives_the_estimate_of_trying_every_node(pods, tmpl, old, anti_app, cap):
    fast = run(BinpackingEstimator(), pods, tmpl, cluster(old, anti_app), cap)
    slow = run(EveryNodeEstimator(), pods, tmpl, cluster(old, anti_app), cap)
    assert shape(fast) == shape(slow)


# A scheduler configuration without NodeResourcesFit: no node is too full for a pod.
WITHOUT_RESOURCES_FIT = configured_filters(
    SchedulerConfig(disabled_filters=frozenset({"NodeResourcesFit"}))
)


@settings(max_examples=60, deadline=None)
@given(*ESTIMATES)
def test_without_node_resources_fit_no_node_is_passed_over_as_full(pods, tmpl, old, anti_app, cap):
    fast = run(BinpackingEstimator(), pods, tmpl, cluster(old, anti_app, WITHOUT_RESOURCES_FIT), cap)
    slow = run(EveryNodeEstimator(), pods, tmpl, cluster(old, anti_app, WITHOUT_RESOURCES_FIT), cap)
    assert shape(fast) == shape(slow)


def test_without_node_resources_fit_a_pod_goes_back_to_a_full_node() -> None:
    # Three 3-cpu pods on 4-cpu templates: b repels a, c repels b. Without the resources
    # filter, c joins a on the first node (as kube-scheduler would place it), not a third.
    a = make_pod("a", "3", labels={"app": "a"})
    b = make_pod("b", "3", labels={"app": "b"}, anti_affinity=[affinity_term(HOST, {"app": "a"})])
    c = make_pod("c", "3", labels={"app": "c"}, anti_affinity=[affinity_term(HOST, {"app": "b"})])
    tmpl = template("a", "4", "8Gi", 110, tainted=False)
    result = run(BinpackingEstimator(), [a, b, c], tmpl, cluster(False, None, WITHOUT_RESOURCES_FIT), None)
    assert [[p.name for p in ni.pods] for ni in result.new_nodes] == [["a", "c"], ["b"]]


def test_a_node_failing_the_spread_is_tried_again_once_the_spread_relaxes():
    # Three nodes half full of other pods; six hostname-spread pods go one per node, then,
    # with every node holding one (the minimum is 1), a second round on the same nodes.
    # A node that failed the spread for the second pod must take the fifth.
    web = OwnerRef("ReplicaSet", "web", "rs-web", True)
    spreading = OwnerRef("ReplicaSet", "spread", "rs-spread", True)
    pods = [make_pod(f"p{i}", "600m", "100Mi", owner=web, labels={"app": "a"}) for i in range(3)]
    pods += [
        make_pod(
            f"h{i}",
            "100m",
            "100Mi",
            owner=spreading,
            labels={"app": "x"},
            topology_spread=[spread(HOST, {"app": "x"}, 1)],
        )
        for i in range(6)
    ]
    tmpl = template("a", "1", "4Gi", 110, False)
    fast = run(BinpackingEstimator(), pods, tmpl, cluster(False, None), None)
    assert shape(fast) == shape(run(EveryNodeEstimator(), pods, tmpl, cluster(False, None), None))
    assert [sorted(p.name for p in ni.pods) for ni in fast.new_nodes] == [
        ["h0", "h4", "p0"],
        ["h1", "h5", "p1"],
        ["h2", "h3", "p2"],
    ]


def test_pods_repelled_by_placed_pods_do_not_close_nodes_to_pods_that_are_not():
    # The pod in the cluster repels app x from zone a. The x pods fit nowhere; y pods of
    # the same size, which nothing repels, must still go to the first node.
    def group(app: str, n: int, cpu: str) -> list[Pod]:
        owner = OwnerRef("ReplicaSet", app, f"rs-{app}", True)
        return [
            make_pod(f"{app}{i}", cpu, "100Mi", owner=owner, labels={"app": app}) for i in range(n)
        ]

    pods = group("z", 1, "1") + group("x", 2, "300m") + group("y", 2, "300m")
    tmpl = template("a", "2", "4Gi", 110, False)
    fast = run(BinpackingEstimator(), pods, tmpl, cluster(True, "x"), None)
    slow = run(EveryNodeEstimator(), pods, tmpl, cluster(True, "x"), None)
    assert shape(fast) == shape(slow)
    assert [sorted(p.name for p in ni.pods) for ni in fast.new_nodes] == [["y0", "y1", "z0"]]
    assert sorted(p.name for p in fast.unscheduled_pods) == ["x0", "x1"]


def test_a_node_failing_pod_affinity_is_tried_again_once_the_pods_it_wants_run():
    # y pods want to be in a zone with db pods. None run when y comes (after z made a
    # node), so y fits nowhere; then db pods land on the first node, and y2 pods, equal
    # to y but for their labels, must go there too.
    def group(app: str, n: int, cpu: str, **kw: object) -> list[Pod]:
        owner = OwnerRef("ReplicaSet", app, f"rs-{app}", True)
        return [
            make_pod(f"{app}-{i}", cpu, "100Mi", owner=owner, labels={"app": app}, **kw)  # type: ignore[arg-type]
            for i in range(n)
        ]

    wants_db = {"affinity": [affinity_term(ZONE, {"app": "db"})]}
    pods = (
        group("z", 1, "1")
        + group("y", 2, "300m", **wants_db)
        + group("db", 1, "300m")
        + group("y2", 2, "300m", **wants_db)
    )
    tmpl = template("a", "2", "4Gi", 110, False)
    fast = run(BinpackingEstimator(), pods, tmpl, cluster(False, None), None)
    slow = run(EveryNodeEstimator(), pods, tmpl, cluster(False, None), None)
    assert shape(fast) == shape(slow)
    assert [sorted(p.name for p in ni.pods) for ni in fast.new_nodes] == [
        ["db-0", "y2-0", "y2-1", "z-0"]
    ]
    assert sorted(p.name for p in fast.unscheduled_pods) == ["y-0", "y-1"]


# ----------------------------------------------------------------------------- structures


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 70)), st.integers(0, 80))
def test_open_nodes_finds_the_first_index_not_closed(closed, start):
    open_nodes = OpenNodes()
    for i in closed:
        open_nodes.close(i)
    expected = next(i for i in range(start, 200) if i not in set(closed))
    assert open_nodes.next_open(start) == expected


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 70)),
    st.lists(st.tuples(st.integers(0, 80), st.integers(0, 30))),
    st.integers(0, 80),
)
def test_open_nodes_closing_a_range_closes_each_index_of_it(closed, ranges, start):
    open_nodes = OpenNodes()
    shut = set(closed)
    for i in closed:
        open_nodes.close(i)
    for lo, length in ranges:
        open_nodes.close_range(lo, lo + length)
        shut.update(range(lo, lo + length))
    assert open_nodes.next_open(start) == next(i for i in range(start, 300) if i not in shut)


def node_info(index: int, cpu: int, memory: int, pods: int) -> SimNodeInfo:
    ni = SimNodeInfo(make_node(f"n{index}", "4", "4Gi", 10))
    alloc = ni.node.allocatable
    ni.req_cpu, ni.req_memory, ni.req_pods = (
        alloc.cpu - cpu,
        alloc.memory - memory,
        alloc.pods - pods,
    )
    return ni


FREE = st.tuples(st.integers(-100, 4000), st.integers(0, 4 << 30), st.integers(0, 10))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(FREE, min_size=1, max_size=100),
    st.lists(st.tuples(st.integers(0, 99), FREE)),
    st.tuples(st.integers(0, 4000), st.integers(0, 4 << 30), st.integers(0, 2)),
    st.integers(0, 100),
)
def test_free_room_finds_the_first_node_with_room(frees, updates, want, start):
    room = FreeRoom()
    current = list(frees)
    for i, free in enumerate(frees):
        room.append(node_info(i, *free))
    # Nodes only fill up during an estimate, but the structure must follow any change.
    for i, free in updates:
        if i < len(current):
            current[i] = free
            room.update(i, node_info(i, *free))
    cpu, memory, slots = want
    hi = len(current)
    expected = next(
        (
            i
            for i in range(start, hi)
            if current[i][0] >= cpu and current[i][1] >= memory and current[i][2] >= slots
        ),
        hi,
    )
    assert room.next_fitting(start, hi, cpu, memory, slots) == expected
