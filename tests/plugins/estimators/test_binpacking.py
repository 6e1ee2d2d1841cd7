from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.estimator import Estimator
from clusterscaler.loop.estimationlimits import (
    LIMIT_CLUSTER_MAX_NODES,
    LIMIT_DURATION,
    LIMIT_MAX_BINPACKING_TIME,
    LIMIT_NODE_GROUP_HEADROOM,
    LIMIT_NODES_PER_SCALE_UP,
    EstimationLimits,
    ThresholdLimiter,
    limits_from_options,
)
from clusterscaler.model import NodeInfo, OwnerRef, Pod, Taint, Toleration, Volume
from clusterscaler.plugins.estimators import BinpackingEstimator, order_groups
from clusterscaler.simulator import ClusterSnapshot, SimNodeInfo, check_predicates
from clusterscaler.simulator.builders import affinity_term, make_node, make_pod, spread
from clusterscaler.simulator.equivalence import PodGroup, group_pods
from hypothesis import given, settings
from hypothesis import strategies as st

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
RS = OwnerRef("ReplicaSet", "web", "rs-1", True)
NO_LIMITS = EstimationLimits(max_nodes_per_scale_up=None, max_duration=None)


def template(cpu="1", memory="10Gi", pods=110, daemonset_cpu=None, **kw) -> NodeInfo:
    node = make_node("tmpl", cpu, memory, pods, **kw)
    ds = []
    if daemonset_cpu:
        ds = [
            make_pod(
                "ds",
                daemonset_cpu,
                owner=OwnerRef("DaemonSet", "ds", "ds-1", True),
                node_name="tmpl",
            )
        ]
    return NodeInfo(node, tuple(ds))


def replicas(n: int, cpu="250m", memory="100Mi", **kw) -> list[Pod]:
    return [make_pod(f"w{i}", cpu, memory, owner=RS, labels={"app": "web"}, **kw) for i in range(n)]


def bare(prefix: str, n: int, cpu: str, memory="10Mi") -> list[Pod]:
    return [make_pod(f"{prefix}{i}", cpu, memory) for i in range(n)]


@dataclass
class Case:
    id: str
    pods: list[Pod]
    template: NodeInfo
    nodes: int
    scheduled: int | None = None
    limits: EstimationLimits = NO_LIMITS
    limited_by: str | None = None
    existing: list = field(default_factory=list)


