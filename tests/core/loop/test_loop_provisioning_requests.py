"""ProvisioningRequests in the loop: check-capacity, best-effort-atomic-scale-up, booking,
expiry, backoff and consuming pods, with CA's conditions, reasons and messages."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pytest
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.loop.decisions import LoopResult, ScaleUpStatus
from clusterscaler.model import ClusterObjects
from clusterscaler.model.provisioning import (
    BEST_EFFORT_ATOMIC,
    CHECK_CAPACITY,
    CONSUME_ANNOTATION,
    Condition,
    PodSet,
    PodTemplate,
    ProvisioningRequest,
)
from clusterscaler.simulator.builders import make_pod
from loopkit import T0, Harness, pending_pod, running_pod


class RequestsCluster(InMemoryCluster):
    """An in-memory cluster that also holds requests and templates, and takes the status
    the loop writes as the API server would."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: dict[str, ProvisioningRequest] = {}
        self.templates: list[PodTemplate] = []
        self.writes: list[tuple[str, tuple[str, ...]]] = []
        self._version = 0

    def snapshot(self) -> ClusterObjects:
        objects = super().snapshot()
        objects.provisioning_requests = list(self.requests.values())
        objects.pod_templates = list(self.templates)
        return objects

    def apply(self, result: LoopResult) -> None:
        for r in result.provisioning_requests:
            if not r.changed:
                continue
            self._version += 1
            self.writes.append((r.key, r.changed))
            self.requests[r.key] = dataclasses.replace(
                self.requests[r.key], conditions=r.conditions, resource_version=str(self._version)
            )


def template(name: str = "worker", cpu: str = "1", namespace: str = "default") -> PodTemplate:
    return PodTemplate(namespace, name, make_pod(name, cpu, "1Gi", namespace=namespace))


def provreq(
    name: str,
    class_name: str = CHECK_CAPACITY,
    count: int = 2,
    *,
    template_name: str = "worker",
    created: datetime = T0 - timedelta(minutes=1),
    **kw: Any,
) -> ProvisioningRequest:
    return ProvisioningRequest(
        "default", name, class_name, (PodSet(template_name, count),), uid=f"uid-{name}",
        creation_time=created, resource_version="1", **kw,
    )


def harness(**options: Any) -> tuple[Harness, RequestsCluster]:
    h = Harness(RequestsCluster, enable_provisioning_requests=True, **options)
    assert isinstance(h.cluster, RequestsCluster)
    h.cluster.templates.append(template())
    return h, h.cluster


def run(h: Harness, cluster: RequestsCluster, advance: timedelta = timedelta(0)) -> LoopResult:
    result: LoopResult = h.run(advance)
    cluster.apply(result)
    return result


def cond(cluster: RequestsCluster, name: str, type_: str) -> Condition | None:
    return cluster.requests[f"default/{name}"].condition(type_)


def statuses(cluster: RequestsCluster, name: str) -> dict[str, str]:
    return {c.type: c.status for c in cluster.requests[f"default/{name}"].conditions}


def test_check_capacity_is_provisioned_when_the_pods_fit_and_books_the_room() -> None:
    h, cluster = harness()
    group = h.provider.add_group("g", 0, 10, nodes=2, cpu="2", memory="8Gi")
    cluster.requests["default/train"] = provreq("train", count=3)
    result = run(h, cluster)
    assert statuses(cluster, "train") == {"Accepted": "True", "Provisioned": "True"}
    provisioned = cond(cluster, "train", "Provisioned")
    assert provisioned is not None
    assert (provisioned.reason, provisioned.message) == (
        "CapacityIsFound", "Capacity is found in the cluster",
    )
    accepted = cond(cluster, "train", "Accepted")
    assert accepted is not None and accepted.message == (
        "ProvisioningRequest is accepted by ClusterAutoscaler"
    )
    # check-capacity never scales up, and its pods are never created.
    assert group.calls == [] and result.scale_up.decisions == ()
    assert all(not p.name.startswith("train") for p in cluster.pods.values())
    # The booked room (3 of 4 CPUs) is not offered to a pending pod of 2 CPUs: it scales up.
    h.add_pods([pending_pod("big", cpu="1500m")])
    result = run(h, cluster, timedelta(seconds=10))
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 1)]


