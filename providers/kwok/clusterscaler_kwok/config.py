"""The `kwok-provider-config` ConfigMap, read as upstream Cluster Autoscaler reads it.

Key `config` holds YAML (or JSON)::

    apiVersion: v1alpha1
    readNodesFrom: configmap          # or cluster
    nodegroups:
      fromNodeLabelKey: kwok-nodegroup   # or fromNodeAnnotationKey (exactly one of the two)
    nodes:
      skipTaint: false
      gpuConfig: {gpuLabelKey: ..., availableGPUTypes: {nvidia-tesla-k80: {}}}
    configmap:
      name: kwok-provider-templates   # the templates ConfigMap (key `templates`)

As upstream, unknown fields are ignored (`configmap.key` and the `kwok:` block included: the
templates key is always `templates` and kwok is never installed by the provider). Unlike
upstream, every error names the ConfigMap, the field and the expected form.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from clusterscaler.api import ConfigurationError, describe_value, load_yaml

MODE_ENV = "KWOK_PROVIDER_MODE"
CONFIGMAP_ENV = "KWOK_PROVIDER_CONFIGMAP"
NAMESPACE_ENV = "POD_NAMESPACE"
DEFAULT_CONFIGMAP = "kwok-provider-config"
CONFIG_KEY = "config"
TEMPLATES_KEY = "templates"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

ReadNodesFrom = Literal["configmap", "cluster"]
GroupBy = Literal["label", "annotation"]


@dataclass(frozen=True, slots=True)
class GpuConfig:
    """`nodes.gpuConfig`: the node label that names a GPU type, and the types offered."""

    label_key: str
    available_types: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class KwokConfig:
    """The parsed `config` key of the `kwok-provider-config` ConfigMap."""

    read_nodes_from: ReadNodesFrom
    group_by: GroupBy
    group_key: str
    skip_taint: bool = False
    gpu: GpuConfig | None = None
    templates_configmap: str = ""

    def group_value(self, labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
        """The grouping label's or annotation's value on a node ("" when absent)."""
        source = labels if self.group_by == "label" else annotations
        return source.get(self.group_key, "")


def configmap_name() -> str:
    """`KWOK_PROVIDER_CONFIGMAP`, else `kwok-provider-config` (blank counts as unset)."""
    return os.environ.get(CONFIGMAP_ENV, "").strip() or DEFAULT_CONFIGMAP


def provider_namespace(fallback: str) -> str:
    """Where both ConfigMaps live: `POD_NAMESPACE`, else the service account's namespace
    (as upstream), else `fallback` (the `--namespace` flag) outside a pod."""
    explicit = os.environ.get(NAMESPACE_ENV, "")
    if explicit.strip():
        return explicit
    try:
        from_pod = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        from_pod = ""
    return from_pod or fallback


def local_mode() -> bool:
    """`KWOK_PROVIDER_MODE=local`: the provider's client comes from `KUBECONFIG`."""
    return os.environ.get(MODE_ENV, "") == "local"


def _fail(where: str, field: str, message: str) -> ConfigurationError:
    return ConfigurationError(f"kwok provider: {where}: {field}: {message}")


def _mapping(value: Any, where: str, field: str, *, required: bool) -> Mapping[str, Any] | None:
    if value is None:
        if required:
            raise _fail(where, field, "required, expected a mapping")
        return None
    if not isinstance(value, Mapping):
        raise _fail(where, field, f"expected a mapping, got {type(value).__name__}")
    return value


def _string(value: Any, where: str, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _fail(where, field, f"expected a string, got {describe_value(value)}")
    return value


def parse_config(text: str, where: str) -> KwokConfig:
    """Parse the `config` key; `where` names it in errors (`ConfigMap ns/name, key config`)."""
    try:
        doc = load_yaml(text) if text.strip() else None
    # PyYAML raises ValueError for an integer beyond 4,300 digits and RecursionError
    # for deep nesting: both are malformed input like any YAML error.
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise _fail(where, "(document)", f"not valid YAML or JSON: {exc}") from None
    root = _mapping(doc, where, "(document)", required=True)
    assert root is not None
    read_from = root.get("readNodesFrom")
    if read_from not in ("configmap", "cluster"):
        raise _fail(where, "readNodesFrom",
                    f"expected configmap or cluster, got {describe_value(read_from)}")
    templates_configmap = ""
    if read_from == "configmap":
        configmap = _mapping(root.get("configmap"), where, "configmap", required=True)
        assert configmap is not None
        templates_configmap = _string(configmap.get("name"), where, "configmap.name").strip()
        if not templates_configmap:
            raise _fail(where, "configmap.name",
                        "required with readNodesFrom: configmap, the templates ConfigMap's name")
    groups = _mapping(root.get("nodegroups"), where, "nodegroups", required=True)
    assert groups is not None
    label_key = _string(groups.get("fromNodeLabelKey"), where, "nodegroups.fromNodeLabelKey")
    annotation_key = _string(
        groups.get("fromNodeAnnotationKey"), where, "nodegroups.fromNodeAnnotationKey"
    )
    if bool(label_key.strip()) == bool(annotation_key.strip()):
        raise _fail(
            where, "nodegroups",
            "expected exactly one of fromNodeLabelKey and fromNodeAnnotationKey, "
            + ("got both" if label_key.strip() else "got neither"),
        )
    group_by: GroupBy = "label" if label_key.strip() else "annotation"
    nodes = _mapping(root.get("nodes"), where, "nodes", required=False) or {}
    skip_taint = nodes.get("skipTaint", False)
    if not isinstance(skip_taint, bool):
        raise _fail(where, "nodes.skipTaint",
                    f"expected true or false, got {describe_value(skip_taint)}")
    gpu = None
    gpu_doc = _mapping(nodes.get("gpuConfig"), where, "nodes.gpuConfig", required=False)
    if gpu_doc is not None:
        gpu_label = _string(gpu_doc.get("gpuLabelKey"), where, "nodes.gpuConfig.gpuLabelKey")
        types = _mapping(gpu_doc.get("availableGPUTypes"), where,
                         "nodes.gpuConfig.availableGPUTypes", required=False)
        if not gpu_label or types is None:
            raise _fail(where, "nodes.gpuConfig",
                        "expected both gpuLabelKey and availableGPUTypes (a map of type: {})")
        gpu = GpuConfig(gpu_label, tuple(sorted(str(t) for t in types)))
    return KwokConfig(
        read_nodes_from=read_from,
        group_by=group_by,
        group_key=label_key if group_by == "label" else annotation_key,
        skip_taint=skip_taint,
        gpu=gpu,
        templates_configmap=templates_configmap,
    )
