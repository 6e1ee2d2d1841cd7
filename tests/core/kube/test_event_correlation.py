"""Events correlated as client-go's recorder does before they reach the API server."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clusterscaler.kube.eventcorrelator import (
    AUTOSCALER_OPTIONS,
    COMBINED_PREFIX,
    CorrelatorOptions,
    EventCorrelator,
)
from clusterscaler.kube.eventwriter import BackgroundEventSink, KubeEventSink
from clusterscaler.report import events as ev
from clusterscaler.report.events import Event, ObjectRef
from clusterscaler.testing.faults import FaultKind
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def body(
    message: str = "m", *, reason: str = "ScaleDown", name: str = "n1", type_: str = "Normal"
) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{name}.1", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": name, "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "type": type_,
        "source": {"component": "cluster-autoscaler"},
        "reportingComponent": "cluster-autoscaler",
        "reportingInstance": "ca-0",
        "firstTimestamp": "2026-01-02T03:04:05Z",
        "lastTimestamp": "2026-01-02T03:04:05Z",
        "count": 1,
    }


def sent(correlator: EventCorrelator, event: dict[str, Any]) -> dict[str, Any] | None:
    """Correlate and, as the sink does on success, tell the correlator the server's copy."""
    result = correlator.correlate(event)
    if result is None:
        return None
    correlator.update_state(result.event)
    return {"event": result.event, "patch": result.patch}


# ----------------------------------------------------------------------- spam filter


def test_spam_filter_lets_the_burst_through_then_drops():
    correlator = EventCorrelator(clock=Clock())
    written = [sent(correlator, body(f"m{i % 5}")) for i in range(30)]
    assert [w is not None for w in written] == [True] * 25 + [False] * 5
    assert correlator.filtered == 5


def test_spam_filter_refills_one_event_per_five_minutes():
    clock = Clock()
    correlator = EventCorrelator(CorrelatorOptions(burst=2), clock=clock)
    assert sent(correlator, body("a")) is not None
    assert sent(correlator, body("b")) is not None
    assert sent(correlator, body("c")) is None
    clock.advance(299)
    assert sent(correlator, body("d")) is None
    clock.advance(1)
    assert sent(correlator, body("e")) is not None
    assert sent(correlator, body("f")) is None


def test_default_spam_key_is_per_object_and_type_not_reason():
    correlator = EventCorrelator(CorrelatorOptions(burst=1), clock=Clock())
    assert sent(correlator, body(reason="ScaleDown")) is not None
    assert sent(correlator, body(reason="ScaleDownFailed")) is None
    assert sent(correlator, body(type_="Warning")) is not None
    assert sent(correlator, body(name="n2")) is not None


def test_autoscaler_spam_key_is_per_reason_and_every_status_message_goes():
    correlator = EventCorrelator(AUTOSCALER_OPTIONS, clock=Clock())
    assert sent(correlator, body("a", reason="ScaleDown")) is not None
    assert sent(correlator, body("b", reason="ScaleDown")) is None
    assert sent(correlator, body("c", reason="ScaleDownFailed")) is not None
    status = body("x")
    status["involvedObject"] = {
        "kind": "ConfigMap",
        "namespace": "kube-system",
        "name": "cluster-autoscaler-status",
        "apiVersion": "v1",
    }
    assert sent(correlator, status) is not None
    assert sent(correlator, {**status, "message": "y"}) is not None
    assert sent(correlator, {**status, "reason": "ScaleDownEmpty", "message": "y"}) is None


# ------------------------------------------------------------------------ aggregation


def test_tenth_similar_message_within_ten_minutes_is_combined_with_its_own_count():
    clock = Clock()
    correlator = EventCorrelator(clock=clock)
    for i in range(9):
        result = sent(correlator, body(f"m{i}"))
        assert result is not None and result["event"]["message"] == f"m{i}"
        clock.advance(60)
    tenth = sent(correlator, body("m9"))
    assert tenth is not None and tenth["patch"] is None
    combined = tenth["event"]
    assert combined["message"] == COMBINED_PREFIX + "m9"
    assert combined["count"] == 1
    assert combined["metadata"]["namespace"] == "default"
    assert combined["metadata"]["name"].startswith("n1.")
    assert combined["reason"] == "ScaleDown"
    clock.advance(1)
    eleventh = sent(correlator, body("m10"))
    assert eleventh is not None
    assert eleventh["event"]["metadata"]["name"] == combined["metadata"]["name"]
    assert eleventh["patch"] == {
        "count": 2,
        "lastTimestamp": "2026-01-02T03:13:06Z",
        "message": COMBINED_PREFIX + "m10",
    }


