"""A new node's DRA devices before it counts as ready, as Cluster Autoscaler's
DraCustomResourcesProcessor decides.

A Node turns Ready before its DRA drivers have published its ResourceSlices. Counted ready
then, it would look like a node of its group without devices: pending pods that claim them
would not fit it and a second scale-up would follow. So a Ready node of a node group whose
template predicts DRA devices is held unready (a starting, upcoming node) until, for each
driver, it has published at least as many complete resource pools (every slice of the
newest generation) as the template has. Extra pools, or devices that differ, do not hold it
(`dra_node_template_resources_mismatch` reports those).

The template is the one the previous loop planned the group from, else the provider's
(scale from zero). A node whose group or template cannot be told is left as it is, as
upstream leaves it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping

import structlog
from clusterscaler.interfaces.cloudprovider import CloudProvider, CloudProviderError
from clusterscaler.model import ClusterObjects, NodeInfo, ResourceSlice

log = structlog.get_logger()


def complete_pools(slices: Iterable[ResourceSlice]) -> dict[str, int]:
    """Per driver, how many of its pools have every slice of their newest generation."""
    newest: dict[tuple[str, str], tuple[int, int, int]] = {}  # generation, seen, expected
    for s in slices:
        key = (s.driver, s.pool.name)
        known = newest.get(key)
        if known is None or s.pool.generation > known[0]:
            newest[key] = (s.pool.generation, 1, s.pool.slice_count)
        elif s.pool.generation == known[0]:
            newest[key] = (known[0], known[1] + 1, known[2])
    out: dict[str, int] = {}
    for (driver, _), (_, seen, expected) in newest.items():
        if seen == expected:
            out[driver] = out.get(driver, 0) + 1
    return out


def mark_unready_dra(
    objects: ClusterObjects,
    provider: CloudProvider,
    previous: Callable[[str], NodeInfo | None],
) -> ClusterObjects:
    """`objects` where each Ready node that has not yet published the DRA pools its group's
    template predicts is not Ready. `previous` gives the template the last loop built for
    a group (None: none)."""
    ready = [n for n in objects.nodes if n.ready]
    if not ready:
        return objects
    by_node: dict[str, list[ResourceSlice]] = {}
    for s in objects.resource_slices:
        if s.node_name:
            by_node.setdefault(s.node_name, []).append(s)
    predicted: dict[str, Mapping[str, int]] = {}
    unready: dict[str, str] = {}
    for node in ready:
        try:
            group = provider.node_group_for_node(node)
        except CloudProviderError:
            continue
        if group is None:
            continue
        wanted = predicted.get(group.id)
        if wanted is None:
            template = previous(group.id)
            if template is None:
                try:
                    template = group.template_node_info()
                except (CloudProviderError, ValueError, NotImplementedError):
                    template = None
            wanted = complete_pools(template.resource_slices) if template is not None else {}
            predicted[group.id] = wanted
        if not wanted:
            continue
        found = complete_pools(by_node.get(node.name, ()))
        short = sorted(d for d, count in wanted.items() if found.get(d, 0) < count)
        if short:
            unready[node.name] = short[0]
    if not unready:
        return objects
    first = min(unready)
    log.info("dra_resources_not_published", nodes=len(unready), first=first,
             driver=unready[first])
    return dataclasses.replace(
        objects,
        nodes=[n.with_(ready=False) if n.name in unready else n for n in objects.nodes],
    )
