"""The CapacityQuota CRD, for tests on the real control plane.

As for the ProvisioningRequest CRD (`provreqcrd`): upstream's own file when it can be had, at
the CA release the bench builds (the `apis` module from the Go module proxy, else the source
of that release the bench unpacked into the cache); otherwise the CRD written here from the
API's types (`apis/capacityquota/autoscaling.x-k8s.io/v1alpha1`), with the validation their
kubebuilder markers generate. A test checks it against upstream's file wherever that file
is at hand.
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

__all__ = ["CRD_FILE", "NAME", "capacity_quota_crd", "crd_from_types", "upstream_crd"]

NAME = "capacityquotas.autoscaling.x-k8s.io"
# The file in the `apis` module.
CRD_FILE = "config/crd/autoscaling.x-k8s.io_capacityquotas.yaml"

def _label_selector_schema() -> dict[str, Any]:
    """metav1.LabelSelector, as controller-gen writes it."""
    return {
        "type": "object",
        "properties": {
            "matchExpressions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": {"type": "string"},
                        "operator": {"type": "string"},
                        "values": {
                            "type": "array",
                            "items": {"type": "string"},
                            "x-kubernetes-list-type": "atomic",
                        },
                    },
                },
                "x-kubernetes-list-type": "atomic",
            },
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "x-kubernetes-map-type": "atomic",
    }


def _schema() -> dict[str, Any]:
    spec = {
        "type": "object",
        "required": ["limits"],
        "properties": {
            "limits": {
                "type": "object",
                "required": ["resources"],
                "properties": {
                    "resources": {
                        "type": "object",
                        "additionalProperties": dict(QUANTITY_SCHEMA),
                        "maxProperties": 20,
                        "x-kubernetes-validations": [
                            {
                                "message": "Resource names must be 63 characters or less.",
                                "rule": "self.all(key, size(key) <= 63)",
                            },
                            {
                                "message": "All resource quantities must be non-negative "
                                "integers.",
                                "rule": "self.all(key, type(self[key]) == int ? self[key] >= 0"
                                " : (!self[key].startsWith('-') && "
                                "quantity(self[key]).isInteger()))",
                            },
                        ],
                    }
                },
            },
            "selector": _label_selector_schema(),
        },
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
            "used": {
                "type": "object",
                "required": ["resources"],
                "properties": {
                    "resources": {"type": "object", "additionalProperties": dict(QUANTITY_SCHEMA)}
                },
            },
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
    """The CRD as controller-gen makes it from the v1alpha1 types (without the
    descriptions): cluster-scoped, short name `cq`, with the status subresource."""
    version = {
        "name": "v1alpha1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": _schema()},
        "subresources": {"status": {}},
    }
    return crd_document("CapacityQuota", ["cq"], "Cluster", [version])


def upstream_crd() -> tuple[dict[str, Any], str] | None:
    """Upstream's CRD file and where it came from, or None when neither the module proxy nor
    the cache has it."""
    return upstream_crd_file(CRD_FILE)


def capacity_quota_crd() -> tuple[dict[str, Any], str]:
    """The CRD to install, and where it came from."""
    return crd_to_install(CRD_FILE, crd_from_types)