CASES = [
    # 10 x 600m first (one per node, 400m left each), then 20 x 300m: ten fill the gaps,
    # the other ten need ceil(10 / 3) = 4 more nodes.
    Case(
        "two sizes first-fit decreasing",
        bare("small", 20, "300m") + bare("big", 10, "600m"),
        template(),
        14,
        30,
    ),
    # Large bare workload: 100 x 600m take one node each (400m left); 200 x 350m: one fits
    # beside each 600m pod, the other 100 go two per node (700m): 100 + 50 nodes.
    Case(
        "large bare workload of two sizes",
        bare("s", 200, "350m") + bare("b", 100, "600m"),
        template(),
        150,
        300,
    ),
    Case("identical replicas", replicas(50), template(), 13, 50),
    Case("daemonset pods take template room", replicas(50), template(daemonset_cpu="200m"), 17, 50),
    Case("pod slots limit", replicas(10, cpu="10m"), template(pods=3), 4, 10),
    Case("pod too big for template", replicas(3, cpu="2"), template(), 0, 0),
    Case(
        "untolerated template taint",
        replicas(3),
        template(taints=[Taint("dedicated", "gpu", "NoSchedule")]),
        0,
        0,
    ),
    Case(
        "tolerated template taint",
        replicas(3, tolerations=[Toleration("dedicated", "Exists")]),
        template(taints=[Taint("dedicated", "gpu", "NoSchedule")]),
        1,
        3,
    ),
    Case(
        "autoscaler taint on template ignored",
        replicas(3),
        template(taints=[Taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule")]),
        1,
        3,
    ),
    Case(
        "hostname anti-affinity one per node",
        replicas(5, anti_affinity=[affinity_term(HOST, {"app": "web"})]),
        template(),
        5,
        5,
    ),
    Case("host ports one per node", replicas(3, host_ports=[8080]), template(), 3, 3),
    # The scheduler only knows existing domains: one new node is the only hostname domain.
    Case(
        "spread over hostname sees only existing domains",
        replicas(6, topology_spread=[spread(HOST, {"app": "web"}, max_skew=1)]),
        template("4"),
        1,
        6,
    ),
    Case(
        "spread over zones blocks a crowded zone",
        replicas(2, topology_spread=[spread(ZONE, {"app": "web"}, max_skew=1)]),
        template("4", labels={ZONE: "a"}),
        0,
        0,
        existing=[
            (
                make_node("a1", labels={ZONE: "a"}),
                [make_pod("e1", labels={"app": "web"}), make_pod("e2", labels={"app": "web"})],
            ),
            (make_node("b1", "0", labels={ZONE: "b"}), []),
        ],
    ),
    Case(
        "spread over zones fills the empty zone",
        replicas(2, topology_spread=[spread(ZONE, {"app": "web"}, max_skew=1)]),
        template("4", labels={ZONE: "b"}),
        1,
        2,
        existing=[
            (
                make_node("a1", labels={ZONE: "a"}),
                [make_pod("e1", labels={"app": "web"}), make_pod("e2", labels={"app": "web"})],
            ),
            (make_node("b1", "0", labels={ZONE: "b"}), []),
        ],
    ),
    Case(
        "affinity to a pod in another zone",
        replicas(2, affinity=[affinity_term(ZONE, {"app": "db"})]),
        template(labels={ZONE: "b"}),
        0,
        0,
        existing=[
            (make_node("db-node", labels={ZONE: "a"}), [make_pod("db", labels={"app": "db"})])
        ],
    ),
    Case(
        "affinity to a pod in the same zone",
        replicas(2, affinity=[affinity_term(ZONE, {"app": "db"})]),
        template(labels={ZONE: "a"}),
        1,
        2,
        existing=[
            (make_node("db-node", labels={ZONE: "a"}), [make_pod("db", labels={"app": "db"})])
        ],
    ),
    Case(
        "max nodes per scale-up",
        replicas(50),
        template(),
        5,
        20,
        EstimationLimits(max_nodes_per_scale_up=5),
        LIMIT_NODES_PER_SCALE_UP,
    ),
    Case(
        "node group headroom exhausted",
        replicas(5),
        template(),
        0,
        0,
        EstimationLimits(node_group_headroom=0),
        LIMIT_NODE_GROUP_HEADROOM,
    ),
    Case(
        "cluster max nodes",
        replicas(50),
        template(),
        3,
        12,
        EstimationLimits(cluster_headroom=3),
        LIMIT_CLUSTER_MAX_NODES,
    ),
    Case(
        "pods placed on nodes added for earlier groups",
        bare("big", 2, "700m") + bare("small", 2, "300m"),
        template(),
        2,
        4,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_binpacking(case: Case):
    snap = ClusterSnapshot()
    for node, pods in case.existing:
        snap.add_node(node, pods)
    before = {ni.name: sorted(ni.pods) for ni in snap.node_infos()}
    estimator = BinpackingEstimator()
    assert isinstance(estimator, Estimator)
    result = estimator.estimate(
        group_pods(case.pods),
        case.template,
        snap,
        ThresholdLimiter(case.limits),
        node_group_id="ng",
    )
    assert result.node_count == case.nodes
    if case.scheduled is not None:
        assert len(result.scheduled_pods) == case.scheduled
    assert result.limited_by == case.limited_by
    assert len(result.scheduled_pods) + len(result.unscheduled_pods) == len(case.pods)
    assert len(result.new_nodes) == result.node_count
    # The snapshot is left as it was given.
    assert {ni.name: sorted(ni.pods) for ni in snap.node_infos()} == before
    assert snap.depth == 0


class FakeClock:
    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_nodegroup_binpacking_duration_stops_adding_nodes():
    limiter = ThresholdLimiter(
        EstimationLimits(max_nodes_per_scale_up=None, max_duration=timedelta(seconds=3.5)),
        clock=FakeClock(1.0),
    )
    result = BinpackingEstimator().estimate(
        group_pods(replicas(50)), template(), ClusterSnapshot(), limiter
    )
    assert result.limited_by == LIMIT_DURATION
    assert 0 < result.node_count < 13


def test_max_binpacking_time_deadline_shared_across_groups():
    clock = FakeClock(1.0)
    limiter = ThresholdLimiter(EstimationLimits(max_duration=None, deadline=0.5), clock=clock)
    result = BinpackingEstimator().estimate(
        group_pods(replicas(5)), template(), ClusterSnapshot(), limiter
    )
    assert result.node_count == 0
    assert result.limited_by == LIMIT_MAX_BINPACKING_TIME


def test_limits_from_options():
    options = AutoscalingOptions()
    limits = limits_from_options(options, node_group_headroom=7, cluster_node_count=10)
    assert limits.max_nodes_per_scale_up == 1000
    assert limits.cluster_headroom is None  # --max-nodes-total=0: no limit
    assert limits.max_duration == timedelta(seconds=10)
    import dataclasses

    limits = limits_from_options(
        dataclasses.replace(options, max_nodes_total=12),
        node_group_headroom=7,
        cluster_node_count=10,
    )
    assert limits.cluster_headroom == 2 and limits.node_group_headroom == 7
    # --max-binpacking-time (5m) counts from the start of the scale-up.
    limits = limits_from_options(
        options, node_group_headroom=7, cluster_node_count=10, started_at=100.0
    )
    assert limits.deadline == 400.0


def test_startup_taints_from_options_are_ignored_on_templates():
    import dataclasses

    options = dataclasses.replace(AutoscalingOptions(), startup_taint=["node.example.com/booting"])
    tmpl = template(taints=[Taint("node.example.com/booting", "true", "NoSchedule")])
    assert (
        BinpackingEstimator()
        .estimate(group_pods(replicas(2)), tmpl, ClusterSnapshot(), ThresholdLimiter(NO_LIMITS))
        .node_count
        == 0
    )
    assert (
        BinpackingEstimator(options)
        .estimate(group_pods(replicas(2)), tmpl, ClusterSnapshot(), ThresholdLimiter(NO_LIMITS))
        .node_count
        == 1
    )


# ----------------------------------------------------------------------------- properties

CPU = st.sampled_from(["50m", "100m", "250m", "300m", "500m", "700m", "1", "1500m"])
MEM = st.sampled_from(["10Mi", "256Mi", "1Gi", "3Gi"])


@st.composite
def workloads(draw):
    pods = []
    for g in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 12))
        cpu, mem = draw(CPU), draw(MEM)
        tolerate = draw(st.booleans())
        owner = OwnerRef("ReplicaSet", f"rs{g}", f"rs-{g}", True) if draw(st.booleans()) else None
        # Per-node constraints keep the per-node replay below valid.
        extra = draw(st.sampled_from(["none", "none", "port", "anti-affinity"]))
        for i in range(n):
            pods.append(
                make_pod(
                    f"g{g}-{i}",
                    cpu,
                    mem,
                    owner=owner,
                    labels={"g": str(g)},
                    tolerations=[Toleration("t", "Exists")] if tolerate else [],
                    host_ports=[8000 + g] if extra == "port" else [],
                    anti_affinity=[affinity_term(HOST, {"g": str(g)})]
                    if extra == "anti-affinity"
                    else [],
                )
            )
    return pods


TEMPLATES = st.sampled_from(
    [
        template("1", "4Gi"),
        template("2", "8Gi", daemonset_cpu="100m"),
        template("4", "2Gi", pods=5),
        template("2", "8Gi", taints=[Taint("t", "", "NoSchedule")]),
    ]
)
LIMITS = st.builds(
    EstimationLimits,
    max_nodes_per_scale_up=st.one_of(st.none(), st.integers(0, 6)),
    node_group_headroom=st.one_of(st.none(), st.integers(-1, 6)),
    cluster_headroom=st.one_of(st.none(), st.integers(-1, 6)),
    max_duration=st.none(),
)


@settings(max_examples=80, deadline=None)
@given(workloads(), TEMPLATES, LIMITS)
def test_placements_respect_predicates_and_limits(pods, tmpl, limits):
    result = BinpackingEstimator().estimate(
        group_pods(pods), tmpl, ClusterSnapshot(), ThresholdLimiter(limits)
    )
    caps = [
        c
        for c in (
            limits.max_nodes_per_scale_up,
            limits.node_group_headroom,
            limits.cluster_headroom,
        )
        if c is not None
    ]
    if caps:
        assert result.node_count <= max(0, min(caps))
    # Replay every new node pod by pod: each pod passes the predicates where it was put.
    placed = 0
    for ni in result.new_nodes:
        replay = ClusterSnapshot()
        template_pods = [p for p in ni.pods if p.name.startswith("ds-")]
        replay.add_node(ni.node, template_pods)
        for pod in ni.pods:
            if pod in template_pods:
                continue
            assert check_predicates(pod, replay.get(ni.node.name), replay) is None
            replay.add_pod(pod, ni.node.name)
            placed += 1
        assert len(ni.pods) > len(template_pods)
    assert placed == len(result.scheduled_pods)


@settings(max_examples=80, deadline=None)
@given(workloads(), TEMPLATES, LIMITS)
def test_adding_a_pod_never_lowers_the_node_count(pods, tmpl, limits):
    def count(ps):
        return (
            BinpackingEstimator()
            .estimate(group_pods(ps), tmpl, ClusterSnapshot(), ThresholdLimiter(limits))
            .node_count
        )

    # The new pod is the smallest, so first-fit decreasing considers it last.
    extra = make_pod("extra", "10m", "1Mi", tolerations=[Toleration("t", "Exists")])
    assert count([*pods, extra]) >= count(pods)


class PodByPodEstimator(BinpackingEstimator):
    """The estimator with every group placed pod by pod, never arithmetically."""

    def _existing_arithmetic(self, state, pods, snapshot):  # type: ignore[no-untyped-def]
        return self._existing(state, pods, snapshot)

    def _new_arithmetic(self, state, pods, snapshot, limiter):  # type: ignore[no-untyped-def]
        self._new(state, pods, snapshot, limiter)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 60), CPU, MEM, TEMPLATES, LIMITS)
