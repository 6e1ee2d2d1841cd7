"""Slim, typed, immutable views of the Kubernetes objects the autoscaler reasons about.

Objects are parsed once from raw JSON (as the API server and `kubectl get -o json` return
them) into the classes below. Only what scheduling simulation, scale-up and scale-down need
is kept. Resources are integer vectors (milli-CPU, bytes, counts) so arithmetic is exact and
cheap.

Mappings held by these objects (`labels`, `annotations`, ...) are plain dicts for speed;
treat them as read-only. Copy with `dataclasses.replace` (or the `with_` helpers).

Parse errors are `ModelError`s naming the object (`Pod default/web-1`), the field
(`spec.containers[0].resources.requests.cpu`) and the expected form.

Large inputs (snapshots, the API server's list pages) can also be parsed straight from
their JSON text (`ClusterObjects.from_json_list`, `parse_pod_json`): the same objects and
errors, with each pod spec text parsed once however many pods share it.
"""

from __future__ import annotations

from clusterscaler.model.common import (
    DAEMONSET_POD_ANNOTATION,
    DEFAULT_SCHEDULER,
    HOSTNAME_LABEL,
    LEGACY_REGION_LABEL,
    LEGACY_ZONE_LABEL,
    MIRROR_POD_ANNOTATION,
    NAMESPACE_NAME_LABEL,
    REGION_LABEL,
    ZONE_LABEL,
    ModelError,
    decode_json,
    is_label_value,
    is_qualified_name,
)
from clusterscaler.model.json_route import decode_list_page, parse_pod_json
from clusterscaler.model.node import Node, NodeInfo, parse_node
from clusterscaler.model.objects import (
    BUILTIN_API_GROUPS,
    SUPPORTED_KINDS,
    UNREAD_KINDS,
    ClusterObjects,
    ConfigMap,
    ModelObject,
    Namespace,
    UnreadableObject,
    gc_paused,
    is_unread_kind,
    parse_config_map,
    parse_namespace,
    parse_object,
)
from clusterscaler.model.pod import Pod, field_replacer, parse_pod
from clusterscaler.model.resources import POD_SLOT, ZERO, Resources
from clusterscaler.model.scheduling import (
    Affinity,
    HostPort,
    LabelSelector,
    LabelSelectorRequirement,
    NodeAffinity,
    NodeCondition,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    PodAffinity,
    PodAffinityTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    Volume,
    node_selector_matches,
    parse_label_selector,
    parse_node_selector_terms,
)
from clusterscaler.model.storage import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    parse_csinode,
    parse_pv,
    parse_pvc,
    parse_storage_class,
)
from clusterscaler.model.workloads import (
    CONTROLLER_KINDS,
    Controller,
    DaemonSet,
    PodDisruptionBudget,
    parse_controller,
    parse_daemonset,
    parse_pdb,
)

__all__ = [
    "BUILTIN_API_GROUPS",
    "CONTROLLER_KINDS",
    "DAEMONSET_POD_ANNOTATION",
    "DEFAULT_SCHEDULER",
    "HOSTNAME_LABEL",
    "LEGACY_REGION_LABEL",
    "LEGACY_ZONE_LABEL",
    "MIRROR_POD_ANNOTATION",
    "NAMESPACE_NAME_LABEL",
    "POD_SLOT",
    "REGION_LABEL",
    "SUPPORTED_KINDS",
    "UNREAD_KINDS",
    "ZERO",
    "ZONE_LABEL",
    "Affinity",
    "CSINode",
    "ClusterObjects",
    "ConfigMap",
    "Controller",
    "DaemonSet",
    "HostPort",
    "LabelSelector",
    "LabelSelectorRequirement",
    "ModelError",
    "ModelObject",
    "Namespace",
    "Node",
    "NodeAffinity",
    "NodeCondition",
    "NodeInfo",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "OwnerRef",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodDisruptionBudget",
    "Resources",
    "StorageClass",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "UnreadableObject",
    "Volume",
    "decode_json",
    "decode_list_page",
    "field_replacer",
    "gc_paused",
    "is_label_value",
    "is_qualified_name",
    "is_unread_kind",
    "node_selector_matches",
    "parse_config_map",
    "parse_controller",
    "parse_csinode",
    "parse_daemonset",
    "parse_label_selector",
    "parse_namespace",
    "parse_node",
    "parse_node_selector_terms",
    "parse_object",
    "parse_pdb",
    "parse_pod",
    "parse_pod_json",
    "parse_pv",
    "parse_pvc",
    "parse_storage_class",
]