def test_check_capacity_without_room_is_not_provisioned_and_never_scales_up() -> None:
    h, cluster = harness()
    group = h.provider.add_group("g", 0, 10, nodes=1, cpu="2", memory="8Gi")
    cluster.requests["default/train"] = provreq("train", count=3)
    result = run(h, cluster)
    provisioned = cond(cluster, "train", "Provisioned")
    assert provisioned is not None and provisioned.status == "False"
    assert (provisioned.reason, provisioned.message) == (
        "CapacityIsNotFound", "Capacity is not found, CA will try to find it later.",
    )
    assert group.calls == [] and result.scale_up.decisions == ()


def test_no_retry_fails_the_request_instead() -> None:
    h, cluster = harness()
    h.provider.add_group("g", 0, 10, nodes=1, cpu="2", memory="8Gi")
    cluster.requests["default/train"] = provreq("train", count=3, parameters={"noRetry": "true"})
    run(h, cluster)
    failed = cond(cluster, "train", "Failed")
    assert failed is not None and failed.status == "True"
    assert (failed.reason, failed.message) == (
        "CapacityIsNotFound", "CA could not find requested capacity",
    )
    assert cond(cluster, "train", "Provisioned") is None
    # A failed request is never tried again.
    cluster.writes.clear()
    run(h, cluster, timedelta(minutes=30))
    assert cluster.writes == []


def test_retries_wait_for_a_doubling_backoff() -> None:
    h, cluster = harness(
        provisioning_request_initial_backoff_time=timedelta(minutes=1),
        provisioning_request_max_backoff_time=timedelta(minutes=3),
    )
    h.provider.add_group("g", 0, 10, nodes=1, cpu="2", memory="8Gi")
    cluster.requests["default/train"] = provreq("train", count=3)
    tried: list[int] = []
    for second in range(0, 60 * 12, 10):
        cluster.writes.clear()
        run(h, cluster, timedelta(seconds=10) if second else timedelta(0))
        if cluster.writes:
            tried.append(second)
    # At 0, then after 1, 2, 3 (the max), 3 minutes (plus the loop's 10 s granularity).
    assert tried == [0, 70, 200, 390, 580]


def test_a_missing_pod_template_fails_the_request_and_others_go_on() -> None:
    h, cluster = harness(check_capacity_batch_processing=True)
    h.provider.add_group("g", 0, 10, nodes=1, cpu="4", memory="8Gi")
    cluster.requests["default/broken"] = provreq(
        "broken", template_name="nope", created=T0 - timedelta(minutes=2)
    )
    cluster.requests["default/fine"] = provreq("fine", count=1)
    run(h, cluster)
    failed = cond(cluster, "broken", "Failed")
    assert failed is not None and failed.reason == "FailedToCreatePods"
    assert failed.message == (
        "missing pod templates, 1 pod templates were referenced, 1 templates were missing: nope"
    )
    assert statuses(cluster, "fine")["Provisioned"] == "True"


@pytest.mark.parametrize(("batch", "expected"), [(False, 1), (True, 3)], ids=["one", "batch"])
def test_batch_processing_answers_several_requests_per_loop(batch: bool, expected: int) -> None:
    h, cluster = harness(
        check_capacity_batch_processing=batch,
        check_capacity_provisioning_request_max_batch_size=3,
    )
    h.provider.add_group("g", 0, 10, nodes=2, cpu="8", memory="32Gi")
    for i in range(5):
        cluster.requests[f"default/r{i}"] = provreq(f"r{i}", count=1,
                                                    created=T0 - timedelta(minutes=10 - i))
    run(h, cluster)
    provisioned = [k for k, r in cluster.requests.items() if r.is_true("Provisioned")]
    # The oldest first.
    assert provisioned == [f"default/r{i}" for i in range(expected)]


