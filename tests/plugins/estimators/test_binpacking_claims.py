"""The estimator and the equivalence groups judge pods with claims as the pod-by-pod
predicate does: a pod whose claim is missing, lost, being deleted or (ephemeral) not its
own lands on no new node, when the snapshot knows its storage objects."""

from __future__ import annotations

from clusterscaler.loop.estimationlimits import EstimationLimits, ThresholdLimiter
from clusterscaler.model import (
    NodeInfo,
    OwnerRef,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    Volume,
)
from clusterscaler.model.storage import ANN_BIND_COMPLETED
from clusterscaler.plugins.estimators import BinpackingEstimator
from clusterscaler.simulator import ClusterSnapshot, SimNodeInfo, check_predicates
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler.simulator.equivalence import group_pods
from hypothesis import given, settings
from hypothesis import strategies as st

RS = OwnerRef("ReplicaSet", "web", "rs-1", True)
NO_LIMITS = EstimationLimits(max_nodes_per_scale_up=None, max_duration=None)
FAST = StorageClass("fast", "ebs.csi.aws.com", "Immediate")
PV = PersistentVolume("pv", storage_class="fast", capacity=1, phase="Bound")

# What each pod's claim is like: absent, usable, lost, being deleted, another pod's.
STATES = ("missing", "ok", "lost", "deleting", "foreign")


class PodByPod(BinpackingEstimator):
    """The estimator with every group placed pod by pod, never arithmetically."""

    def _existing_arithmetic(self, state, pods, snapshot):  # type: ignore[no-untyped-def]
        return self._existing(state, pods, snapshot)

    def _new_arithmetic(self, state, pods, snapshot, limiter):  # type: ignore[no-untyped-def]
        self._new(state, pods, snapshot, limiter)


def template() -> NodeInfo:
    return NodeInfo(make_node("tmpl", cpu="2", memory="4Gi"))


def claim(pod: Pod, name: str, state: str, *, ephemeral: bool) -> PersistentVolumeClaim | None:
    if state == "missing":
        return None
    return PersistentVolumeClaim(
        "default", name, uid=f"uid-{name}", storage_class="fast", volume_name="pv",
        phase="Lost" if state == "lost" else "Bound",
        annotations={} if state == "lost" else {ANN_BIND_COMPLETED: "yes"},
        deleting=state == "deleting",
        controller_uid=(
            "uid-someone-else" if state == "foreign" else pod.uid if ephemeral else ""
        ),
    )


@st.composite
def workload(draw: st.DrawFn) -> tuple[list[Pod], list[PersistentVolumeClaim]]:
    pods: list[Pod] = []
    claims: list[PersistentVolumeClaim] = []
    for i in range(draw(st.integers(1, 12))):
        ephemeral = draw(st.booleans())
        volume = (
            Volume("scratch", "ephemeral")
            if ephemeral
            else Volume("data", "persistentVolumeClaim", claim_name=f"data-{i % 3}")
        )
        pod = make_pod(f"p{i}", "500m", "100Mi", owner=RS, volumes=(volume,))
        pods.append(pod)
        name = f"p{i}-scratch" if ephemeral else f"data-{i % 3}"
        if any(c.name == name for c in claims):
            continue
        made = claim(pod, name, draw(st.sampled_from(STATES)), ephemeral=ephemeral)
        if made is not None:
            claims.append(made)
    return pods, claims


def snapshot(claims: list[PersistentVolumeClaim]) -> ClusterSnapshot:
    return ClusterSnapshot(pvs=[PV], pvcs=claims, storage_classes=[FAST])


@settings(max_examples=80, deadline=None)
@given(workload())
def test_estimates_place_exactly_the_pods_the_predicate_lets_fit(
    case: tuple[list[Pod], list[PersistentVolumeClaim]],
) -> None:
    pods, claims = case
    alone = snapshot(claims)
    alone.add_node(make_node("fresh", cpu="2", memory="4Gi"))
    fits = {p.key for p in pods if check_predicates(p, alone.get("fresh"), alone) is None}
    fast = BinpackingEstimator().estimate(
        group_pods(pods), template(), snapshot(claims), ThresholdLimiter(NO_LIMITS)
    )
    slow = PodByPod().estimate(
        [g for p in pods for g in group_pods([p])], template(), snapshot(claims),
        ThresholdLimiter(NO_LIMITS),
    )
    assert {p.key for p in fast.scheduled_pods} == fits
    assert {p.key for p in slow.scheduled_pods} == fits
    assert fast.node_count == slow.node_count
    check = snapshot(claims)
    for node in fast.new_nodes:
        check.add_node(node.node)
        for pod in node.pods:
            assert check_predicates(pod, SimNodeInfo(node.node), check) is None, pod.key


def test_a_pod_whose_claim_is_missing_is_left_out_beside_one_whose_claim_exists() -> None:
    ok = make_pod("p0", "500m", "100Mi", owner=RS,
                  volumes=(Volume("data", "persistentVolumeClaim", claim_name="data-0"),))
    missing = make_pod("p1", "500m", "100Mi", owner=RS,
                       volumes=(Volume("data", "persistentVolumeClaim", claim_name="data-1"),))
    present = claim(ok, "data-0", "ok", ephemeral=False)
    assert present is not None
    got = BinpackingEstimator().estimate(
        group_pods([ok, missing]), template(), snapshot([present]), ThresholdLimiter(NO_LIMITS)
    )
    assert [p.name for p in got.scheduled_pods] == ["p0"]
    assert got.node_count == 1