def test_similar_messages_spread_over_more_than_ten_minutes_are_not_combined():
    clock = Clock()
    correlator = EventCorrelator(clock=clock)
    for i in range(12):
        result = sent(correlator, body(f"m{i}"))
        assert result is not None and result["event"]["message"] == f"m{i}"
        clock.advance(601)


def test_identical_messages_count_once_towards_aggregation():
    correlator = EventCorrelator(clock=Clock())
    for _ in range(15):
        result = sent(correlator, body("same"))
        assert result is not None and result["event"]["message"] == "same"


# ---------------------------------------------------------------------------- logger


def test_identical_event_is_patched_with_its_count_incremented():
    correlator = EventCorrelator(clock=Clock())
    first = sent(correlator, body("m"))
    assert first is not None and first["patch"] is None
    again = body("m")
    again["metadata"]["name"] = "n1.2"
    again["lastTimestamp"] = "2026-01-02T03:09:05Z"
    second = sent(correlator, again)
    assert second is not None
    assert second["event"]["metadata"]["name"] == "n1.1"
    assert second["event"]["firstTimestamp"] == "2026-01-02T03:04:05Z"
    assert second["patch"] == {"count": 2, "lastTimestamp": "2026-01-02T03:09:05Z", "message": "m"}
    third = sent(correlator, body("m"))
    assert third is not None and third["patch"] is not None and third["patch"]["count"] == 3


def test_dropped_duplicates_still_count_in_the_next_patch():
    clock = Clock()
    correlator = EventCorrelator(AUTOSCALER_OPTIONS, clock=clock)
    assert sent(correlator, body("m")) is not None
    assert sent(correlator, body("m")) is None
    assert sent(correlator, body("m")) is None
    clock.advance(300)
    result = sent(correlator, body("m"))
    assert result is not None and result["patch"] is not None and result["patch"]["count"] == 4


def test_least_recently_used_entries_are_forgotten():
    correlator = EventCorrelator(CorrelatorOptions(lru_cache_size=2), clock=Clock())
    sent(correlator, body(name="a"))
    sent(correlator, body(name="b"))
    again = sent(correlator, body(name="a"))  # a is now the newest; b the oldest
    assert again is not None and again["patch"] is not None
    sent(correlator, body(name="c"))  # evicts b
    assert (b := sent(correlator, body(name="b"))) is not None and b["patch"] is None
    assert (a := sent(correlator, body(name="a"))) is not None and a["patch"] is None


# ------------------------------------------------------------------ against the fake


def node_event(message: str = "removing node") -> Event:
    return Event(ObjectRef.node("n1"), "Normal", ev.SCALE_DOWN, message)


def test_sink_patches_the_existing_event_instead_of_creating_another(fake_kube):
    sink = KubeEventSink(fake_kube.api_client(), instance="ca-0", clock=Clock())
    for minute in range(3):
        sink.write(node_event(), T0 + timedelta(minutes=minute))
    events = fake_kube.list("events", "default")
    assert len(events) == 1
    assert events[0]["count"] == 3
    assert events[0]["firstTimestamp"] == "2026-01-02T03:04:05Z"
    assert events[0]["lastTimestamp"] == "2026-01-02T03:06:05Z"
    methods = [r.method for r in fake_kube.requests if "/events" in r.path]
    assert methods == ["POST", "PATCH", "PATCH"]
    assert sink.failures == 0


def test_sink_creates_the_event_again_when_the_patch_finds_it_gone(fake_kube):
    sink = KubeEventSink(fake_kube.api_client(), instance="ca-0", clock=Clock())
    sink.write(node_event(), T0)
    (first,) = fake_kube.list("events", "default")
    fake_kube.delete("events", first["metadata"]["name"], "default")
    sink.write(node_event(), T0 + timedelta(minutes=1))
    (recreated,) = fake_kube.list("events", "default")
    assert recreated["metadata"]["name"] == first["metadata"]["name"]
    assert recreated["count"] == 2
    sink.write(node_event(), T0 + timedelta(minutes=2))
    assert [e["count"] for e in fake_kube.list("events", "default")] == [3]
    assert sink.failures == 0


def test_sink_combines_similar_events_as_kubectl_shows_them(fake_kube):
    sink = KubeEventSink(fake_kube.api_client(), instance="ca-0", clock=Clock())
    for i in range(12):
        sink.write(node_event(f"pod {i} evicted"), T0)
    events = fake_kube.list("events", "default")
    combined = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    assert len(events) == 10
    assert [(e["message"], e["count"]) for e in combined] == [
        (COMBINED_PREFIX + "pod 11 evicted", 3)
    ]


