"""Template nodes and the node groups made of them, as upstream's kwok provider makes them.

Templates come from the templates ConfigMap (key `templates`: a `kind: List` of Nodes, or
two or more `---`-separated Node documents, as `kubectl get nodes -o yaml` prints them) or,
with `readNodesFrom: cluster`, from the cluster's nodes at start. A template belongs to the
group named by its `cluster-autoscaler.kwok.nodegroup/name` annotation, else by the grouping
label or annotation of the config; a template without either is no group (as upstream). The
first template of a name is the group's; min and max come from its annotations.

Upstream stops the autoscaler on any bad template; here a bad template is a problem of its
group alone (`ProviderProblem`), and the other groups scale.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from clusterscaler.api import (
    ConfigurationError,
    ProviderProblem,
    describe_value,
    load_yaml_documents,
)

from clusterscaler_kwok.config import KwokConfig

GROUP_NAME_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/name"
MIN_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/min-count"
MAX_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/max-count"
DESIRED_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/desired-count"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"
METRICS_PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"
PROVIDER_TAINT = {"key": "kwok-provider", "value": "true", "effect": "NoSchedule"}
PROVIDER_ID_PREFIX = "kwok:"
DEFAULT_MIN = 0
DEFAULT_MAX = 200

Raw = dict[str, Any]


@dataclass(frozen=True, slots=True)
class GroupTemplate:
    """One node group: its name, bounds and the Node its new nodes are copied from."""

    name: str
    min_size: int
    max_size: int
    node: Raw


def parse_templates(text: str, where: str) -> list[Raw]:
    """The Node documents of the templates ConfigMap's `templates` key."""
    try:
        docs: Sequence[object] = [d for d in load_yaml_documents(text) if d is not None]
    # PyYAML raises ValueError for an integer beyond 4,300 digits and RecursionError
    # for deep nesting: both are malformed input like any YAML error.
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise ConfigurationError(f"kwok provider: {where}: not valid YAML or JSON: {exc}") from None
    if len(docs) == 1:
        doc = docs[0]
        if not (isinstance(doc, Mapping) and doc.get("kind") == "List"
                and doc.get("apiVersion") == "v1"):
            raise ConfigurationError(
                f"kwok provider: {where}: expected a `kind: List` of Nodes (as "
                "`kubectl get nodes -o yaml` prints) or several `---`-separated Node documents"
            )
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise ConfigurationError(f"kwok provider: {where}: items: expected a list of Nodes")
        docs = items
    # Other kinds are dropped, as upstream does.
    return [dict(d) for d in docs if isinstance(d, Mapping) and d.get("kind") == "Node"]


