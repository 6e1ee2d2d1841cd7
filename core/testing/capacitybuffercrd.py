"""The CapacityBuffer CRD, for tests on the real control plane.

As for the ProvisioningRequest CRD (`provreqcrd`): upstream's own file when it can be had, at
the CA release the bench builds (the `apis` module from the Go module proxy, else the source
of that release the bench unpacked into the cache); otherwise the CRD written here from the
API's types (`apis/capacitybuffer/autoscaling.x-k8s.io/v1beta1`, `v1alpha1` alike), with the
validation their kubebuilder markers generate. A test checks it against upstream's file
wherever that file is at hand.
"""

from __future__ import annotations

from typing import Any

from clusterscaler.testing.upstreamcrd import (
    QUANTITY_SCHEMA,
    condition_schema,
    crd_document,
    crd_to_install,
    upstream_crd_file,
)

__all__ = ["CRD_FILE", "NAME", "capacity_buffer_crd", "crd_from_types", "upstream_crd"]

NAME = "capacitybuffers.autoscaling.x-k8s.io"
# The file in the `apis` module.
CRD_FILE = "config/crd/autoscaling.x-k8s.io_capacitybuffers.yaml"

def _ref() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string", "minLength": 1}},
    }


def _schema(both: str) -> dict[str, Any]:
    """The schema of one version; `both` is its message for a buffer naming both a
    PodTemplate and a scalable object (v1alpha1 words it differently)."""
    spec = {
        "type": "object",
        "properties": {
            "limits": {"type": "object", "additionalProperties": QUANTITY_SCHEMA},
            "percentage": {"type": "integer", "format": "int32", "minimum": 0},
            "podTemplateRef": _ref(),
            "provisioningStrategy": {
                "type": "string",
                "default": "buffer.x-k8s.io/active-capacity",
            },
            "replicas": {"type": "integer", "format": "int32", "minimum": 0},
            "scalableRef": {
                "type": "object",
                "required": ["kind", "name"],
                "properties": {
                    "apiGroup": {"type": "string"},
                    "kind": {"type": "string", "minLength": 1},
                    "name": {"type": "string", "minLength": 1},
                },
            },
        },
        "x-kubernetes-validations": [
            {
                "message": "If X is set, replicas or limits must also be set",
                "rule": "!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",
            },
            {
                "message": both,
                "rule": "!(has(self.podTemplateRef) && has(self.scalableRef))",
            },
        ],
    }
    status = {
        "type": "object",
        "properties": {
            "conditions": {
                "type": "array",
                "items": condition_schema(),
                "x-kubernetes-list-map-keys": ["type"],
                "x-kubernetes-list-type": "map",
            },
            "podTemplateGeneration": {"type": "integer", "format": "int64"},
            "podTemplateRef": _ref(),
            "provisioningStrategy": {"type": "string"},
            "replicas": {"type": "integer", "format": "int32"},
        },
    }
    return {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


def crd_from_types() -> dict[str, Any]:
    """The CRD as controller-gen makes it from the v1beta1 and v1alpha1 types (without the
    descriptions): v1beta1 served and stored, v1alpha1 served, both with the status
    subresource and upstream's printer columns."""
    columns = [
        {"jsonPath": ".spec.provisioningStrategy", "name": "Strategy", "type": "string"},
        {"jsonPath": ".status.podTemplateRef.name", "name": "PodTemplate", "type": "string"},
        {"jsonPath": ".status.replicas", "name": "Replicas", "type": "integer"},
        {"jsonPath": ".status.conditions[*].type", "name": "ConditionsType",
         "type": "string"},
        {"jsonPath": ".status.conditions[*].status", "name": "ConditionsStatus",
         "type": "string"},
        {"jsonPath": ".status.conditions[*].reason", "name": "ConditionsReason",
         "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    ]
    v1beta1 = {
        "name": "v1beta1",
        "served": True,
        "storage": True,
        "additionalPrinterColumns": columns,
        "schema": {"openAPIV3Schema": _schema(
            "You must define either PodTemplateRef or ScalableRef, but not both"
        )},
        "subresources": {"status": {}},
    }
    v1alpha1 = {**v1beta1, "name": "v1alpha1", "storage": False,
                "schema": {"openAPIV3Schema": _schema(
                    "You must define both PodTemplateRef and ScalableRef"
                )}}
    return crd_document("CapacityBuffer", ["cb"], "Namespaced", [v1alpha1, v1beta1])


def upstream_crd() -> tuple[dict[str, Any], str] | None:
    """Upstream's CRD file and where it came from, or None when neither the module proxy nor
    the cache has it."""
    return upstream_crd_file(CRD_FILE)


def capacity_buffer_crd() -> tuple[dict[str, Any], str]:
    """The CRD to install, and where it came from."""
    return crd_to_install(CRD_FILE, crd_from_types)