def test_arithmetic_packing_matches_pod_by_pod(n, cpu, mem, tmpl, limits):
    tol = [Toleration("t", "Exists")]
    pods = [
        make_pod(f"a{i}", cpu, mem, owner=RS, labels={"app": "a"}, tolerations=tol)
        for i in range(n)
    ]
    a = BinpackingEstimator().estimate(
        group_pods(pods), tmpl, ClusterSnapshot(), ThresholdLimiter(limits)
    )
    b = PodByPodEstimator().estimate(
        group_pods(pods), tmpl, ClusterSnapshot(), ThresholdLimiter(limits)
    )
    assert (a.node_count, len(a.scheduled_pods), a.limited_by) == (
        b.node_count,
        len(b.scheduled_pods),
        b.limited_by,
    )
    assert [len(x.pods) for x in a.new_nodes] == [len(x.pods) for x in b.new_nodes]


def test_registered_through_the_entry_point():
    from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry

    registry = collect_registry(build_plugin_manager())
    entry = registry.estimators["binpacking"]
    assert isinstance(entry.factory(AutoscalingOptions()), BinpackingEstimator)


SIZES = st.tuples(CPU, MEM, st.integers(1, 15))


@settings(max_examples=60, deadline=None)
@given(st.lists(SIZES, min_size=1, max_size=4), st.randoms(use_true_random=False), TEMPLATES)
def test_bare_pods_skip_closed_nodes_without_changing_placements(sizes, rnd, tmpl):
    # Bare pods form one-pod groups; the arithmetic path skips the nodes an earlier pod with
    # the same requests did not fit. Placed pod by pod, the pods must go to the same nodes.
    tol = [Toleration("t", "Exists")]
    specs = [(cpu, mem) for cpu, mem, n in sizes for _ in range(n)]
    rnd.shuffle(specs)
    pods = [make_pod(f"p{i}", c, m, tolerations=tol) for i, (c, m) in enumerate(specs)]

    def placements(estimator: BinpackingEstimator) -> list[list[str]]:
        result = estimator.estimate(
            group_pods(pods), tmpl, ClusterSnapshot(), ThresholdLimiter(NO_LIMITS)
        )
        return [
            sorted(p.name for p in ni.pods if not p.name.startswith("ds"))
            for ni in result.new_nodes
        ]

    assert placements(BinpackingEstimator()) == placements(PodByPodEstimator())


