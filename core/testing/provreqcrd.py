"""The ProvisioningRequest CRD, for tests on the real control plane.

Upstream's own file when it can be had, at the CA release the bench builds
(``upstreamca.COMMIT``): first the ``apis`` module from the Go module proxy; the proxy this
project uses refuses that module at every version (as ``upstreamca`` records), so next the
source of that release the bench unpacked into the cache, when it did. Otherwise the CRD is
written here from the API's types (``apis/provisioningrequest/autoscaling.x-k8s.io/v1``,
``v1beta1`` alike), with the validation their kubebuilder markers generate; a test checks it
against upstream's file wherever that file is at hand.
"""

from __future__ import annotations

from typing import Any

from clusterscaler.testing.upstreamcrd import (
    condition_schema,
    crd_document,
    crd_to_install,
    module_file,
    upstream_crd_file,
)

__all__ = [
    "CRD_FILE",
    "NAME",
    "crd_from_types",
    "module_file",
    "provisioning_request_crd",
    "upstream_crd",
]

NAME = "provisioningrequests.autoscaling.x-k8s.io"
# The file in the `apis` module.
CRD_FILE = "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"

_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_IMMUTABLE = [{"message": "Value is immutable", "rule": "self == oldSelf"}]


def _schema() -> dict[str, Any]:
    spec = {
        "type": "object",
        "required": ["podSets", "provisioningClassName"],
        "properties": {
            "parameters": {
                "type": "object",
                "additionalProperties": {"type": "string", "maxLength": 255},
                "maxProperties": 100,
                "x-kubernetes-validations": _IMMUTABLE,
            },
            "podSets": {
                "type": "array",
                "minItems": 1,
                "maxItems": 32,
                "x-kubernetes-validations": _IMMUTABLE,
                "items": {
                    "type": "object",
                    "required": ["count", "podTemplateRef"],
                    "properties": {
                        "count": {"type": "integer", "format": "int32", "minimum": 1},
                        "podTemplateRef": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string", "maxLength": 253,
                                         "pattern": _DNS_SUBDOMAIN},
                            },
                        },
                    },
                },
            },
            "provisioningClassName": {
                "type": "string",
                "maxLength": 253,
                "pattern": _DNS_SUBDOMAIN,
                "x-kubernetes-validations": _IMMUTABLE,
            },
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
            "provisioningClassDetails": {
                "type": "object",
                "additionalProperties": {"type": "string", "maxLength": 32768},
                "maxProperties": 64,
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
    """The CRD as controller-gen makes it from the v1 and v1beta1 types (without the
    descriptions): v1 served and stored, v1beta1 served and deprecated, both with the
    status subresource."""
    age = [{"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"}]
    v1 = {
        "name": "v1",
        "served": True,
        "storage": True,
        "additionalPrinterColumns": age,
        "schema": {"openAPIV3Schema": _schema()},
        "subresources": {"status": {}},
    }
    v1beta1 = {
        **v1,
        "name": "v1beta1",
        "storage": False,
        "deprecated": True,
        "deprecationWarning": "autoscaling.k8s.io/v1beta1 API is deprecated",
        "schema": {"openAPIV3Schema": _schema()},
    }
    return crd_document("ProvisioningRequest", ["provreq", "provreqs"], "Namespaced", [v1, v1beta1])


def upstream_crd() -> tuple[dict[str, Any], str] | None:
    """Upstream's CRD file and where it came from, or None when neither the module proxy nor
    the cache has it."""
    return upstream_crd_file(CRD_FILE)


def provisioning_request_crd() -> tuple[dict[str, Any], str]:
    """The CRD to install, and where it came from."""
    return crd_to_install(CRD_FILE, crd_from_types)
