"""CapacityBuffers and ResourceQuotas parsed once, checked as the CRD's schema and
validation rules check them; a bad one is named with its field and the expected form."""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.model import ClusterObjects
from clusterscaler.model.capacitybuffer import (
    ACTIVE_PROVISIONING_STRATEGY,
    ScalableRef,
    ScopeRequirement,
    parse_capacity_buffer,
    parse_resource_quota,
    without_token_volumes,
)
from clusterscaler.model.common import ModelError


def raw(spec: dict[str, Any], version: str = "v1beta1", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": f"autoscaling.x-k8s.io/{version}", "kind": "CapacityBuffer",
            "metadata": {"name": "spare", "namespace": "web", "uid": "u", "generation": 3},
            "spec": spec, **extra}


def test_a_buffer_with_its_status() -> None:
    b = parse_capacity_buffer(raw(
        {"podTemplateRef": {"name": "t"}, "replicas": 4, "limits": {"cpu": "2", "memory": "4Gi"}},
        status={"podTemplateRef": {"name": "capacitybuffer-spare-pod-template"},
                "replicas": 3, "podTemplateGeneration": 2,
                "provisioningStrategy": ACTIVE_PROVISIONING_STRATEGY,
                "conditions": [{"type": "ReadyForProvisioning", "status": "True",
                                "reason": "AttributesSetSuccessfully", "message": "ready",
                                "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    ))
    assert (b.key, b.uid, b.generation) == ("web/spare", "u", 3)
    assert (b.pod_template_ref, b.replicas) == ("t", 4)
    assert b.limits is not None and (b.limits.cpu, b.limits.memory) == (2000, 4 << 30)
    # The CRD's default strategy.
    assert b.provisioning_strategy == ACTIVE_PROVISIONING_STRATEGY
    assert (b.status_pod_template_ref, b.status_replicas, b.status_pod_template_generation) == (
        "capacitybuffer-spare-pod-template", 3, 2)
    ready = b.condition("ReadyForProvisioning")
    assert ready is not None and ready.status == "True"


def test_v1alpha1_is_read_too_and_a_scalable_ref() -> None:
    b = parse_capacity_buffer(raw(
        {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "api"},
         "percentage": 20},
        version="v1alpha1",
    ))
    assert b.api_version == "autoscaling.x-k8s.io/v1alpha1"
    assert b.scalable_ref == ScalableRef("apps", "Deployment", "api")
    assert b.percentage == 20 and b.replicas is None


@pytest.mark.parametrize(
    ("spec", "extra", "message"),
    [
        pytest.param({"podTemplateRef": {"name": "t"}}, {},
                     "CapacityBuffer web/spare: spec: expected replicas or limits along with "
                     "podTemplateRef, got 'neither'", id="template-without-count"),
        pytest.param({"podTemplateRef": {"name": "t"}, "replicas": 1,
                      "scalableRef": {"kind": "Deployment", "name": "d"}}, {},
                     "CapacityBuffer web/spare: spec: expected either podTemplateRef or "
                     "scalableRef, but not both, got 'both'", id="both-refs"),
        pytest.param({"podTemplateRef": {"name": ""}, "replicas": 1}, {},
                     "CapacityBuffer web/spare: spec.podTemplateRef.name: expected a non-empty "
                     "string, got ''", id="empty-template-name"),
        pytest.param({"scalableRef": {"name": "d"}}, {},
                     "CapacityBuffer web/spare: spec.scalableRef.kind: expected a non-empty "
                     "string such as Deployment, got None", id="scalable-without-kind"),
        pytest.param({"podTemplateRef": {"name": "t"}, "replicas": 1.5}, {},
                     "CapacityBuffer web/spare: spec.replicas: expected an integer from 0 to "
                     "2147483647, got 1.5", id="fractional-replicas"),
        pytest.param({"podTemplateRef": {"name": "t"}, "limits": {"cpu": "lots"}}, {},
                     "CapacityBuffer web/spare: spec.limits.cpu:", id="bad-quantity"),
        pytest.param({"podTemplateRef": {"name": "t"}, "replicas": 1},
                     {"apiVersion": "autoscaling.x-k8s.io/v1"},
                     "CapacityBuffer web/spare: apiVersion: expected autoscaling.x-k8s.io/v1beta1"
                     " or autoscaling.x-k8s.io/v1alpha1, got 'autoscaling.x-k8s.io/v1'",
                     id="unknown-version"),
        pytest.param({"podTemplateRef": {"name": "t"}, "replicas": 1},
                     {"status": {"replicas": "three"}},
                     "CapacityBuffer web/spare: status.replicas: expected an integer",
                     id="bad-status"),
    ],
)
def test_a_bad_buffer_is_named_with_its_field(
    spec: dict[str, Any], extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(ModelError) as err:
        parse_capacity_buffer({**raw(spec), **extra})
    assert str(err.value).startswith(message)


def test_a_resource_quota_as_the_allocation_reads_it() -> None:
    q = parse_resource_quota({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "compute", "namespace": "web", "uid": "q"},
        "spec": {"scopes": ["NotTerminating"], "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
        "status": {"hard": {"requests.cpu": "4", "limits.memory": "8Gi",
                            "requests.nvidia.com/gpu": "2", "pods": "10"},
                   "used": {"requests.cpu": "500m"}},
    })
    assert dict(q.hard) == {"requests.cpu": 4000, "limits.memory": 8 << 30,
                            "requests.nvidia.com/gpu": 2, "pods": 10}
    assert dict(q.used) == {"requests.cpu": 500}
    assert q.scopes == (ScopeRequirement("NotTerminating", "Exists"),
                        ScopeRequirement("PriorityClass", "In", ("high",)))


def test_a_bad_quota_scope_is_named() -> None:
    with pytest.raises(ModelError) as err:
        parse_resource_quota({"apiVersion": "v1", "kind": "ResourceQuota",
                              "metadata": {"name": "q", "namespace": "web"},
                              "spec": {"scopes": ["Sometimes"]}})
    assert str(err.value).startswith("ResourceQuota web/q: spec.scopes[0]: expected one of "
                                     "Terminating, NotTerminating")


def test_a_snapshot_holds_buffers_and_quotas() -> None:
    objects = ClusterObjects.from_items([
        raw({"podTemplateRef": {"name": "t"}, "replicas": 1}),
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": {"name": "q", "namespace": "web"}},
    ])
    assert [b.key for b in objects.capacity_buffers] == ["web/spare"]
    assert [q.key for q in objects.resource_quotas] == ["web/q"]
    assert not objects.skipped


def test_the_service_account_token_volume_is_left_out_of_a_buffers_pod_spec() -> None:
    # The API server adds `kube-api-access-*` to every pod; a template copied from a pod
    # (or a dry-run pod) must not carry it, or every copy would name a token of its own.
    spec = {
        "volumes": [{"name": "kube-api-access-x7k2p", "projected": {}},
                    {"name": "data", "emptyDir": {}}],
        "containers": [{"name": "c", "volumeMounts": [
            {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets"},
            {"name": "data", "mountPath": "/data"},
        ]}],
        "initContainers": [{"name": "i", "volumeMounts": [
            {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets"},
        ]}],
    }
    assert without_token_volumes(spec) == {
        "volumes": [{"name": "data", "emptyDir": {}}],
        "containers": [{"name": "c", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "initContainers": [{"name": "i"}],
    }
    # The spec given is left as it was.
    assert len(spec["volumes"]) == 2
    only_token = {"volumes": [{"name": "kube-api-access-x7k2p"}], "containers": [{"name": "c"}]}
    assert without_token_volumes(only_token) == {"containers": [{"name": "c"}]}
