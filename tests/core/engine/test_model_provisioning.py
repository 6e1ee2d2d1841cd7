"""ProvisioningRequests and PodTemplates parsed into the model, and refused with the object,
field and expected form."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from clusterscaler.model import ClusterObjects, ModelError
from clusterscaler.model.provisioning import (
    BEST_EFFORT_ATOMIC,
    CHECK_CAPACITY,
    PROVISIONED,
    parse_pod_template,
    parse_provisioning_request,
)


def request(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {
            "name": "train",
            "namespace": "batch",
            "uid": "u1",
            "generation": 2,
            "resourceVersion": "17",
            "creationTimestamp": "2026-01-02T03:04:05Z",
        },
        "spec": {
            "provisioningClassName": CHECK_CAPACITY,
            "podSets": [{"podTemplateRef": {"name": "worker"}, "count": 4}],
            **spec,
        },
    }


def template(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "worker", "namespace": "batch"},
        "template": {
            "metadata": {"labels": {"app": "train"}},
            "spec": {
                "containers": [
                    {"name": "w", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}
                ],
                **spec,
            },
        },
    }


def test_a_request_is_read_whole() -> None:
    raw = request(parameters={"noRetry": "true"})
    raw["status"] = {
        "conditions": [
            {
                "type": "Provisioned",
                "status": "True",
                "reason": "CapacityIsFound",
                "message": "Capacity is found in the cluster",
                "lastTransitionTime": "2026-01-02T03:05:00Z",
                "observedGeneration": 2,
            }
        ]
    }
    pr = parse_provisioning_request(raw)
    assert (pr.namespace, pr.name, pr.uid, pr.generation, pr.resource_version) == (
        "batch", "train", "u1", 2, "17",
    )
    assert pr.class_name == CHECK_CAPACITY
    assert pr.pod_count == 4 and pr.pod_sets[0].template == "worker"
    assert pr.parameters == {"noRetry": "true"}
    assert pr.creation_time == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert pr.is_true(PROVISIONED)
    cond = pr.condition(PROVISIONED)
    assert cond is not None and cond.reason == "CapacityIsFound"
    assert cond.last_transition_time == datetime(2026, 1, 2, 3, 5, tzinfo=UTC)


def test_v1beta1_is_read_and_other_versions_are_refused() -> None:
    raw = request(provisioningClassName=BEST_EFFORT_ATOMIC)
    raw["apiVersion"] = "autoscaling.x-k8s.io/v1beta1"
    assert parse_provisioning_request(raw).api_version.endswith("v1beta1")
    raw["apiVersion"] = "autoscaling.x-k8s.io/v2"
    with pytest.raises(ModelError, match=r"ProvisioningRequest batch/train: apiVersion: "
                       r"expected autoscaling.x-k8s.io/v1 or autoscaling.x-k8s.io/v1beta1"):
        parse_provisioning_request(raw)


@pytest.mark.parametrize(
    ("change", "field", "expected"),
    [
        ({"podSets": []}, "spec.podSets", "a list of 1 to 32 pod sets"),
        ({"podSets": "worker"}, "spec.podSets", "a list of 1 to 32 pod sets"),
        ({"podSets": [{"count": 1}]}, r"spec.podSets\[0\].podTemplateRef.name",
         "the name of a PodTemplate"),
        ({"podSets": [{"podTemplateRef": {"name": "w"}, "count": 0}]},
         r"spec.podSets\[0\].count", "an integer of at least 1"),
        ({"podSets": [{"podTemplateRef": {"name": "w"}, "count": "3"}]},
         r"spec.podSets\[0\].count", "an integer of at least 1"),
        ({"provisioningClassName": ""}, "spec.provisioningClassName", "a non-empty string"),
        ({"parameters": {"noRetry": True}}, r"spec.parameters\['noRetry'\]", "a string"),
    ],
    ids=["no-pod-sets", "pod-sets-not-a-list", "no-template", "zero-count", "count-string",
         "no-class", "parameter-not-string"],
)
def test_bad_requests_are_named(change: dict[str, Any], field: str, expected: str) -> None:
    with pytest.raises(ModelError, match=rf"ProvisioningRequest batch/train: {field}: "
                       rf"expected {expected}"):
        parse_provisioning_request(request(**change))


def test_a_bad_condition_is_named() -> None:
    raw = request()
    raw["status"] = {"conditions": [{"type": "Provisioned", "status": "yes"}]}
    with pytest.raises(ModelError, match=r"status.conditions\[0\].status: expected one of "
                       r"True, False, Unknown, got 'yes'"):
        parse_provisioning_request(raw)


def test_a_pod_template_is_a_pod_named_after_it() -> None:
    pt = parse_pod_template(template(nodeSelector={"pool": "gpu"}))
    assert pt.key == "batch/worker"
    assert pt.pod.key == "batch/worker"
    assert pt.pod.labels == {"app": "train"}
    assert pt.pod.node_selector == {"pool": "gpu"}
    assert pt.pod.requests.cpu == 2000


def test_a_bad_pod_template_names_the_template_field() -> None:
    raw = template()
    raw["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(
        ModelError,
        match=r"PodTemplate batch/worker: template.spec.containers\[0\].resources.requests.cpu"
        r": expected .*got 'lots'",
    ):
        parse_pod_template(raw)
    no_spec = template()
    del no_spec["template"]["spec"]
    with pytest.raises(ModelError, match=r"PodTemplate batch/worker: template.spec: expected"):
        parse_pod_template(no_spec)


def test_snapshots_carry_requests_and_templates() -> None:
    objects = ClusterObjects.from_list(
        {"kind": "List", "items": [request(), template(), copy.deepcopy(template())]}
    )
    assert [p.key for p in objects.provisioning_requests] == ["batch/train"]
    assert [t.key for t in objects.pod_templates] == ["batch/worker", "batch/worker"]
    assert objects.skipped == {}