def test_processor_instance_selects_the_requests_served() -> None:
    h, cluster = harness(check_capacity_processor_instance="team-a")
    h.provider.add_group("g", 0, 10, nodes=1, cpu="4", memory="8Gi")
    cluster.requests["default/mine"] = provreq(
        "mine", count=1, parameters={"processorInstance": "team-a"}
    )
    cluster.requests["default/other"] = provreq(
        "other", count=1, parameters={"processorInstance": "team-b"},
        created=T0 - timedelta(hours=1),
    )
    # With an instance, best-effort-atomic requests are another autoscaler's (as CA).
    cluster.requests["default/atomic"] = provreq(
        "atomic", class_name=BEST_EFFORT_ATOMIC, count=1, created=T0 - timedelta(hours=2)
    )
    # The deprecated form: the class name prefixed with the instance.
    cluster.requests["default/prefixed"] = provreq(
        "prefixed", class_name="team-a" + CHECK_CAPACITY, count=1,
        created=T0 - timedelta(minutes=30),
    )
    result = run(h, cluster)
    assert statuses(cluster, "other") == {} and statuses(cluster, "atomic") == {}
    assert [r.key for r in result.provisioning_requests] == ["default/prefixed", "default/mine"]
    run(h, cluster, timedelta(seconds=10))
    assert statuses(cluster, "prefixed")["Provisioned"] == "True"
    assert statuses(cluster, "mine")["Provisioned"] == "True"


def test_a_booking_expires_after_ten_minutes_and_frees_the_room() -> None:
    h, cluster = harness()
    h.provider.add_group("g", 0, 10, nodes=1, cpu="2", memory="8Gi")
    cluster.requests["default/train"] = provreq("train", count=1, template_name="worker")
    cluster.templates[:] = [template(cpu="1500m")]
    run(h, cluster)
    assert statuses(cluster, "train")["Provisioned"] == "True"
    h.add_pods([pending_pod("other", cpu="1500m")])
    assert run(h, cluster, timedelta(minutes=1)).scale_up.decisions != ()
    run(h, cluster, timedelta(minutes=10))
    expired = cond(cluster, "train", "BookingExpired")
    assert expired is not None and expired.status == "True"
    assert (expired.reason, expired.message) == (
        "CapacityReservationTimeExpired", "Capacity reservation time is expired",
    )


def test_an_unanswered_request_fails_after_seven_days() -> None:
    h, cluster = harness()
    h.provider.add_group("g", 0, 10, nodes=1)
    cluster.requests["default/old"] = provreq(
        "old", class_name=BEST_EFFORT_ATOMIC, created=T0 - timedelta(days=8)
    )
    # Answered, but never provisioned: it expires too.
    cluster.requests["default/tried"] = provreq(
        "tried", created=T0 - timedelta(days=8), conditions=(
            Condition("Provisioned", "False", "CapacityIsNotFound", "m", T0, 0),),
    )
    run(h, cluster)
    for name in ("old", "tried"):
        failed = cond(cluster, name, "Failed")
        assert failed is not None and (failed.reason, failed.message) == (
            "Expired", "ProvisioningRequest is expired",
        )


