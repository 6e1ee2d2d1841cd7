"""The DRA devices of a kwok node group's new nodes, for scale from zero.

Besides its template Nodes, the templates ConfigMap may hold ResourceSlices
(`resource.k8s.io/v1`, `v1beta2` or `v1beta1`, as `kubectl get nodes,resourceslices -o yaml`
prints them) whose `spec.nodeName` names a template Node: the slices a DRA driver publishes
for each node made from that template. They are the group template's `resource_slices`, so
that a pod claiming a device grows the group before any of its nodes exists; once a node
exists, the loop copies that node's own slices instead. Other kinds stay ignored, as
upstream ignores them.

A slice that cannot be read, or that is not node-local, is a problem of its template's group
(reported, the group still scales, without that slice); a slice naming no template Node is
logged and left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog
import yaml
from clusterscaler.api import (
    ModelError,
    ProviderProblem,
    ResourceSlice,
    load_yaml_documents,
    parse_template_slice,
)

from clusterscaler_kwok.config import KwokConfig
from clusterscaler_kwok.templates import group_name, node_name

log = structlog.get_logger()

SLICE_KIND = "ResourceSlice"


def _documents(text: str) -> list[Mapping[str, Any]]:
    """The documents of the templates text, a `kind: List`'s items included (the text was
    already read as templates: a text that is not YAML gives none here)."""
    try:
        docs: list[object] = [d for d in load_yaml_documents(text) if d is not None]
    except (yaml.YAMLError, ValueError, RecursionError):
        return []
    out: list[Mapping[str, Any]] = []
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "List":
            items = doc.get("items")
            if isinstance(items, list):
                out.extend(i for i in items if isinstance(i, Mapping))
        elif isinstance(doc, Mapping):
            out.append(doc)
    return out


def template_slices(
    text: str, nodes: Sequence[Mapping[str, Any]], config: KwokConfig
) -> tuple[dict[str, tuple[ResourceSlice, ...]], list[ProviderProblem]]:
    """Per node group, the ResourceSlices the templates text declares for its template
    Node; and a problem for each slice of a group that cannot be used."""
    groups = {node_name(n): group_name(n, config) for n in nodes}
    slices: dict[str, list[ResourceSlice]] = {}
    problems: list[ProviderProblem] = []
    for doc in _documents(text):
        if doc.get("kind") != SLICE_KIND:
            continue
        meta = doc.get("metadata")
        name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
        spec = doc.get("spec")
        target = spec.get("nodeName") if isinstance(spec, Mapping) else None
        group = groups.get(target) if isinstance(target, str) else None
        if not group:
            log.warning(
                "kwok_template_slice_ignored",
                resource_slice=name,
                node=target if isinstance(target, str) else None,
                reason="spec.nodeName names no template Node of a node group",
            )
            continue
        try:
            slices.setdefault(group, []).append(parse_template_slice(doc))
        except ModelError as exc:
            problems.append(
                ProviderProblem(group, "InvalidTemplate", f"kwok provider: template {exc}")
            )
    return {g: tuple(s) for g, s in slices.items()}, problems