def test_many_bare_pods_fill_nodes_in_order():
    # 2,000 one-pod groups of 250m on 1-cpu templates: four per node, no node left half full.
    result = BinpackingEstimator().estimate(
        group_pods(bare("b", 2000, "250m")),
        template(),
        ClusterSnapshot(),
        ThresholdLimiter(NO_LIMITS),
    )
    assert result.node_count == 500
    assert [len(ni.pods) for ni in result.new_nodes] == [4] * 500


def test_groups_are_ordered_largest_first_and_equal_ones_keep_their_order():
    # Cpu share + memory share of a 2-cpu / 8Gi template, the largest first: big 0.5 + 0.5,
    # cpu-heavy 0.75 + 0.125, each small one 0.05 + 0.125 (in the order they came).
    pods = [
        make_pod("small-1", "100m", "1Gi"),
        make_pod("big", "1", "4Gi"),
        make_pod("small-2", "100m", "1Gi"),
        make_pod("cpu-heavy", "1500m", "1Gi"),
        make_pod("small-3", "100m", "1Gi"),
    ]
    groups = [*group_pods(pods), PodGroup([])]
    ordered = order_groups(groups, template(cpu="2", memory="8Gi"))
    assert [g.representative.name for g in ordered] == [
        "big",
        "cpu-heavy",
        "small-1",
        "small-2",
        "small-3",
    ]