def test_consuming_pods_take_the_booked_room_without_a_scale_up() -> None:
    h, cluster = harness()
    group = h.provider.add_group("g", 0, 10, nodes=1, cpu="4", memory="8Gi")
    cluster.requests["default/train"] = provreq("train", count=2)
    run(h, cluster)
    assert statuses(cluster, "train")["Provisioned"] == "True"
    consumer = pending_pod("job-0", cpu="1", annotations={CONSUME_ANNOTATION: "train"})
    h.add_pods([consumer])
    result = run(h, cluster, timedelta(seconds=10))
    assert result.scale_up.decisions == () and group.calls == []
    assert "default/job-0" not in result.pending_pods
    assert result.provisioning_request_consumers == (("default/job-0", "default/train"),)
    # CA's event on the pod, with no reason.
    from clusterscaler.report.events import ObjectRef, events_for_result

    [event] = [e for e in events_for_result(result, ObjectRef.config_map("kube-system", "s"))
               if e.involved.name == "job-0"]
    assert (event.type, event.reason, event.message) == (
        "Normal", "",
        "Unschedulable pod didn't trigger scale-up, because it's consuming "
        "ProvisioningRequest default/train",
    )
    # Bound, it is counted once: one pod stays booked (2 of 4 CPUs used), so a pending pod
    # of 1.5 CPUs fits; counted twice, 3 CPUs would be taken and it would not.
    cluster.pods.pop(consumer.key)
    h.add_pods([running_pod("job-0", "g-1", cpu="1",
                            annotations={CONSUME_ANNOTATION: "train"})])
    h.add_pods([pending_pod("other", cpu="1500m")])
    result = run(h, cluster, timedelta(seconds=10))
    assert result.scale_up.decisions == () and group.calls == []
    # Without the consumer's room, the same pod of 2.5 CPUs does not fit the booked node.
    cluster.pods.pop("default/other")
    h.add_pods([pending_pod("bigger", cpu="2500m")])
    result = run(h, cluster, timedelta(seconds=10))
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 1)]


def test_best_effort_atomic_scales_up_for_every_pod_or_none() -> None:
    h, cluster = harness()
    group = h.provider.add_group("g", 0, 5, nodes=1, cpu="2", memory="8Gi")
    h.add_pods([running_pod("busy", "g-1", cpu="1900m")])
    cluster.requests["default/all"] = provreq("all", class_name=BEST_EFFORT_ATOMIC, count=6)
    result = run(h, cluster)
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 3)]
    assert group.target == 4
    provisioned = cond(cluster, "all", "Provisioned")
    assert provisioned is not None and provisioned.status == "True"
    assert (provisioned.reason, provisioned.message) == (
        "CapacityIsProvisioned", "Capacity is found in the cluster",
    )
    # The request's pods are virtual: no event or pending list names them.
    assert result.scale_up.triggered_pods == () and result.pending_pods == ()
    assert [(d.pods, d.reason) for d in result.scale_up.decisions] == [
        ((), "ProvisioningRequest default/all")
    ]


def test_best_effort_atomic_that_cannot_fit_everything_scales_nothing() -> None:
    h, cluster = harness()
    group = h.provider.add_group("g", 0, 3, nodes=1, cpu="2", memory="8Gi")
    h.add_pods([running_pod("busy", "g-1", cpu="1900m")])
    # 10 pods need 5 new nodes; the group may add 2.
    cluster.requests["default/all"] = provreq("all", class_name=BEST_EFFORT_ATOMIC, count=10)
    result = run(h, cluster)
    assert result.scale_up.decisions == () and group.target == 1
    assert result.scale_up.status is ScaleUpStatus.NO_OPTIONS_AVAILABLE
    provisioned = cond(cluster, "all", "Provisioned")
    assert provisioned is not None and provisioned.status == "False"
    assert provisioned.reason == "CapacityIsNotFound"


def test_best_effort_atomic_that_fits_the_cluster_is_provisioned_at_once() -> None:
    h, cluster = harness()
    group = h.provider.add_group("g", 0, 5, nodes=1, cpu="4", memory="8Gi")
    cluster.requests["default/all"] = provreq("all", class_name=BEST_EFFORT_ATOMIC, count=2)
    run(h, cluster)
    provisioned = cond(cluster, "all", "Provisioned")
    assert provisioned is not None and provisioned.reason == "CapacityIsFound"
    assert group.calls == []


