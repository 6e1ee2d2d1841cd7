"""Pod list pages are parsed from their JSON text: the cache, its keys, the parse errors
and the resourceVersion are those of parsing every decoded item with `parse_pod`."""

from __future__ import annotations

import json
from typing import Any

from clusterscaler.kube.informer import Informer, ListerSpec
from clusterscaler.model import ModelError, Pod, parse_node, parse_pod


class Response:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()


def pod(name: str, namespace: str | None = "default", cpu: str = "250m") -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "labels": {"app": "web"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web",
                "uid": "rs",
                "controller": True,
            }
        ],
        # What the API server adds and the model drops.
        "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:spec": {}}}],
    }
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "metadata": meta,
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            "volumes": [{"name": f"kube-api-access-{name}", "projected": {"sources": []}}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


PAGES = [
    {
        "kind": "PodList",
        "metadata": {"continue": "page-2", "resourceVersion": "41"},
        "items": [pod("a"), pod("b", namespace=None), pod("bad", cpu="lots"), pod("c", "batch")],
    },
    {
        "kind": "PodList",
        "metadata": {"resourceVersion": "42"},
        "items": [pod("d"), {"metadata": {"name": "no-spec"}}, pod("a", cpu="1")],
    },
]


def listed(spec: ListerSpec[Any]) -> Informer[Any]:
    informer = Informer(spec)
    informer.list_once()
    return informer


def fake_list(**kwargs: Any) -> Response:
    return Response(PAGES[1] if kwargs.get("_continue") == "page-2" else PAGES[0])


def expected_pods() -> dict[str, Pod]:
    out: dict[str, Pod] = {}
    for page in PAGES:
        for raw in page["items"]:
            try:
                parsed = parse_pod(raw)
            except ModelError:
                continue
            ns = raw["metadata"].get("namespace")
            name = raw["metadata"]["name"]
            out[f"{ns}/{name}" if ns else name] = parsed
    return out


def test_pod_pages_cache_what_parse_pod_gives_under_the_same_keys() -> None:
    informer = listed(ListerSpec("pods", "Pod", fake_list, parse_pod))
    expected = expected_pods()
    assert {k: informer.get(k) for k in expected} == expected
    assert sorted(p.key for p in informer.items()) == sorted(p.key for p in expected.values())
    assert informer.get("b") is not None and informer.get("default/b") is None
    # The later page's "a" replaces the earlier one, as keys do.
    assert informer.get("default/a").requests.cpu == 1000
    assert informer.parse_errors == 2
    assert informer.resource_version == "42"


def test_other_kinds_still_take_the_decoded_route() -> None:
    nodes = {
        "kind": "NodeList",
        "metadata": {"resourceVersion": "5"},
        "items": [{"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2"}}}],
    }
    informer = listed(ListerSpec("nodes", "Node", lambda **_: Response(nodes), parse_node))
    assert [n.name for n in informer.items()] == ["n1"]
    assert informer.resource_version == "5"
