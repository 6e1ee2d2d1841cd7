"""Every fault kind of the fake API server, seen through the official kubernetes client,
and the seeded fault schedule."""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import urllib3
from clusterscaler.testing.fakekube import FakeKubeServer, RecordedRequest
from clusterscaler.testing.faults import (
    GARBAGE_LINES,
    WATCH_KINDS,
    FaultKind,
    FaultSchedule,
)
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

NODES = "/api/v1/nodes"


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def node_body(name: str) -> client.V1Node:
    return client.V1Node(metadata=client.V1ObjectMeta(name=name))


@pytest.fixture
def kube() -> Iterator[FakeKubeServer]:
    with FakeKubeServer() as server:
        server.create(node("a"))
        server.create(node("b"))
        yield server


@pytest.fixture
def core(kube: FakeKubeServer) -> Iterator[client.CoreV1Api]:
    """A client that does not retry, so that each call is one request."""
    configuration = client.Configuration(host=kube.url)
    configuration.retries = False
    api_client = client.ApiClient(configuration)
    try:
        yield client.CoreV1Api(api_client)
    finally:
        api_client.close()


@pytest.fixture
def retrying_core(kube: FakeKubeServer) -> Iterator[client.CoreV1Api]:
    """A client as configured by default: urllib3 retries idempotent requests."""
    api_client = kube.api_client()
    try:
        yield client.CoreV1Api(api_client)
    finally:
        api_client.close()


def requests_to(kube: FakeKubeServer, method: str, path: str) -> list[RecordedRequest]:
    return [r for r in kube.requests if r.method == method and r.path == path]


def watch_lines(core: client.CoreV1Api, **kwargs: object) -> list[bytes]:
    """The lines of one raw watch response on nodes (it ends within a second)."""
    response = core.list_node(watch=True, _preload_content=False, timeout_seconds=1, **kwargs)
    try:
        return [line for line in response.read().split(b"\n") if line]
    finally:
        response.release_conn()


# --------------------------------------------------------------------------- error answers


@pytest.mark.parametrize(
    ("kind", "status"),
    [(FaultKind.ERROR_500, 500), (FaultKind.ERROR_503, 503), (FaultKind.ERROR_429, 429)],
)
def test_error_kinds_answer_a_status_and_change_nothing(
    kube: FakeKubeServer, core: client.CoreV1Api, kind: FaultKind, status: int
) -> None:
    fault = kube.add_fault(method="POST", path=f"^{NODES}$", kind=kind, times=1)
    with pytest.raises(ApiException) as exc:
        core.create_node(node_body("c"))
    assert exc.value.status == status
    assert json.loads(exc.value.body)["code"] == status
    assert (exc.value.headers.get("Retry-After") == "1") is (status == 429)
    assert kube.get("nodes", "c") is None
    assert fault.hits == 1
    assert requests_to(kube, "POST", NODES)[-1].fault == kind.value
    core.create_node(node_body("c"))  # `times` spent: the next one goes through
    assert kube.get("nodes", "c") is not None


def test_error_kind_needs_a_status_and_status_kinds_keep_theirs(kube: FakeKubeServer) -> None:
    with pytest.raises(ValueError, match="needs a status"):
        kube.add_fault(kind=FaultKind.ERROR)
    with pytest.raises(ValueError, match="answers 429"):
        kube.add_fault(kind=FaultKind.ERROR_429, status=500)
    assert kube.add_fault(kind=FaultKind.ERROR, status=418).injection().status == 418


# --------------------------------------------------------------------------- slow, timeout, drop