def test_disabled_requests_are_not_read() -> None:
    h = Harness(RequestsCluster)
    assert isinstance(h.cluster, RequestsCluster)
    h.cluster.templates.append(template())
    h.provider.add_group("g", 0, 10, nodes=1, cpu="4")
    h.cluster.requests["default/train"] = provreq("train", count=1)
    result = h.run()
    assert result.provisioning_requests == ()


def test_conditions_written_but_not_yet_read_back_are_not_answered_twice() -> None:
    h, cluster = harness()
    h.provider.add_group("g", 0, 10, nodes=1, cpu="4", memory="8Gi")
    cluster.requests["default/train"] = provreq("train", count=1)
    # The loop's writes are not applied: the cache lags.
    first = h.run()
    assert [r.changed for r in first.provisioning_requests] == [("Accepted", "Provisioned")]
    second = h.run(timedelta(seconds=10))
    assert [r.changed for r in second.provisioning_requests] == [()]
    assert second.provisioning_requests[0].statuses() == {
        "Accepted": "True", "Provisioned": "True",
    }


def test_scale_down_keeps_the_booked_room() -> None:
    h, cluster = harness(scale_down_unneeded_time=timedelta(minutes=1),
                         scale_down_delay_after_add=timedelta(0))
    h.provider.add_group("g", 0, 10, nodes=3, cpu="2", memory="8Gi")
    cluster.templates[:] = [template(cpu="1500m")]
    cluster.requests["default/train"] = provreq("train", count=2)
    run(h, cluster)
    assert statuses(cluster, "train")["Provisioned"] == "True"
    for _ in range(6):
        result = run(h, cluster, timedelta(minutes=1))
    # Two nodes hold a booked pod each, which fits nowhere else: only the third goes.
    assert len(h.cluster.nodes) == 2, result.scale_down
    # Once the booking expires, the room is free and the nodes go too.
    for _ in range(8):
        run(h, cluster, timedelta(minutes=1))
    assert statuses(cluster, "train")["BookingExpired"] == "True"
    assert len(h.cluster.nodes) < 2


def test_best_effort_atomic_scales_up_for_the_pods_the_cluster_cannot_hold() -> None:
    h, cluster = harness()
    h.provider.add_group("g", 0, 10, nodes=1, cpu="4", memory="16Gi")
    cluster.templates[:] = [template(cpu="1500m")]
    # Six pods of 1.5 CPUs: two fit the node, four need two new nodes (not three).
    cluster.requests["default/all"] = provreq("all", class_name=BEST_EFFORT_ATOMIC, count=6)
    result = run(h, cluster)
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 2)]
    assert statuses(cluster, "all")["Provisioned"] == "True"


def test_requests_provisioned_or_failed_a_week_ago_are_deleted() -> None:
    h, cluster = harness()
    h.provider.add_group("g", 0, 10, nodes=1, cpu="4", memory="8Gi")
    week = T0 - timedelta(days=7, minutes=1)
    cluster.requests["default/done"] = provreq("done", conditions=(
        Condition("Provisioned", "True", "CapacityIsFound", "m", week, 0),
        Condition("BookingExpired", "True", "CapacityReservationTimeExpired", "m", week, 0),
    ))
    # Of any class, as CA.
    cluster.requests["default/other"] = provreq("other", class_name="queued.example.com",
                                                conditions=(
        Condition("Failed", "True", "R", "m", week, 0),))
    cluster.requests["default/recent"] = provreq("recent", conditions=(
        Condition("Failed", "True", "R", "m", T0 - timedelta(days=6), 0),))
    result = h.run()
    deleted = [(r.key, r.uid) for r in result.provisioning_requests if r.delete]
    assert deleted == [("default/done", "uid-done"), ("default/other", "uid-other")]
    # Not answered as well.
    assert all(not r.changed for r in result.provisioning_requests)
