"""Where the CRDs of upstream CA's `apis` module come from, for tests on the real control plane.

Upstream's own file when it can be had, at the CA release the bench builds
(``upstreamca.COMMIT``): first the ``apis`` module from the Go module proxy; the proxy this
project uses refuses that module at every version (as ``upstreamca`` records), so next the
source of that release the bench unpacked into the cache, when it did. Otherwise each CRD
module (`provreqcrd`, `capacitybuffercrd`, `capacityquotacrd`) writes its CRD from the API's
types, with the schema pieces controller-gen writes for the shared Kubernetes types here.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from clusterscaler.testing import controlplane, upstreamca

__all__ = [
    "QUANTITY_SCHEMA",
    "condition_schema",
    "crd_document",
    "crd_to_install",
    "module_file",
    "upstream_crd_file",
]

# A `resource.Quantity`, as controller-gen writes it.
QUANTITY_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]"
    r"|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
    "x-kubernetes-int-or-string": True,
}


def condition_schema() -> dict[str, Any]:
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


def upstream_crd_file(crd_file: str) -> tuple[dict[str, Any], str] | None:
    """Upstream's CRD file `crd_file` (its path in the `apis` module) and where it came from,
    or None when neither the module proxy nor the cache has it."""
    unpacked = upstreamca.build_dir() / "src" / upstreamca.SUBDIR / "apis" / crd_file
    for path, origin in ((module_file(crd_file), "module proxy"),
                         (unpacked, "upstream CA's source")):
        if path is not None and path.is_file():
            return yaml.safe_load(path.read_text()), f"{origin}: {path}"
    return None


def crd_to_install(
    crd_file: str, from_types: Callable[[], dict[str, Any]]
) -> tuple[dict[str, Any], str]:
    """The CRD to install (upstream's `crd_file` when at hand, else `from_types()`), and where
    it came from."""
    found = upstream_crd_file(crd_file)
    if found is not None:
        return found
    return from_types(), "written from the API's types"


def crd_document(
    kind: str, short_names: list[str], scope: str, versions: list[dict[str, Any]]
) -> dict[str, Any]:
    """A CustomResourceDefinition of `kind` in group autoscaling.x-k8s.io, named as
    controller-gen names it (plural and singular: the kind in lower case, plural with "s")."""
    singular = kind.lower()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{singular}s.autoscaling.x-k8s.io"},
        "spec": {
            "group": "autoscaling.x-k8s.io",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": f"{singular}s",
                "shortNames": short_names,
                "singular": singular,
            },
            "scope": scope,
            "versions": versions,
        },
    }