class ArithmeticCounting(BinpackingEstimator):
    """The estimator, counting the groups it places arithmetically on new nodes."""

    arithmetic_calls = 0

    def _new_arithmetic(self, state, pods, snapshot, limiter):  # type: ignore[no-untyped-def]
        self.arithmetic_calls += 1
        return super()._new_arithmetic(state, pods, snapshot, limiter)


def _with_real_volumes(pod: Pod, i: int, claim: bool) -> Pod:
    """The volumes `kubectl get pods -o json` shows on a real pod: the projected token
    volume with its random suffix, a configMap, a secret, an emptyDir; with `claim`, a
    PersistentVolumeClaim too."""
    volumes = [
        Volume(f"kube-api-access-{i:05x}", "projected"),
        Volume("config", "configMap"),
        Volume(f"token-{i}", "secret"),
        Volume("scratch", "emptyDir"),
    ]
    if claim:
        volumes.append(Volume("data", "persistentVolumeClaim", claim_name=f"data-{i}"))
    return pod.with_(volumes=tuple(volumes))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 60), CPU, MEM, TEMPLATES, LIMITS)
def test_pods_with_volumes_that_cannot_constrain_scheduling_pack_as_pod_by_pod(
    n, cpu, mem, tmpl, limits
):
    """Real-shaped pods (a token volume whose name is unique per pod, configMaps, secrets,
    emptyDirs) stay one equivalence group and take the arithmetic path, with the very
    placements of the pod-by-pod reference."""
    tol = [Toleration("t", "Exists")]
    pods = [
        _with_real_volumes(
            make_pod(f"a{i}", cpu, mem, owner=RS, labels={"app": "a"}, tolerations=tol), i, False
        )
        for i in range(n)
    ]
    groups = group_pods(pods)
    assert len(groups) == 1
    fast = ArithmeticCounting()
    a = fast.estimate(groups, tmpl, ClusterSnapshot(), ThresholdLimiter(limits))
    assert fast.arithmetic_calls >= 1
    b = PodByPodEstimator().estimate(groups, tmpl, ClusterSnapshot(), ThresholdLimiter(limits))
    assert (a.node_count, len(a.scheduled_pods), a.limited_by) == (
        b.node_count,
        len(b.scheduled_pods),
        b.limited_by,
    )
    assert [len(x.pods) for x in a.new_nodes] == [len(x.pods) for x in b.new_nodes]


def test_pods_with_claims_stay_apart_and_off_the_arithmetic_path() -> None:
    tol = [Toleration("t", "Exists")]
    pods = [
        _with_real_volumes(make_pod(f"s{i}", "1", "1Gi", owner=RS, tolerations=tol), i, True)
        for i in range(3)
    ]
    # Each claim is its own: the pods are not twins for scheduling.
    assert len(group_pods(pods)) == 3
    plain = [
        _with_real_volumes(make_pod(f"p{i}", "1", "1Gi", owner=RS, tolerations=tol), i, False)
        for i in range(3)
    ]
    assert len(group_pods(plain)) == 1


def test_a_group_built_by_hand_is_checked_pod_by_pod() -> None:
    # Only `group_pods` promises alike pods (`PodGroup.alike`); a plugin's own group of
    # unequal pods must not be packed as copies of its first pod.
    pods = [make_pod("small", "100m", "10Mi"), *(make_pod(f"big{i}", "1", "10Mi") for i in range(3))]
    got = BinpackingEstimator().estimate(
        [PodGroup(pods)], template(cpu="1"), ClusterSnapshot(), ThresholdLimiter(NO_LIMITS)
    )
    assert got.node_count == 4
    assert all(
        check_predicates(p, SimNodeInfo(n.node), ClusterSnapshot()) is None
        for n in got.new_nodes
        for p in n.pods
    )
