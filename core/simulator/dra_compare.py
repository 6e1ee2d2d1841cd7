"""How the DRA devices a node publishes differ from those its node group's template
predicted, as Cluster Autoscaler's resource pool comparator reports it for the metric
`dra_node_template_resources_mismatch{driver,mismatch_type}`.

Devices are grouped by driver, pool and the set of their attribute names (values are not
compared, and pool names are not: a template's pools are renamed for each node). A
template group and a node group with the same driver, attribute names and device count are
the same resource. Of the rest, each template group is paired with the node group of its
driver sharing the most attribute names (then the closest in device count): a `mismatch`;
template groups left unpaired are `missing` on the node, node groups left unpaired are
`extra`. A driver with a pool on the node whose newest generation is incomplete, or that
mixes generations, is being updated and not compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from clusterscaler.model.dra import ResourceSlice

MISMATCH_TYPES = ("missing", "extra", "mismatch", "unknown")


@dataclass(slots=True)
class _Group:
    driver: str
    pool: str
    names: frozenset[str]
    devices: int


@dataclass(frozen=True, slots=True)
class ResourceDelta:
    """One difference: a template group (`template_pool`) and/or a node group
    (`node_pool`) of `driver`, and how many more devices the template has."""

    driver: str
    template_pool: str
    node_pool: str
    device_delta: int
    template_attributes: frozenset[str] = frozenset()
    node_attributes: frozenset[str] = frozenset()

    @property
    def kind(self) -> str:
        if self.template_pool and self.node_pool:
            return "mismatch"
        if self.template_pool:
            return "missing"
        if self.node_pool:
            return "extra"
        return "unknown"

    def summary(self) -> str:
        if self.kind == "missing":
            return f"{self.driver}: {self.device_delta} device(s) of pool {self.template_pool} missing"
        if self.kind == "extra":
            return f"{self.driver}: {-self.device_delta} extra device(s) in pool {self.node_pool}"
        return (
            f"{self.driver}: pool {self.node_pool} differs from the template's "
            f"{self.template_pool} by {self.device_delta:+d} device(s)"
            + (
                ""
                if self.template_attributes == self.node_attributes
                else f" and attributes {sorted(self.template_attributes ^ self.node_attributes)}"
            )
        )


def _drivers_in_flux(slices: Iterable[ResourceSlice]) -> set[str]:
    seen: dict[tuple[str, str], tuple[int, int, int]] = {}  # generation, count, expected
    flux: set[str] = set()
    for s in slices:
        key = (s.driver, s.pool.name)
        state = seen.get(key)
        if state is None:
            seen[key] = (s.pool.generation, 1, s.pool.slice_count)
            continue
        if state[0] != s.pool.generation:
            flux.add(s.driver)
        seen[key] = (state[0], state[1] + 1, state[2])
    for (driver, _), (_, count, expected) in seen.items():
        if count != expected:
            flux.add(driver)
    return flux


def _groups(slices: Iterable[ResourceSlice], drivers: set[str]) -> list[_Group]:
    out: list[_Group] = []
    index: dict[tuple[str, str, frozenset[str]], _Group] = {}
    for s in slices:
        if s.driver not in drivers:
            continue
        for d in s.devices:
            key = (s.driver, s.pool.name, frozenset(d.attributes))
            group = index.get(key)
            if group is None:
                group = index[key] = _Group(s.driver, s.pool.name, key[2], 0)
                out.append(group)
            group.devices += 1
    return out


def compare_resource_pools(
    template: Sequence[ResourceSlice], node: Sequence[ResourceSlice]
) -> list[ResourceDelta]:
    """The differences between a template's slices and a node's (empty: they agree)."""
    flux = _drivers_in_flux(node)
    drivers = {s.driver for s in (*template, *node)} - flux
    wanted = _groups(template, drivers)
    found = _groups(node, drivers)
    # Exactly alike: nothing to report.
    for t in list(reversed(wanted)):
        for i, n in enumerate(found):
            if n.driver == t.driver and n.names == t.names and n.devices == t.devices:
                wanted.remove(t)
                del found[i]
                break
    deltas: list[ResourceDelta] = []
    for t in list(reversed(wanted)):
        best, best_overlap, best_delta = -1, -1, 0
        for i, n in enumerate(found):
            if n.driver != t.driver:
                continue
            overlap = len(t.names & n.names)
            delta = t.devices - n.devices
            if overlap < best_overlap:
                continue
            if overlap > best_overlap or abs(delta) < abs(best_delta):
                best, best_overlap, best_delta = i, overlap, delta
        if best < 0:
            continue
        n = found.pop(best)
        wanted.remove(t)
        deltas.append(
            ResourceDelta(t.driver, t.pool, n.pool, t.devices - n.devices, t.names, n.names)
        )
    deltas.extend(ResourceDelta(t.driver, t.pool, "", t.devices, t.names) for t in wanted)
    deltas.extend(
        ResourceDelta(n.driver, "", n.pool, -n.devices, node_attributes=n.names) for n in found
    )
    return deltas


def count_by_driver(deltas: Iterable[ResourceDelta]) -> dict[str, dict[str, int]]:
    """Per driver, how many differences of each kind (every kind listed)."""
    out: dict[str, dict[str, int]] = {}
    for delta in deltas:
        counts = out.setdefault(delta.driver, dict.fromkeys(MISMATCH_TYPES, 0))
        counts[delta.kind] += 1
    return out


def merge_counts(
    into: dict[str, dict[str, int]], more: Mapping[str, Mapping[str, int]]
) -> None:
    for driver, counts in more.items():
        target = into.setdefault(driver, dict.fromkeys(MISMATCH_TYPES, 0))
        for kind, n in counts.items():
            target[kind] += n
