"""Events on the real API server, written with the autoscaler's own RBAC: a repeated event is
one Event whose count grows, as `kubectl get events` shows CA's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from clusterscaler.kube.eventcorrelator import AUTOSCALER_OPTIONS
from clusterscaler.kube.eventwriter import KubeEventSink
from clusterscaler.report import events as ev
from clusterscaler.report.events import Event, ObjectRef
from clusterscaler.testing.kwokenv import KwokEnv

pytestmark = [pytest.mark.realcluster, pytest.mark.xdist_group("control-plane")]


def test_repeated_identical_events_are_one_event_with_their_count(kwok_env: KwokEnv) -> None:
    cluster = kwok_env.cluster
    ns = cluster.namespace()
    now = datetime.now(UTC).replace(microsecond=0)
    clock = [now]
    api = cluster.api_client(kwok_env.kubeconfig)
    try:
        sink = KubeEventSink(api, correlation=AUTOSCALER_OPTIONS, clock=lambda: clock[0])
        event = Event(ObjectRef.pod(ns, "web"), "Normal", ev.NOT_TRIGGER_SCALE_UP, "no fit")
        for i in range(4):
            # CA's spam filter lets one event per reason and object through every 5 minutes.
            clock[0] = now + timedelta(minutes=5 * i)
            sink.write(event, clock[0])
        assert sink.failures == 0
        [written] = cluster.items("events", "-n", ns)
        assert (written["reason"], written["message"], written["count"]) == (
            "NotTriggerScaleUp",
            "no fit",
            4,
        )
        assert written["firstTimestamp"] == now.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert written["lastTimestamp"] == clock[0].strftime("%Y-%m-%dT%H:%M:%SZ")

        # Gone (expired, deleted): the next one creates it again, with the count it has.
        cluster.kubectl("delete", "event", "-n", ns, written["metadata"]["name"])
        clock[0] += timedelta(minutes=5)
        sink.write(event, clock[0])
        assert sink.failures == 0
        [again] = cluster.items("events", "-n", ns)
        assert (again["metadata"]["name"], again["count"]) == (written["metadata"]["name"], 5)
    finally:
        api.close()
