"""Fuzz target for the caches: the fake API server serves hostile objects (in a list page and
in watch events) and malformed watch events (an object that is not an object, an unknown
type, an ERROR of any code, a BOOKMARK of any metadata) to a pod and a node informer, as
the runtime builds them. Whatever it serves:
- the informer's thread never dies and never logs a traceback (`informer_unexpected_error`);
- an object it cannot read is counted (`parse_errors`) and remembered by its key
  (`unreadable()`), not cached;
- the healthy objects are served: those listed beside the hostile one, and one created
  after the hostile events, which the informer must still be following the cluster to see.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from clusterscaler.kube.informer import Backoff, Informer, ListerSpec
from clusterscaler.model import object_key, parse_node, parse_pod
from clusterscaler.testing.fakekube import ApiError, FakeKubeServer
from fuzzkit import HOSTILE_STRINGS, HOSTILE_VALUES, bounded, fuzz_settings, mutated, seeds_by_kind
from hypothesis import assume, given
from hypothesis import strategies as st
from kubernetes import client
from structlog.testing import capture_logs

pytestmark = pytest.mark.fuzz

SEEDS = seeds_by_kind(("Pod", "Node"))
RESOURCES = {"Pod": "pods", "Node": "nodes"}


def _healthy(kind: str, name: str) -> dict[str, Any]:
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": "Pending"}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}


def _servable(value: Any) -> bool:
    """Whether the fake API server can write `value` as JSON (a real one holds only such)."""
    try:
        json.dumps(value)
    except (ValueError, RecursionError, TypeError):
        return False
    return True


@st.composite
def stored_objects(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    """A hostile object the API server could store: kind, apiVersion and name intact (it
    refuses an object without them), anything else mutated."""
    raw = draw(mutated(SEEDS[kind]))
    seed_meta = {"name": "hostile"} if kind == "Node" else {"name": "hostile", "namespace": "shop"}
    meta = raw.get("metadata")
    raw["metadata"] = {**meta, **seed_meta} if isinstance(meta, dict) else dict(seed_meta)
    raw["apiVersion"], raw["kind"] = "v1", kind
    return raw


def watch_events(kind: str) -> st.SearchStrategy[tuple[str, Any]]:
    """(type, object) of a watch event: a hostile object added, modified or deleted, an
    object that is not an object, an event type no server sends, an ERROR, a BOOKMARK."""
    objects = mutated(SEEDS[kind])
    return st.one_of(
        st.tuples(st.sampled_from(["ADDED", "MODIFIED", "DELETED"]), objects),
        st.tuples(st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]), HOSTILE_VALUES),
        st.tuples(HOSTILE_STRINGS, objects),
        st.tuples(st.just("ERROR"), st.fixed_dictionaries(
            {"kind": st.just("Status"), "code": HOSTILE_VALUES, "message": HOSTILE_VALUES})),
        st.tuples(st.just("BOOKMARK"), st.fixed_dictionaries(
            {"kind": st.just(kind), "metadata": st.one_of(HOSTILE_VALUES, st.fixed_dictionaries(
                {"resourceVersion": HOSTILE_VALUES}))})),
    )


def _informer(kube: FakeKubeServer, kind: str) -> Informer[Any]:
    api = client.CoreV1Api(kube.api_client())
    spec: ListerSpec[Any] = (
        ListerSpec("pods", "Pod", api.list_pod_for_all_namespaces, parse_pod)
        if kind == "Pod"
        else ListerSpec("nodes", "Node", api.list_node, parse_node)
    )
    return Informer(spec, backoff=Backoff(initial=0.01, maximum=0.05))


def _eventually(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.005)


def _names(informer: Informer[Any]) -> set[str]:
    return {item.name for item in informer.items()}


# A fake API server and an informer thread per example: the normal run's pass is ten.
@fuzz_settings(10)
@given(
    kind=st.sampled_from(["Pod", "Node"]),
    data=st.data(),
)
def test_hostile_objects_and_events_never_stop_an_informer(kind: str, data: st.DataObject) -> None:
    listed = data.draw(stored_objects(kind), label="listed")
    events = data.draw(st.lists(watch_events(kind), min_size=1, max_size=3), label="events")
    assume(_servable(listed) and all(_servable(obj) for _, obj in events))
    resource = RESOURCES[kind]
    with FakeKubeServer() as kube, capture_logs() as logs:
        for name in ("healthy-0", "healthy-1"):
            kube.create(_healthy(kind, name))
        try:
            kube.create(copy.deepcopy(listed))
            stored = True
        except ApiError:
            stored = False  # refused as the API server refuses it: nothing to read
        informer = _informer(kube, kind)
        informer.start()
        try:
            assert informer.wait_for_sync(10), informer.last_error
            unreadable = {u.key for u in informer.unreadable()}
            names = _names(informer)
            assert {"healthy-0", "healthy-1"} <= names, names
            if stored:
                key = object_key(listed)
                assert ("hostile" in names) != (key in unreadable), (names, unreadable)
                assert informer.parse_errors == len(unreadable)
            _eventually(lambda: informer.watching, "the watch opened")
            with bounded():
                for event_type, obj in events:
                    kube.send_raw_watch_event(resource, event_type, obj)
                kube.create(_healthy(kind, "after"))
                _eventually(lambda: "after" in _names(informer),
                            "the object created after the hostile events is served")
            assert {"healthy-0", "healthy-1", "after"} <= _names(informer)
            assert informer._thread is not None and informer._thread.is_alive()
        finally:
            informer.stop()
    tracebacks = [e for e in logs if e["event"] == "informer_unexpected_error"]
    assert not tracebacks, tracebacks