@pytest.mark.parametrize("status", [403, 422])
def test_sink_failed_patch_is_logged_and_counted(fake_kube, status):
    sink = KubeEventSink(fake_kube.api_client(), instance="ca-0", clock=Clock())
    sink.write(node_event(), T0)
    fake_kube.add_fault(path="/events", status=status)
    sink.write(node_event(), T0 + timedelta(minutes=1))
    assert sink.failures == 1
    assert [e["count"] for e in fake_kube.list("events", "default")] == [1]


def test_sink_tries_again_when_the_api_server_cannot_be_reached(fake_kube):
    """As client-go's recorder: a write that got no answer (the connection dropped) is tried
    again after a wait, so a short outage of the API server loses no event."""
    sink = KubeEventSink(fake_kube.api_client(), instance="ca-0", clock=Clock(),
                         retry_interval=0.01)
    fake_kube.add_fault(method="POST", path="/events", kind=FaultKind.DROP, times=2)
    sink.write(node_event(), T0)
    assert [e["count"] for e in fake_kube.list("events", "default")] == [1]
    assert sink.failures == 0
    # Once written, the next one patches it: the correlator learnt of the write.
    sink.write(node_event(), T0 + timedelta(minutes=1))
    assert [e["count"] for e in fake_kube.list("events", "default")] == [2]


def test_an_event_written_though_its_answer_was_lost_is_not_written_twice(fake_kube):
    """The API server creates the event and the connection closes before its answer: the
    try after it finds the event there (409), which is no failure."""
    sink = KubeEventSink(fake_kube.api_client(), instance="ca-0", clock=Clock(),
                         retry_interval=0.01)
    fake_kube.add_fault(method="POST", path="/events", kind=FaultKind.TIMEOUT, times=1)
    sink.write(node_event(), T0)
    assert [e["count"] for e in fake_kube.list("events", "default")] == [1]
    assert sink.failures == 0


def test_sink_gives_an_event_up_after_twelve_tries(fake_kube):
    errors: list[object] = []
    sink = KubeEventSink(fake_kube.api_client(), instance="ca-0", clock=Clock(),
                         retry_interval=0.001, on_error=errors.append)
    fake_kube.add_fault(method="POST", path="/events", kind=FaultKind.DROP)
    sink.write(node_event(), T0)
    posts = [r for r in fake_kube.requests if r.method == "POST" and "/events" in r.path]
    # urllib3 may reconnect once on its own for a request it could not send: at least the
    # twelve tries of the sink, and not more than twice that.
    assert 12 <= len(posts) <= 24, len(posts)
    assert sink.failures == 1
    assert len(errors) == 1
    assert fake_kube.list("events", "default") == []


def test_sink_does_not_try_again_what_the_server_refused(fake_kube):
    sink = KubeEventSink(fake_kube.api_client(), instance="ca-0", clock=Clock(),
                         retry_interval=0.001)
    fake_kube.add_fault(method="POST", path="/events", status=422)
    sink.write(node_event(), T0)
    posts = [r for r in fake_kube.requests if r.method == "POST" and "/events" in r.path]
    assert len(posts) == 1
    assert sink.failures == 1


def test_stopping_the_sink_ends_its_wait_to_try_again(fake_kube):
    sink = KubeEventSink(fake_kube.api_client(), instance="ca-0", clock=Clock(),
                         retry_interval=600.0)
    fake_kube.add_fault(method="POST", path="/events", kind=FaultKind.DROP)
    background = BackgroundEventSink(sink)
    background.write(node_event(), T0)
    deadline = time.monotonic() + 10
    while not any(r.method == "POST" for r in fake_kube.requests) and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    # The worker does not end within the flush's timeout (it waits 600 s to try again):
    # the sink is stopped, and the worker ends at once.
    background.close(timeout=0.5)
    assert time.monotonic() - started < 3
    assert not background._thread.is_alive()
    assert sink.failures == 1


@pytest.mark.parametrize(
    ("namespace", "involved_namespace", "allowed"),
    [
        ("apps", "apps", True),
        ("default", "", True),
        ("kube-system", "", False),
        ("default", "apps", False),
    ],
    ids=["object-namespace", "cluster-scoped-in-default", "cluster-scoped-elsewhere", "other"],
)
def test_fake_api_server_validates_the_event_namespace_as_the_real_one(
    fake_kube, namespace, involved_namespace, allowed
):
    event = body()
    event["metadata"]["namespace"] = namespace
    if involved_namespace:
        event["involvedObject"]["namespace"] = involved_namespace
    core = k8s.CoreV1Api(fake_kube.api_client())
    if allowed:
        core.create_namespaced_event(namespace, event)
        return
    with pytest.raises(ApiException) as failure:
        core.create_namespaced_event(namespace, event)
    assert failure.value.status == 422
    assert "does not match event.namespace" in str(failure.value.body)
