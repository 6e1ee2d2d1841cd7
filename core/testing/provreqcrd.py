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

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml
from clusterscaler.testing import controlplane, upstreamca

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


def _condition_schema() -> dict[str, Any]:
    """metav1.Condition, as controller-gen writes it."""
    return {
        "type": "object",
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "message": {"type": "string", "maxLength": 32768},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "reason": {
                "type": "string",
                "maxLength": 1024,
                "minLength": 1,
                "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            },
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "type": {
                "type": "string",
                "maxLength": 316,
                "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            },
        },
    }


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
                "items": _condition_schema(),
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
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": "autoscaling.x-k8s.io",
            "names": {
                "kind": "ProvisioningRequest",
                "listKind": "ProvisioningRequestList",
                "plural": "provisioningrequests",
                "shortNames": ["provreq", "provreqs"],
                "singular": "provisioningrequest",
            },
            "scope": "Namespaced",
            "versions": [v1, v1beta1],
        },
    }


def module_file(name: str) -> Path | None:
    """File `name` of the `apis` module through the Go module proxy, or None when refused."""
    try:
        go = controlplane._go()
    except controlplane.ControlPlaneError:
        return None
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run(
            [go, "mod", "download", "-json", f"{upstreamca.APIS_MODULE}@{upstreamca.COMMIT}"],
            cwd=cwd, env=controlplane._go_env(), capture_output=True, text=True, check=False,
            timeout=120,
        )
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        return None
    if proc.returncode != 0 or info.get("Error") or not info.get("Dir"):
        return None
    path = Path(info["Dir"]) / name
    return path if path.is_file() else None


def upstream_crd() -> tuple[dict[str, Any], str] | None:
    """Upstream's CRD file and where it came from, or None when neither the module proxy nor
    the cache has it."""
    unpacked = upstreamca.build_dir() / "src" / upstreamca.SUBDIR / "apis" / CRD_FILE
    for path, origin in ((module_file(CRD_FILE), "module proxy"),
                         (unpacked, "upstream CA's source")):
        if path is not None and path.is_file():
            return yaml.safe_load(path.read_text()), f"{origin}: {path}"
    return None


def provisioning_request_crd() -> tuple[dict[str, Any], str]:
    """The CRD to install, and where it came from."""
    found = upstream_crd()
    if found is not None:
        return found
    return crd_from_types(), "written from the API's types"
