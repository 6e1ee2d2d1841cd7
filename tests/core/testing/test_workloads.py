"""The workload generator and the differential run's placement check, without a cluster."""

from __future__ import annotations

from typing import Any

from clusterscaler.model.node import parse_node
from clusterscaler.model.pod import parse_pod
from clusterscaler.model.storage import parse_pv, parse_pvc, parse_storage_class
from clusterscaler.testing.differential import (
    HELPS,
    OVERTAKEN,
    PREEMPTED,
    Placed,
    Storage,
    check_placement,
    compare,
    wait_for_scheduler,
)
from clusterscaler.testing.workloads import (
    FEATURES,
    HOSTNAME_LABEL,
    WORKLOAD_LABEL,
    Claim,
    ExistingNode,
    Group,
    LocalVolume,
    PodSpec,
    PodTerm,
    Shape,
    Workload,
    admitted,
    workloads,
)
from hypothesis import given, settings

# The slow run's case: two running pods on host port 8081 on one node (bound by name, which
# kwok admits); kube-scheduler preempted the port-less pod beside them and, its port set
# having forgotten 8081 with that pod, bound a pending pod on 8081 there.
NODE = Shape(cpu=4000, memory=16384, pods=110, widgets=4)
RUNNING = (
    PodSpec("run-1-0", "b", 1500, 1024, priority_class="diff-low"),
    PodSpec("run-1-1", "a", 1500, 512, host_port=8081, priority_class="diff-high"),
    PodSpec("run-1-2", "a", 100, 1024, widgets=1, host_port=8081),
)


def test_running_pods_are_those_a_kubelet_admits() -> None:
    assert [p.name for p in admitted(NODE, RUNNING)] == ["run-1-0", "run-1-1"]
    small = Shape(cpu=2000, memory=2048, pods=2, widgets=0)
    assert [p.name for p in admitted(small, RUNNING)] == ["run-1-0"]


@settings(max_examples=200, deadline=None)
@given(workloads())
def test_existing_nodes_hold_only_admissible_pods(workload: Workload) -> None:
    for node in workload.existing:
        assert admitted(node.shape, node.pods) == node.pods
        ports = [p.host_port for p in node.pods if p.host_port is not None]
        assert len(ports) == len(set(ports))


@settings(max_examples=60)
@given(workloads())
def test_every_rendered_object_is_read_by_the_model_and_kept_to_its_workload(
    workload: Workload,
) -> None:
    rendered = workload.objects("diff-w0", "w0")
    assert workload.features <= set(FEATURES)
    for raw in [*rendered.templates, *rendered.nodes]:
        node = parse_node(raw)
        assert node.labels[WORKLOAD_LABEL] == "w0"
        assert any(t.key == WORKLOAD_LABEL and t.value == "w0" for t in node.taints)
    for raw in [*rendered.running, *rendered.pending]:
        pod = parse_pod(raw)
        assert pod.namespace == "diff-w0"
        assert pod.node_selector[WORKLOAD_LABEL] == "w0"
        assert any(t.key == WORKLOAD_LABEL and t.value == "w0" for t in pod.tolerations)
    assert len(rendered.pending) == len(workload.pending) >= 1
    pvs = [parse_pv(o) for o in rendered.storage if o["kind"] == "PersistentVolume"]
    pvcs = [parse_pvc(o) for o in rendered.storage if o["kind"] == "PersistentVolumeClaim"]
    classes = [parse_storage_class(o) for o in rendered.storage if o["kind"] == "StorageClass"]
    assert len(pvcs) == len(workload.claims)
    assert [c.name for c in classes] == (["diff-local-w0"] if workload.claims else [])
    for pv in pvs:
        assert pv.node_affinity and pv.storage_class == "diff-local-w0"
        assert pv.labels[WORKLOAD_LABEL] == "w0"
    for template in rendered.templates:
        annotations = template["metadata"]["annotations"]
        assert int(annotations["cluster-autoscaler.kwok.nodegroup/max-count"]) >= 3


def _bound(raw: dict[str, Any], node: str) -> dict[str, Any]:
    raw["spec"]["nodeName"] = node
    return raw


def _scheduled(namespace: str, name: str, at: str) -> dict[str, Any]:
    return {"reason": "Scheduled", "eventTime": at,
            "involvedObject": {"namespace": namespace, "name": name}}