def _metadata(node: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = node.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _meta(node: Mapping[str, Any], field: str) -> dict[str, str]:
    value = _metadata(node).get(field) or {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def node_name(node: Mapping[str, Any]) -> str:
    return str(_metadata(node).get("name") or "")[:253]


def group_name_of(
    labels: Mapping[str, str], annotations: Mapping[str, str], config: KwokConfig
) -> str:
    """The group named by a node's annotation `cluster-autoscaler.kwok.nodegroup/name`, else
    by its grouping label or annotation; "" for none (upstream's getNGName)."""
    return annotations.get(GROUP_NAME_ANNOTATION, "") or config.group_value(labels, annotations)


def group_name(node: Mapping[str, Any], config: KwokConfig) -> str:
    """`group_name_of` a raw node (template or created)."""
    return group_name_of(_meta(node, "labels"), _meta(node, "annotations"), config)


def _count(annotations: Mapping[str, str], key: str, default: int, node: str) -> int:
    raw = annotations.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"template node {node}: annotation {key}: expected a non-negative "
                         f"integer, got {describe_value(raw)}")
    return value


def _object(value: Any, node: Mapping[str, Any], field: str) -> dict[str, Any]:
    """A template's field that must be an object (absent: empty); `ValueError` naming the
    template and the field otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"template node {node_name(node)}: {field}: expected an object, "
                         f"got {type(value).__name__}")
    return dict(value)


def prepare_template(node: Mapping[str, Any], group: str, config: KwokConfig) -> Raw:
    """The template as upstream keeps it: server fields dropped, named `kwok-fake-<name>`,
    annotated as a kwok node of `group`, the kwok-provider taint added unless skipped.
    Raises `ValueError` naming the template and the field where a field that must be an
    object or a list is not."""
    raw = copy.deepcopy(dict(node))
    raw["apiVersion"], raw["kind"] = "v1", "Node"
    meta = _object(raw.get("metadata"), node, "metadata")
    for field in ("resourceVersion", "uid", "creationTimestamp", "generation",
                  "managedFields", "deletionTimestamp", "ownerReferences", "finalizers"):
        meta.pop(field, None)
    name = f"kwok-fake-{meta.get('name', group)}"
    meta["name"] = name
    # YAML reads `max-count: 5` as a number; the API server takes only strings.
    meta["labels"] = _meta(raw, "labels")
    annotations = _meta(raw, "annotations")
    annotations[KWOK_NODE_ANNOTATION] = KWOK_NODE_VALUE
    annotations[GROUP_NAME_ANNOTATION] = group
    meta["annotations"] = annotations
    raw["metadata"] = meta
    spec = _object(raw.get("spec"), node, "spec")
    spec["providerID"] = PROVIDER_ID_PREFIX + name
    spec.pop("unschedulable", None)
    given_taints = spec.get("taints") or []
    if not isinstance(given_taints, list):
        raise ValueError(f"template node {node_name(node)}: spec.taints: expected a list, "
                         f"got {type(given_taints).__name__}")
    taints = [t for t in given_taints if isinstance(t, Mapping)]
    if not config.skip_taint and not any(
        t.get("key") == PROVIDER_TAINT["key"] and t.get("effect") == PROVIDER_TAINT["effect"]
        for t in taints
    ):
        taints.append(dict(PROVIDER_TAINT))
    spec["taints"] = taints
    raw["spec"] = spec
    status = _object(raw.get("status"), node, "status")
    node_info = _object(status.get("nodeInfo"), node, "status.nodeInfo")
    node_info["kubeletVersion"] = "fake"
    status["nodeInfo"] = node_info
    raw["status"] = status
    return raw


def build_groups(
    nodes: Sequence[Mapping[str, Any]], config: KwokConfig
) -> tuple[list[GroupTemplate], list[ProviderProblem]]:
    """The node groups of these template nodes, and a problem per group that cannot be one."""
    groups: dict[str, GroupTemplate] = {}
    problems: dict[str, ProviderProblem] = {}
    for node in nodes:
        name = group_name(node, config)
        if not name or name in groups or name in problems:
            continue
        annotations = _meta(node, "annotations")
        try:
            min_size = _count(annotations, MIN_ANNOTATION, DEFAULT_MIN, node_name(node))
            max_size = _count(annotations, MAX_ANNOTATION, DEFAULT_MAX, node_name(node))
            if max_size < min_size:
                raise ValueError(f"template node {node_name(node)}: annotation {MAX_ANNOTATION}: "
                                 f"expected at least the min-count {min_size}, got {max_size}")
            if DESIRED_ANNOTATION in annotations:
                desired = _count(annotations, DESIRED_ANNOTATION, 0, node_name(node))
                if not min_size <= desired <= max_size:
                    raise ValueError(
                        f"template node {node_name(node)}: annotation {DESIRED_ANNOTATION}: "
                        f"expected between min-count {min_size} and max-count {max_size}, "
                        f"got {desired}"
                    )
            template = prepare_template(node, name, config)
        except ValueError as exc:
            problems[name] = ProviderProblem(name, "InvalidTemplate", f"kwok provider: {exc}")
            continue
        groups[name] = GroupTemplate(name, min_size, max_size, template)
    return sorted(groups.values(), key=lambda g: g.name), sorted(
        problems.values(), key=lambda p: p.node_group
    )