def test_slow_past_the_client_timeout_still_carries_the_request_out(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    kube.add_fault(method="POST", path=f"^{NODES}$", kind=FaultKind.SLOW, delay=0.6, times=1)
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.create_node(node_body("c"), _request_timeout=0.2)
    assert time.monotonic() - started < 0.5
    assert kube.get("nodes", "c") is None  # not yet: the server is still waiting
    deadline = time.monotonic() + 5
    while kube.get("nodes", "c") is None:
        assert time.monotonic() < deadline, "the slow request was never carried out"
        time.sleep(0.02)
    assert requests_to(kube, "POST", NODES)[-1].fault == "slow"


def test_slow_within_the_client_timeout_answers_late(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    kube.add_fault(method="GET", path=f"^{NODES}$", kind=FaultKind.SLOW, delay=0.3, times=1)
    started = time.monotonic()
    assert [n.metadata.name for n in core.list_node().items] == ["a", "b"]
    assert time.monotonic() - started >= 0.3


def test_timeout_carries_the_request_out_and_closes_without_answer(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    kube.add_fault(method="POST", path=f"^{NODES}$", kind=FaultKind.TIMEOUT, delay=0.2, times=1)
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.create_node(node_body("c"))
    assert time.monotonic() - started >= 0.2
    assert kube.get("nodes", "c") is not None
    [recorded] = requests_to(kube, "POST", NODES)
    assert (recorded.status, recorded.fault) == (201, "timeout")


def test_drop_closes_without_answer_and_carries_nothing_out(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    kube.add_fault(method="POST", path=f"^{NODES}$", kind=FaultKind.DROP, times=1)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.create_node(node_body("c"))
    assert kube.get("nodes", "c") is None
    [recorded] = requests_to(kube, "POST", NODES)
    assert (recorded.status, recorded.fault) == (0, "drop")


def test_dropped_reads_are_retried_by_a_default_client(
    kube: FakeKubeServer, retrying_core: client.CoreV1Api
) -> None:
    fault = kube.add_fault(method="GET", path="/nodes/a$", kind=FaultKind.DROP, times=2)
    assert retrying_core.read_node("a").metadata.name == "a"
    assert fault.hits == 2
    assert [r.status for r in requests_to(kube, "GET", f"{NODES}/a")] == [0, 0, 200]
    # Dropped every time: the client gives up.
    kube.add_fault(method="GET", path="/nodes/a$", kind=FaultKind.DROP)
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        retrying_core.read_node("a")


# --------------------------------------------------------------------------- watches


def test_watch_end_is_a_clean_empty_stream(kube: FakeKubeServer, core: client.CoreV1Api) -> None:
    kube.add_fault(path=f"^{NODES}$", kind=FaultKind.WATCH_END)
    started = time.monotonic()
    assert watch_lines(core) == []
    events = list(watch.Watch().stream(core.list_node, timeout_seconds=5))
    assert events == []
    assert time.monotonic() - started < 2, "the streams should end at once"
    assert core.list_node().items, "only watches are affected"
    assert {r.fault for r in requests_to(kube, "GET", NODES) if r.verb == "watch"} == {
        "watch-end"
    }


def test_watch_list_answers_the_plain_list_body(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    kube.add_fault(path=f"^{NODES}$", kind=FaultKind.WATCH_LIST, times=2)
    response = core.list_node(watch=True, _preload_content=False, timeout_seconds=5)
    assert response.headers["Content-Type"] == "application/json"
    assert "Transfer-Encoding" not in response.headers
    body = json.loads(response.read())
    response.release_conn()
    assert body["kind"] == "NodeList"
    assert [i["metadata"]["name"] for i in body["items"]] == ["a", "b"]
    # The official watch sees no event at all, and no error: the body has no newline.
    assert list(watch.Watch().stream(core.list_node, timeout_seconds=5)) == []
    assert [r.fault for r in kube.requests if r.verb == "watch"] == ["watch-list"] * 2


def test_watch_garbage_comes_before_the_usual_stream(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    kube.add_fault(path=f"^{NODES}$", kind=FaultKind.WATCH_GARBAGE, times=2)
    lines = watch_lines(core)
    assert lines[: len(GARBAGE_LINES)] == list(GARBAGE_LINES)
    for line in GARBAGE_LINES:
        with pytest.raises(ValueError):
            json.loads(line)
    events = [json.loads(line) for line in lines[len(GARBAGE_LINES) :]]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]
    # The official watch turns each unreadable line into a None event.
    streamed = list(watch.Watch().stream(core.list_node, timeout_seconds=1))
    assert streamed[: len(GARBAGE_LINES)] == [None] * len(GARBAGE_LINES)
    assert [e["object"].metadata.name for e in streamed[len(GARBAGE_LINES) :]] == ["a", "b"]


def test_watch_gone_sends_a_410_error_event_whatever_the_resource_version(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    current = str(kube.resource_version)
    kube.add_fault(path=f"^{NODES}$", kind=FaultKind.WATCH_GONE)
    [line] = watch_lines(core, resource_version=current)
    event = json.loads(line)
    assert event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")
    with pytest.raises(ApiException) as exc:
        list(watch.Watch().stream(core.list_node, resource_version=current, timeout_seconds=5))
    assert exc.value.status == 410


def test_watch_kinds_never_touch_other_requests(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    for kind in WATCH_KINDS:
        kube.add_fault(path=NODES, kind=kind)
    assert [n.metadata.name for n in core.list_node().items] == ["a", "b"]
    core.create_node(node_body("c"))
    assert all(r.fault == "" for r in kube.requests)


def test_timeout_and_drop_of_a_watch_reset_the_stream(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    kube.add_fault(path=f"^{NODES}$", watch=True, kind=FaultKind.DROP, times=1)
    kube.add_fault(path=f"^{NODES}$", watch=True, kind=FaultKind.TIMEOUT, delay=0.1, times=1)
    for expected in ("drop", "timeout"):
        with pytest.raises(urllib3.exceptions.ProtocolError):
            core.list_node(watch=True, timeout_seconds=5, _preload_content=False).read()
        assert [r.fault for r in kube.requests if r.verb == "watch"][-1] == expected


# --------------------------------------------------------------------------- the schedule


ALL_RATES = {
    FaultKind.ERROR_500: 0.05,
    FaultKind.ERROR_503: 0.05,
    FaultKind.ERROR_429: 0.05,
    FaultKind.SLOW: 0.05,
    FaultKind.TIMEOUT: 0.05,
    FaultKind.DROP: 0.05,
    FaultKind.WATCH_END: 0.1,
    FaultKind.WATCH_LIST: 0.1,
    FaultKind.WATCH_GARBAGE: 0.1,
    FaultKind.WATCH_GONE: 0.1,
}

REQUESTS = [
    ("GET", NODES, False),
    ("GET", NODES, True),
    ("PATCH", f"{NODES}/a", False),
    ("DELETE", f"{NODES}/b", False),
    ("GET", "/api/v1/pods", True),
]


def decisions(schedule: FaultSchedule, order: list[tuple[str, str, bool]]) -> list[object]:
    out = []
    for method, path, is_watch in order:
        injection = schedule.decide(method, path, is_watch)
        out.append(injection.kind if injection is not None else None)
    return out


def test_schedule_is_reproducible_for_a_seed_and_independent_of_interleaving() -> None:
    order = REQUESTS * 300
    first = decisions(FaultSchedule(seed=11, rates=ALL_RATES), order)
    assert decisions(FaultSchedule(seed=11, rates=ALL_RATES), order) == first
    assert decisions(FaultSchedule(seed=12, rates=ALL_RATES), order) != first
    # Another interleaving of the paths: each path gets the same sequence of decisions.
    regrouped = sorted(order, key=REQUESTS.index)
    again = decisions(FaultSchedule(seed=11, rates=ALL_RATES), regrouped)
    for request in REQUESTS:
        mine = [d for d, r in zip(first, order, strict=True) if r == request]
        theirs = [d for d, r in zip(again, regrouped, strict=True) if r == request]
        assert mine == theirs


def test_schedule_rates_and_watch_only_kinds() -> None:
    schedule = FaultSchedule(seed=3, rates=ALL_RATES)
    plain = Counter(decisions(schedule, [("GET", NODES, False)] * 4000))
    watches = Counter(decisions(schedule, [("GET", NODES, True)] * 4000))
    assert not set(plain) & WATCH_KINDS
    for kind, rate in ALL_RATES.items():
        if kind not in WATCH_KINDS:
            assert abs(plain[kind] / 4000 - rate) < 0.02, (kind, plain[kind])
        assert abs(watches[kind] / 4000 - rate) < 0.025, (kind, watches[kind])
    assert schedule.injected == plain + watches - Counter({None: plain[None] + watches[None]})
    assert len(schedule.history) == sum(schedule.injected.values())


def test_schedule_filters_and_switches_off() -> None:
    schedule = FaultSchedule(
        seed=1, rates={FaultKind.ERROR_500: 1.0}, paths="/pods", methods=frozenset({"get"})
    )
    assert schedule.decide("GET", NODES, False) is None
    assert schedule.decide("POST", "/api/v1/pods", False) is None
    injection = schedule.decide("GET", "/api/v1/pods", False)
    assert injection is not None and injection.status == 500
    schedule.enabled = False
    assert schedule.decide("GET", "/api/v1/pods", False) is None


@pytest.mark.parametrize(
    ("rates", "message"),
    [
        ({FaultKind.ERROR: 0.1}, "ERROR_500"),
        ({FaultKind.DROP: 1.5}, "must be in"),
        ({FaultKind.DROP: 0.6, FaultKind.SLOW: 0.6}, "more than 1"),
    ],
)
def test_schedule_rejects_bad_rates(rates: dict[FaultKind, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FaultSchedule(seed=0, rates=rates)


def test_server_applies_the_schedule_until_it_is_switched_off(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    schedule = FaultSchedule(seed=5, rates=ALL_RATES, paths=f"^{NODES}", slow_seconds=0.05)
    kube.set_fault_schedule(schedule)
    failures = 0
    for i in range(60):
        try:
            core.patch_node("a", {"metadata": {"labels": {"i": str(i)}}}, _request_timeout=2)
        except (ApiException, urllib3.exceptions.HTTPError):
            failures += 1
    assert failures > 0

    def one_watch(_: int) -> None:
        with contextlib.suppress(ApiException, urllib3.exceptions.HTTPError):
            watch_lines(core, _request_timeout=3)

    # Unfaulted watches last their timeout (a second): run them side by side.
    with ThreadPoolExecutor(max_workers=10) as pool:
        list(pool.map(one_watch, range(40)))
    recorded = Counter(FaultKind(r.fault) for r in kube.requests if r.fault)
    assert recorded == schedule.injected
    assert set(recorded) >= {FaultKind.ERROR_500, FaultKind.DROP, FaultKind.WATCH_LIST}
    assert {r.path for r in kube.requests if r.fault} == {NODES, f"{NODES}/a"}
    # Other paths are never faulted.
    for _ in range(20):
        core.list_namespace()
    assert not [r for r in kube.requests if r.path == "/api/v1/namespaces" and r.fault]
    schedule.enabled = False
    count = len(kube.requests)
    for _ in range(20):
        core.patch_node("a", {"metadata": {"labels": {"i": "x"}}})
    assert all(r.fault == "" and r.status == 200 for r in kube.requests[count:])


def test_rules_come_before_the_schedule(kube: FakeKubeServer, core: client.CoreV1Api) -> None:
    kube.set_fault_schedule(FaultSchedule(seed=0, rates={FaultKind.ERROR_503: 1.0}))
    kube.add_fault(method="GET", path=f"^{NODES}$", status=500, times=1)
    for status in (500, 503):
        with pytest.raises(ApiException) as exc:
            core.list_node()
        assert exc.value.status == status
    kube.set_fault_schedule(None)
    assert core.list_node().items


# --------------------------------------------------------------------------- on_handle


def test_on_handle_sees_carried_out_requests_under_the_lock(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    seen: list[tuple[str, str, bool]] = []

    def observe(method: str, path: str, query: dict[str, str]) -> None:
        seen.append((method, path, kube.get("nodes", "a") is not None))

    kube.on_handle = observe
    kube.add_fault(method="DELETE", kind=FaultKind.ERROR_500, times=1)
    kube.add_fault(method="DELETE", kind=FaultKind.DROP, times=1)
    kube.add_fault(method="DELETE", kind=FaultKind.TIMEOUT, delay=0.0, times=1)
    for _ in range(2):
        with pytest.raises((ApiException, urllib3.exceptions.ProtocolError)):
            core.delete_node("a")
    assert seen == [], "failed or dropped requests are not carried out"
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.delete_node("a")
    assert seen == [("DELETE", f"{NODES}/a", True)]
    assert kube.get("nodes", "a") is None
    core.list_node(watch=True, timeout_seconds=1, _preload_content=False).read()
    assert len(seen) == 1, "watches are not reported"