def _placement(anti: bool) -> list[str]:
    """Two pods of app `a` bound by "the scheduler" to one node, the second with
    anti-affinity to app `a` by hostname when `anti`."""
    shape = Shape(cpu=4000, memory=8192, pods=110)
    first = PodSpec("pod-0", "a", 500, 256)
    second = PodSpec("pod-1", "a", 500, 256,
                     anti_affinity=(PodTerm("a", HOSTNAME_LABEL),) if anti else ())
    workload = Workload((Group("g0", shape, 3),), (ExistingNode("n0", shape),), (first, second))
    rendered = workload.objects("diff-w0", "w0")
    node = rendered.nodes[0]
    node["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    name = node["metadata"]["name"]
    pods = [_bound(p, name) for p in rendered.pending]
    events = [_scheduled("diff-w0", "pod-0", "2026-01-01T00:00:05.000001Z"),
              _scheduled("diff-w0", "pod-1", "2026-01-01T00:00:06.000001Z")]
    return check_placement([node], pods, events, {"diff-w0/pod-0", "diff-w0/pod-1"}, set())


def test_the_placement_check_accepts_a_valid_binding_and_names_an_invalid_one() -> None:
    assert _placement(anti=False) == []
    errors = _placement(anti=True)
    assert len(errors) == 1, errors
    assert errors[0].startswith("diff-w0/pod-1: kube-scheduler bound it to w0-n0, our predicates say:")
    assert "anti-affinity" in errors[0]


def test_a_binding_that_completes_before_the_one_it_relied_on_is_accepted() -> None:
    """kube-scheduler schedules pod-1 (app b), then pod-0 (affinity to app b) with pod-1
    assumed on the node; pod-0's binding, and its event, can finish first."""
    shape = Shape(cpu=4000, memory=8192, pods=110)
    follower = PodSpec("pod-0", "a", 500, 256, affinity=(PodTerm("b", HOSTNAME_LABEL),))
    leader = PodSpec("pod-1", "b", 500, 256)
    workload = Workload((Group("g0", shape, 3),), (ExistingNode("n0", shape),),
                        (follower, leader))
    rendered = workload.objects("diff-w0", "w0")
    node = rendered.nodes[0]
    node["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    pods = [_bound(p, node["metadata"]["name"]) for p in rendered.pending]
    events = [_scheduled("diff-w0", "pod-0", "2026-01-01T00:00:05.000001Z"),
              _scheduled("diff-w0", "pod-1", "2026-01-01T00:00:05.000900Z")]
    keys = {"diff-w0/pod-0", "diff-w0/pod-1"}
    assert check_placement([node], pods, events, keys, set()) == []
    # Alone, the follower has nothing to follow.
    alone = check_placement([node], pods[:1], events[:1], {"diff-w0/pod-0"}, set())
    assert len(alone) == 1 and "pod affinity" in alone[0], alone


def test_a_claimed_pod_kube_scheduler_preempted_is_not_compared() -> None:
    """The slow run's case: a pod of no priority that a new node helps is bound, then
    deleted by kube-scheduler for a pending pod of higher priority (its Preempted event); a
    claimed pod gone with no such event stays a disagreement."""
    shape = Shape(cpu=1000, memory=2048, pods=110)
    workload = Workload((Group("g0", shape, 5),), (),
                        (PodSpec("pod-0", "b", 1000, 512, priority_class="diff-high"),
                         PodSpec("pod-3", "c", 250, 512)))
    rendered = workload.objects("diff-w0", "w0")
    said = {"diff-w0/pod-0": (HELPS, ("w0-g0",), ""), "diff-w0/pod-3": (HELPS, ("w0-g0",), "")}
    remaining = rendered.pending[:1]  # pod-3 is gone
    for preempted, expected in (({"diff-w0/pod-3"}, (PREEMPTED, True)), (set(), (HELPS, False))):
        outcome = compare(workload, "w0", "diff-w0", remaining, nodes=[], events=[], said=said,
                          before={}, running=set(), preempted=preempted)
        claims = {p.pod: (p.claim, p.agreed) for p in outcome.pods}
        assert claims["diff-w0/pod-3"] == expected, claims


class _Pods:
    """Cluster.pods() as the wait reads it: pod-1 marked unschedulable; pod-0, bound and
    then preempted by a pod of higher priority, gone."""

    def pods(self) -> list[dict[str, Any]]:
        return [{"metadata": {"namespace": "diff-w0", "name": "pod-1"}, "spec": {},
                 "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}]


def test_the_wait_for_kube_scheduler_ends_when_a_pending_pod_was_preempted() -> None:
    placed = Placed([], {"diff-w0": {"diff-w0/pod-0", "diff-w0/pod-1"}}, {"diff-w0": set()})
    wait_for_scheduler(_Pods(), placed, timeout=5)  # type: ignore[arg-type]


def test_a_binding_without_its_scheduled_event_is_named_not_a_crash() -> None:
    """The slow run's case: a pod bound as the run ended, its event not yet listed (the run
    now waits for it, within a bound); the replay still checks the binding, on every node."""
    shape = Shape(cpu=4000, memory=8192, pods=110)
    workload = Workload((Group("g0", shape, 3),),
                        (ExistingNode("n0", shape), ExistingNode("n1", shape)),
                        (PodSpec("pod-0", "a", 500, 256), PodSpec("pod-1", "b", 500, 256)))
    rendered = workload.objects("diff-w0", "w0")
    for node in rendered.nodes:
        node["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    pods = [_bound(p, rendered.nodes[0]["metadata"]["name"]) for p in rendered.pending]
    events = [_scheduled("diff-w0", "pod-0", "2026-01-01T00:00:05.000001Z")]
    errors = check_placement(rendered.nodes, pods, events,
                             {"diff-w0/pod-0", "diff-w0/pod-1"}, set())
    assert errors == ["diff-w0/pod-1: bound to w0-n0 without a Scheduled event"], errors


@settings(max_examples=200, deadline=None)
@given(workloads())
def test_each_claim_is_one_pods_and_each_pre_bound_claim_fits_its_own_volume(
    workload: Workload,
) -> None:
    used = [p.claim for p in workload.pending if p.claim is not None]
    assert len(used) == len(set(used)) == len(workload.claims)
    sizes = {v.name: v.size for v in workload.volumes}
    pre_bound = [c for c in workload.claims if c.volume]
    assert len({c.volume for c in pre_bound}) == len(pre_bound)
    assert all(c.size <= sizes[c.volume] for c in pre_bound)
    existing = {n.name for n in workload.existing}
    assert all(v.node in existing for v in workload.volumes if v.node)
    if workload.claims:
        assert workload.features & {"pvc-pre-bound", "pvc-wait-for-first-consumer"}


# A zone volume claimed by two pods' unbound claims: kube-scheduler binds the first and the
# volume is gone for the second, which our simulation also fits nowhere once the claim of
# the first is bound (the claim was overtaken, as CA's, which reserves no volume either).
def test_a_pod_whose_volume_another_claim_took_is_overtaken_not_a_disagreement() -> None:
    shape = Shape(cpu=4000, memory=8192, pods=110, zone="z1")
    workload = Workload(
        (Group("g0", shape, 3),), (),
        (PodSpec("pod-0", "a", 500, 256, claim="claim-0"),
         PodSpec("pod-1", "a", 500, 256, claim="claim-1")),
        volumes=(LocalVolume("pv0", 5, zone="z1"),),
        claims=(Claim("claim-0", 1), Claim("claim-1", 1)),
    )
    rendered = workload.objects("diff-w0", "w0")
    # A node of the group, as the autoscaler made it from the template.
    node = rendered.templates[0]
    node["metadata"].update(name="w0-g0-1", creationTimestamp="2026-01-01T00:00:00Z")
    node["metadata"]["labels"][HOSTNAME_LABEL] = "w0-g0-1"
    pods = [_bound(rendered.pending[0], "w0-g0-1"), rendered.pending[1]]
    raw_pv, raw_claims = rendered.storage[1], rendered.storage[2:]
    # As the run leaves them: claim-0 bound to the volume, claim-1 still unbound.
    raw_pv["spec"]["claimRef"] = {"namespace": "diff-w0", "name": "claim-0"}
    raw_pv["status"] = {"phase": "Bound"}
    raw_claims[0]["spec"]["volumeName"] = "w0-pv0"
    raw_claims[0]["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    storage = Storage((parse_pv(raw_pv),), tuple(parse_pvc(c) for c in raw_claims),
                      (parse_storage_class(rendered.storage[0]),))
    said = {"diff-w0/pod-0": (HELPS, ("w0-g0",), ""), "diff-w0/pod-1": (HELPS, ("w0-g0",), "")}
    events = [_scheduled("diff-w0", "pod-0", "2026-01-01T00:00:05.000001Z")]
    outcome = compare(workload, "w0", "diff-w0", pods, [node], events, said, before={},
                      running=set(), storage=storage)
    assert outcome.agreed, outcome.report()
    assert {p.pod: p.claim for p in outcome.pods}["diff-w0/pod-1"] == OVERTAKEN
    # Were the volume still free, our predicates would fit pod-1 beside pod-0: a
    # disagreement.
    free = Storage((parse_pv(rendered.storage[1] | {"spec": {
        k: v for k, v in raw_pv["spec"].items() if k != "claimRef"}, "status": {
        "phase": "Available"}}),), storage.pvcs[1:], storage.classes)
    outcome = compare(workload, "w0", "diff-w0", pods, [node], events, said, before={},
                      running=set(), storage=free)
    assert not outcome.agreed
