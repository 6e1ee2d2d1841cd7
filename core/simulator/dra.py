"""Dynamic Resource Allocation in the simulation: the scheduler's DynamicResources filter and
its Reserve step, over the devices the cluster's ResourceSlices publish, and the device
utilization scale-down measures a node by.

`DraState` is the snapshot's view of DRA: the slices reachable from each node, the device
classes, the claims (and templates) by key, which claim each device is allocated to, the
shared counters each pool has and what its allocated devices draw from them, and which pods
in the snapshot use each claim not their own. For a pod and a node, `allocate` says which devices the
pod's claims would get there (or why none can be found), as kube-scheduler's structured
allocator (k8s.io/dynamic-resource-allocation) does:

- a claim already allocated stays where it is: the pod fits only nodes its allocation's
  node selector matches;
- the pod's unallocated claims (ResourceClaims not allocated yet, and the claims templates
  will make for it) are allocated together, device by device, with backtracking: each
  request (`firstAvailable`: its first subrequest that can be satisfied) gets `count`
  devices (`All`: every device its selectors match, each of which must then be usable)
  among the devices the node can reach (a slice's, or each device's own with
  `perDeviceNodeSelection`), from pools whose newest generation is complete;
  a device is usable when no other claim holds it (a request with admin access may use a
  device others hold, as the scheduler allows), when the request tolerates its taints of
  effect NoSchedule and NoExecute, and when its pool's shared counters still have what it
  consumes (partitionable devices); `matchAttribute` constraints need one value of the
  attribute, `distinctAttribute` constraints a different value per device, across the
  devices of the requests they name;
- a device whose selector cannot be evaluated does not match, and the reason is kept.

`reserve` records an allocation in the snapshot (through the snapshot's journal, so a
fork's revert undoes it) and `release` undoes what a pod held: a claim generated for the pod
(owned by it) is freed when the pod leaves, as the ResourceClaim controller deletes it with
the pod; a shared claim keeps its allocation, so a pod of it can only move where the claim
is allocated. An allocation with admin access takes no device and no counter.

`copies_fit` serves the estimator's fill of alike pods (`claims_alike`: each claim the
pod's own, unallocated, asking what the first pod's ask): how many copies get devices on a
node one after the other, each with what the search finds once the earlier ones hold
theirs. It keeps those allocations as a plan that the next pods placed on the node take
(`allocate` and `unfit` answer from it, `reserve_pods` records them in one pass) while
nothing else changes; on a node of a fresh template layout (its own slices, nothing held)
the copies are the ones found on the first node of that layout, by position, read from the
node's slices without building its device candidates. Such copies, each one claim given
one device, are planned and recorded as their requests and devices: their `Allocation`
objects are made only when read (`allocation`, `allocations`), which an estimate does not.

`node_pool_utilization` is Cluster Autoscaler's DRA utilization of a node: per resource pool
of its node-local devices, the share of devices allocated, or, for a pool with shared
counters, the mean over its counter sets of each set's most used counter.

Consumable capacity: a device that allows multiple allocations is shared by the claims
allocated it; each share consumes what its request asks of each capacity, rounded up by
the capacity's request policy (`consumed_capacity`), while the shares together fit the
capacity, and its counters are drawn once. Every device is checked against a request's
capacity requests. A device that binds to its node pins the allocation to that node.

Not simulated: DeviceTaintRules (Kubernetes 1.36 leaves them off by default, and Cluster
Autoscaler does not apply them either): a device is judged by the taints of its slice.

Long on purpose: the allocator's search and the state it reads and writes (which claim
holds each device, what the pools' counters have left) change together; split apart, each
half would reach into the other's internals.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import partial
from itertools import repeat
from types import MappingProxyType
from typing import TYPE_CHECKING

from clusterscaler.model.dra import (
    AllocatedDevice,
    Allocation,
    AttributeValue,
    CapacityPolicy,
    Device,
    DeviceClass,
    DeviceConstraint,
    Pool,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    qualified,
)
from clusterscaler.model.pod import field_replacer
from clusterscaler.model.scheduling import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
    node_selector_matches,
)

if TYPE_CHECKING:
    from clusterscaler.model import ClaimSpec, Node, NodeInfo, Pod

# The reasons kube-scheduler's DynamicResources plugin gives, as CA reports them.
REASON_DRA = "cannot allocate all claims"
REASON_CLAIM_ELSEWHERE = "resourceclaim not available on the node"
REASON_CLAIM_MISSING = "waiting for resource claim to be created"

DeviceId = tuple[str, str, str]  # driver, pool, device
# What an allocation holds of one device: the device, dedicated (None), or a share of a
# device that allows multiple allocations, with what the share consumes.
Consumed = tuple[tuple[str, Fraction], ...]
Held = tuple[DeviceId, Consumed | None]
PoolId = tuple[str, str]  # driver, pool
# Counter set name -> counter name -> amount.
CounterSets = dict[str, dict[str, Fraction]]
# How many devices the search for an allocation tries before giving up (the pod then does
# not fit the node, the safe answer both for scale-up and for scale-down).
SEARCH_LIMIT = 20_000
# A search for more devices than the `n` usable ones tries every ordered choice of up to
# `n` of them before it fails: for n <= 7 that stays within SEARCH_LIMIT (13,701 steps at
# 7), so such a failure is known without the search (and gives the search's reason).
_FAILS_WITHIN_LIMIT = 7
# As the API's AllocationResultsMaxSize: a claim never gets more devices.
MAX_RESULTS = 32
# The device taint effects that keep a device from being allocated unless tolerated; any
# other effect (None, or one this version does not know) is ignored, as the allocator does.
_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# What a device that draws on no shared counter consumes (one object for all of them).
_NO_COUNTERS: Mapping[str, Mapping[str, Fraction]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One claim of a pod as the simulation sees it: its key (`namespace/name`, or a key of
    its own for a claim its template has not made yet), its spec, the ResourceClaim when it
    exists, and whether it is the pod's own (made from a template for it)."""

    key: str
    spec: ClaimSpec
    claim: ResourceClaim | None
    owned: bool


@dataclass(frozen=True, slots=True)
class PoolUtilization:
    """How much of one resource pool of a node's local devices is in use."""

    driver: str
    pool: str
    devices: int
    allocated: int
    utilization: float

    @property
    def name(self) -> str:
        """`<driver>/<pool>`, as CA names the resource of a DRA node's utilization."""
        return f"{self.driver}/{self.pool}"


@dataclass(frozen=True, slots=True)
class DeviceUse:
    """One device a node can reach, and the claim holding it ("" when free)."""

    driver: str
    pool: str
    device: str
    claim: str
    taints: tuple[Taint, ...] = ()
    local: bool = True


# Copies of a fresh layout that are each one claim given one device local to the node:
# each copy's request and device, in order.
_SingleCopies = tuple[list[str], list[DeviceId]]


@dataclass(slots=True)
class _Plan:
    """The allocations `copies_fit` found for copies of one pod's claims on one node, in
    order: the pods with such claims that go there next take them, while nothing else
    changed in between (`version`)."""

    node: str
    specs: tuple[ClaimSpec, ...]
    # Each copy's allocations; None when the copies are `single` (made when read,
    # `DraState._planned_at`).
    allocations: list[tuple[Allocation, ...]] | None
    # How many copies.
    count: int
    version: int
    index: int = 0
    # The answer `allocate` gave from the plan, which `reserve` then records.
    offered: dict[str, Allocation] | None = None
    # When each copy is one claim given one dedicated device local to the node (not for
    # admin access, not a share, pinned to the node), as a fresh layout's copies are:
    # their requests and devices, in order (`_reserve_copies`).
    single: _SingleCopies | None = None


@dataclass(slots=True)
class _Copied:
    """Claims of copies recorded together (`DraState._record_copies`): claim `keys[i]` is
    allocated device `device_ids[i]` for request `requests[i]`, local to node `node` (its
    allocation pinned there). Their `Allocation` objects are made only when one is read
    (`DraState.allocation`): an estimate records copies by the thousand and reads back
    none of them."""

    node: str
    keys: list[str]
    requests: list[str]
    device_ids: list[DeviceId]


@dataclass(slots=True)
class _Run:
    """Pods `claims_alike` found alike, each with one claim made from one template for
    it: their claim keys in order, and where the next of them to be reserved is
    expected (the estimator places them in order)."""

    pods: tuple[Pod, ...]
    keys: list[str]
    spec: ClaimSpec
    next: int = 0


class PoolIncomplete(ValueError):
    """A node-local pool whose newest generation does not have all its slices yet."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    device_id: DeviceId
    device: Device
    slice: ResourceSlice
    taints: tuple[Taint, ...]
    counters: Mapping[str, Mapping[str, Fraction]]


@dataclass(slots=True)
class _Pool:
    pool_id: PoolId
    complete: bool
    devices: list[_Candidate]


@dataclass(slots=True)
class _NodePools:
    """The pools a node reaches, and what they were computed from: the node's own slice
    list, the shared slices' version, the node's labels and each pool's version. Valid
    while none of those changed, so that publishing another node's slices keeps it."""

    local: list[ResourceSlice] | None
    shared_version: int
    labels: Mapping[str, str]
    versions: tuple[tuple[PoolId, int], ...]
    pools: list[_Pool]
    # Per selectors (a request's, its class's first): the devices of complete pools they
    # select, in the pools' order.
    matching: dict[tuple[str, ...], list[_Candidate]] = field(default_factory=dict)
    # The layout of the node's devices (`DraState._fresh_layout`), once computed; None
    # when the node reaches devices of slices not its own.
    layout: tuple[object, ...] | None = None
    layout_known: bool = False


# A copy's allocations as positions: per claim, per device, the request it satisfies, the
# device's position among the node's devices (pool by pool) and whether for admin access.
_Pattern = tuple[tuple[tuple[str, int, bool], ...], ...]


@dataclass(slots=True)
class _Layout:
    """The layout of a node's devices (`DraState._layout`), with where each device is in
    the node's slices, so that a node whose slices have the same signature (a template's
    copy) is read from its slices alone."""

    # The layout (None: some devices are not the node's own, or are shared).
    key: tuple[object, ...] | None
    # The slices it was found from, kept so that the ids in their signature stay theirs.
    slices: list[ResourceSlice]
    # Each device, pool by pool: the index of its slice among the node's and its name.
    devices: list[tuple[int, str]]
    # Each pool: the index of its first slice.
    pool_slices: list[int]

    @classmethod
    def of(cls, key: tuple[object, ...] | None, local: list[ResourceSlice], entry: _NodePools) -> _Layout:
        """The layout `key` of a node whose slices are `local`, all its own, and whose
        pools are `entry`'s."""
        where = {id(s): i for i, s in enumerate(local)}
        first: dict[PoolId, int] = {}
        for i, s in enumerate(local):
            first.setdefault((s.driver, s.pool.name), i)
        devices = (
            [(where[id(c.slice)], c.device.name) for p in entry.pools for c in p.devices]
            if key is not None
            else []
        )
        return cls(key, local, devices, list(first.values()))


@dataclass(slots=True)
class _Copies:
    """What `copies_fit` found for copies of claims on a node of a fresh layout: given to
    the next nodes of that layout by position."""

    # The node's pools it was found on, kept so that the ids in the layout stay unique.
    entry: _NodePools
    # Whether the copies ran out before the limit (no more get devices there).
    exhausted: bool
    # Each copy's allocations, as positions.
    patterns: list[_Pattern]
    # When each copy is one claim given one device without admin access (the fill's
    # usual copies): the copies' requests and device positions; None otherwise.
    single: tuple[list[str], list[int]] | None
    # Whether those positions are the first ones in order (0, 1, 2, ...): the copies take
    # the node's devices as they come.
    in_order: bool = False

    @classmethod
    def of(
        cls, found: Sequence[tuple[Allocation, ...]], entry: _NodePools, limit: int
    ) -> _Copies:
        """The copies `found` on the node of `entry`, searched for up to `limit`."""
        where = {
            c.device_id: i for i, c in enumerate(c for p in entry.pools for c in p.devices)
        }
        patterns = [
            tuple(
                tuple(
                    (r.request, where[(r.driver, r.pool, r.device)], r.admin_access)
                    for r in allocation.results
                )
                for allocation in allocations
            )
            for allocations in found
        ]
        single = [
            results[0]
            for pattern in patterns
            if len(pattern) == 1 and len(results := pattern[0]) == 1 and not results[0][2]
        ]
        positions = [i for _, i, _ in single]
        return cls(
            entry,
            len(found) < limit,
            patterns,
            ([r for r, _, _ in single], positions) if len(single) == len(patterns) else None,
            positions == list(range(len(positions))),
        )

    def enough(self, limit: int) -> bool:
        """Whether they say what `limit` copies get."""
        return self.exhausted or len(self.patterns) >= limit


@dataclass
class DraState:
    """The DRA objects of a snapshot and the allocations simulated on top of them."""

    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    node_slices: dict[str, list[ResourceSlice]] = field(default_factory=dict)
    shared_slices: list[ResourceSlice] = field(default_factory=list)
    # The allocation of each claim now (from its status, then as simulated); the claims
    # of copies recorded together map to their record (`_Copied`), read with `allocation`.
    _allocations: dict[str, Allocation | _Copied] = field(default_factory=dict)
    # Which claim holds each device (allocations with admin access hold none).
    allocated: dict[DeviceId, str] = field(default_factory=dict)
    # Devices that allow multiple allocations: how many shares are allocated and what
    # they consume together, by capacity name.
    share_count: dict[DeviceId, int] = field(default_factory=dict)
    shared_use: dict[DeviceId, dict[str, Fraction]] = field(default_factory=dict)
    # The snapshot's pods that use each claim, but for the pod a claim is its own
    # (`PodClaim.owned`): its own pod uses it while it is allocated, and leaving frees it
    # unless others use it. (The pods of a workload are placed by the thousand, each
    # with a claim of its own: they are known without a set per claim.)
    consumers: dict[str, set[str]] = field(default_factory=dict)
    # The slices of each pool's newest generation, the pool's shared counters, what each
    # device consumes from them, and what the allocated devices consume.
    pool_slices: dict[PoolId, list[ResourceSlice]] = field(default_factory=dict)
    shared_counters: dict[PoolId, CounterSets] = field(default_factory=dict)
    device_counters: dict[DeviceId, Mapping[str, Mapping[str, Fraction]]] = field(
        default_factory=dict
    )
    used_counters: dict[PoolId, CounterSets] = field(default_factory=dict)
    # Whether the selectors (class's, then request's) select a device: the answer depends
    # on the expressions, the driver and the device alone (a template's copies share their
    # Device objects, so each is evaluated once). The device is kept with the answer, so
    # that its id is not reused while the entry lives.
    _selected: dict[tuple[tuple[str, ...], str, int], tuple[Device, bool]] = field(
        default_factory=dict
    )
    # Why a selector could not be evaluated for a device (same keys), for the reasons.
    _selector_failures: dict[tuple[tuple[str, ...], str, int], str] = field(
        default_factory=dict
    )
    # Bumped by every change `allocate` depends on (slices published or removed, devices
    # held or freed): the pools of a node and the last answer are reused until then.
    _version: int = 0
    _shared_version: int = 0
    _pool_versions: dict[PoolId, int] = field(default_factory=dict)
    _pools_of: dict[str, _NodePools] = field(default_factory=dict)
    _last: tuple[Pod, Node, int, dict[str, Allocation] | str] | None = None
    # The claims of each pod asked about (by id, the pod kept with them): the claims and
    # templates do not change during a simulation.
    _claims_of: dict[int, tuple[Pod, list[PodClaim] | str]] = field(default_factory=dict)
    # The requests of each claim spec as the search sees them (by id, the spec kept).
    _wants_of: dict[int, tuple[ClaimSpec, list[list[_Want]] | str]] = field(
        default_factory=dict
    )
    # The node selector of an allocation of devices local to a node, per node.
    _local_selectors: dict[str, tuple[NodeSelectorTerm, ...]] = field(default_factory=dict)
    _plan: _Plan | None = None
    # The layouts of nodes' devices (`_layout`) by their slices' signature (`_signature`).
    _layouts: dict[tuple[object, ...], _Layout] = field(default_factory=dict)
    # The last layout `_fresh_devices` found for a node of one slice: that slice, whether
    # its pool was complete, and the layout. A template's next copy has a slice of the same
    # devices, taints and counters (the same objects): its layout is known without its
    # signature.
    _single_layout: tuple[ResourceSlice, bool, _Layout] | None = None
    # The pods the last `claims_alike` found alike, when their claims are one template's.
    _run: _Run | None = None
    # Share ids given to simulated allocations of shared devices.
    _shares_made: int = 0
    # How many pods the last `_reserve_planned` reserved from the plan.
    _planned_count: int = 0
    # What `copies_fit` found on a node of a fresh layout (`_fresh_layout`), per layout and
    # claim specs (by identity).
    _copies: dict[tuple[object, ...], _Copies] = field(default_factory=dict)
    # The last of them asked for or found (`_known_copies`): layout, spec ids, copies.
    _last_copies: tuple[tuple[object, ...], tuple[int, ...], _Copies] | None = None

    @classmethod
    def build(
        cls,
        slices: Iterable[ResourceSlice],
        classes: Iterable[DeviceClass],
        claims: Iterable[ResourceClaim],
        templates: Iterable[ResourceClaimTemplate],
    ) -> DraState:
        state = cls(
            classes={c.name: c for c in classes},
            claims={c.key: c for c in claims},
            templates={t.key: t for t in templates},
        )
        for s in _current(slices):
            if s.node_name:
                state.node_slices.setdefault(s.node_name, []).append(s)
            elif s.node_selector is not None or s.all_nodes or s.per_device_node_selection:
                state.shared_slices.append(s)
                state._shared_version += 1
            state._index(s)
        for claim in state.claims.values():
            if claim.allocation is not None:
                state._allocations[claim.key] = claim.allocation
                state._hold(claim.key, claim.allocation)
        return state

    @property
    def allocations(self) -> dict[str, Allocation]:
        """The allocation of each allocated claim, by claim key (a new dict)."""
        return {key: self._materialized(key, found) for key, found in self._allocations.items()}

    def allocation(self, key: str) -> Allocation | None:
        """The allocation of claim `key` (None: not allocated)."""
        found = self._allocations.get(key)
        return found if found is None else self._materialized(key, found)

    def _materialized(self, key: str, found: Allocation | _Copied) -> Allocation:
        if isinstance(found, Allocation):
            return found
        i = found.keys.index(key)
        return _copy_allocation(
            found.requests[i], found.device_ids[i], self._local_selector(found.node)
        )

    # ------------------------------------------------------------------ slices and devices

    def _index(self, s: ResourceSlice) -> None:
        self._version += 1
        pool_id = (s.driver, s.pool.name)
        self._pool_versions[pool_id] = self._pool_versions.get(pool_id, 0) + 1
        self.pool_slices.setdefault(pool_id, []).append(s)
        if s.shared_counters:
            sets = self.shared_counters.setdefault(pool_id, {})
            for name, counters in s.shared_counters.items():
                sets[name] = dict(counters)
        for device, consumed in s.device_counters.items():
            self.device_counters[(s.driver, s.pool.name, device)] = consumed

    def _unindex(self, s: ResourceSlice) -> None:
        self._version += 1
        pool_id = (s.driver, s.pool.name)
        self._pool_versions[pool_id] = self._pool_versions.get(pool_id, 0) + 1
        slices = self.pool_slices.get(pool_id, [])
        if s in slices:
            slices.remove(s)
        if not slices:
            self.pool_slices.pop(pool_id, None)
        sets = self.shared_counters.get(pool_id)
        if sets is not None:
            for name in s.shared_counters:
                sets.pop(name, None)
            if not sets:
                del self.shared_counters[pool_id]
        for device in s.device_counters:
            self.device_counters.pop((s.driver, s.pool.name, device), None)

    def pool_complete(self, pool_id: PoolId) -> bool:
        """Whether every slice of the pool's newest generation is known."""
        slices = self.pool_slices.get(pool_id)
        if not slices:
            return False
        return len(slices) >= slices[0].pool.slice_count

    def add_node_slices(self, node_name: str, slices: Sequence[ResourceSlice]) -> Callable[[], None]:
        """Publish `slices` (a template's, renamed) for a new node; returns the undo."""
        if not slices:
            return _nothing
        self.node_slices[node_name] = list(slices)
        for s in slices:
            self._index(s)
        # A partial, not a closure: made for every node an estimate adds.
        return partial(self._remove_node_slices, node_name, slices)

    def _remove_node_slices(self, node_name: str, slices: Sequence[ResourceSlice]) -> None:
        """Undo `add_node_slices`."""
        self.node_slices.pop(node_name, None)
        for s in slices:
            self._unindex(s)

    def slices_of(self, node_name: str) -> list[ResourceSlice]:
        """The node-local slices of a node (a template copies them)."""
        return list(self.node_slices.get(node_name, ()))

    def _reachable(self, node: Node) -> list[ResourceSlice]:
        out = list(self.node_slices.get(node.name, ()))
        for s in self.shared_slices:
            if s.per_device_node_selection:
                if any(_reaches(d, node) for d in s.devices):
                    out.append(s)
            elif s.all_nodes or (
                s.node_selector is not None
                and node_selector_matches(s.node_selector, node.name, node.labels)
            ):
                out.append(s)
        return out

    def _pools(self, node: Node) -> list[_Pool]:
        """The pools `node` can reach, in the order their slices come, with the devices of
        theirs it can reach."""
        return self._node_pools(node).pools

    def _node_pools(self, node: Node) -> _NodePools:
        known = self._pools_of.get(node.name)
        if (
            known is not None
            and known.local is self.node_slices.get(node.name)
            and known.shared_version == self._shared_version
            and known.labels is node.labels
        ):
            versions = self._pool_versions
            for pool_id, version in known.versions:
                if versions.get(pool_id) != version:
                    break
            else:
                return known
        pools: dict[PoolId, _Pool] = {}
        for s in self._reachable(node):
            pool_id = (s.driver, s.pool.name)
            pool = pools.get(pool_id)
            if pool is None:
                pool = pools[pool_id] = _Pool(pool_id, self.pool_complete(pool_id), [])
            for d in s.devices:
                if s.per_device_node_selection and not _reaches(d, node):
                    continue
                pool.devices.append(
                    _new_candidate(
                        None,
                        (s.driver, s.pool.name, d.name),
                        d,
                        s,
                        s.device_taints.get(d.name, ()),
                        s.device_counters.get(d.name, _NO_COUNTERS),
                    )
                )
        entry = _NodePools(
            self.node_slices.get(node.name),
            self._shared_version,
            node.labels,
            tuple((p, self._pool_versions.get(p, 0)) for p in pools),
            list(pools.values()),
        )
        self._pools_of[node.name] = entry
        return entry

    def _matching(self, entry: _NodePools, selectors: tuple[str, ...]) -> list[_Candidate]:
        """The devices of the node's complete pools that `selectors` select."""
        found = entry.matching.get(selectors)
        if found is None:
            found = entry.matching[selectors] = [
                c for p in entry.pools if p.complete for c in p.devices
                if self.selected(selectors, c)
            ]
        return found

    # ------------------------------------------------------------------ holding devices

    def _hold(self, key: str, allocation: Allocation) -> list[Held]:
        """Mark the devices of `allocation` (not those of admin access) as held by claim
        `key`, or its shares of devices that allow multiple allocations as in use, with the
        counters they consume (a shared device's once); returns what is newly held."""
        held: list[Held] = []
        for r in allocation.results:
            if r.admin_access:
                continue
            device_id = (r.driver, r.pool, r.device)
            if r.share_id:
                self._share(device_id, r.consumed, 1)
                held.append((device_id, r.consumed))
                continue
            if device_id in self.allocated:
                # Two claims name one device (a stale status): it is counted once.
                self.allocated[device_id] = key
                self._version += 1
                continue
            self.allocated[device_id] = key
            self._count(device_id, 1)
            held.append((device_id, None))
        return held

    def _share(self, device_id: DeviceId, consumed: Consumed, sign: int) -> None:
        self._version += 1
        count = self.share_count.get(device_id, 0) + sign
        use = self.shared_use.setdefault(device_id, {})
        for name, amount in consumed:
            use[name] = use.get(name, Fraction(0)) + sign * amount
        if count > 0:
            self.share_count[device_id] = count
            if count == 1 and sign > 0:
                self._count(device_id, 1)
        else:
            self.share_count.pop(device_id, None)
            self.shared_use.pop(device_id, None)
            self._count(device_id, -1)

    def _drop(self, held: Iterable[Held]) -> None:
        for device_id, consumed in held:
            if consumed is not None:
                self._share(device_id, consumed, -1)
            elif self.allocated.pop(device_id, None) is not None:
                self._count(device_id, -1)

    def _count(self, device_id: DeviceId, sign: int) -> None:
        self._version += 1
        consumed = self.device_counters.get(device_id)
        if not consumed:
            return
        used = self.used_counters.setdefault((device_id[0], device_id[1]), {})
        for set_name, counters in consumed.items():
            totals = used.setdefault(set_name, {})
            for counter, amount in counters.items():
                totals[counter] = totals.get(counter, Fraction(0)) + sign * amount

    # ------------------------------------------------------------------ claims of a pod

    def pod_claims(self, pod: Pod) -> list[PodClaim] | str:
        """The claims of `pod`, or why one cannot be found."""
        known = self._claims_of.get(id(pod))
        if known is not None and known[0] is pod:
            return known[1]
        run = self._run
        found: list[PodClaim] | str
        if run is not None and run.next < len(run.pods) and run.pods[run.next] is pod:
            # The next pod of a run of alike pods: its one claim, as the run keyed it.
            found = [PodClaim(run.keys[run.next], run.spec, None, True)]
        else:
            found = self._find_claims(pod)
        self._claims_of[id(pod)] = (pod, found)
        return found

    def _find_claims(self, pod: Pod) -> list[PodClaim] | str:
        out: list[PodClaim] = []
        for pc in pod.resource_claims:
            name = pod.claim_name(pc)
            if name is not None:
                claim = self.claims.get(f"{pod.namespace}/{name}")
                if claim is not None:
                    owned = bool(pc.template_name) or any(
                        o.kind == "Pod" and o.controller and (not pod.uid or o.uid == pod.uid)
                        for o in claim.owners
                    )
                    out.append(PodClaim(claim.key, claim.spec, claim, owned))
                    continue
                if not pc.template_name:
                    return f'{REASON_CLAIM_MISSING}: resourceclaim "{name}" not found'
            template = self.templates.get(f"{pod.namespace}/{pc.template_name}")
            if template is None:
                return (
                    f'{REASON_CLAIM_MISSING}: resourceclaimtemplate "{pc.template_name}" not '
                    "found"
                )
            out.append(
                PodClaim(f"{pod.namespace}/{pod.name}#{pc.name}", template.spec, None, True)
            )
        return out

    # ------------------------------------------------------------------ the filter

    def allocate(self, pod: Pod, node: Node) -> dict[str, Allocation] | str:
        """The allocations `pod`'s unallocated claims would get on `node` (by claim key),
        or the reason they cannot."""
        last = self._last
        if last is not None and last[0] is pod and last[1] is node and last[2] == self._version:
            # The filter's answer, asked again by the Reserve step.
            return last[3]
        planned = self._planned(pod, node)
        found = self._allocate(pod, node) if planned is None else planned
        self._last = (pod, node, self._version, found)
        return found

    def unfit(self, pod: Pod, node: Node) -> str | None:
        """Why `pod`'s claims cannot be allocated on `node` (None: they can), as `allocate`
        says; without making the allocations when they are the next ones `copies_fit`
        planned there (the Reserve step, `reserve_pods` or `allocate`, makes them)."""
        last = self._last
        if last is not None and last[0] is pod and last[1] is node and last[2] == self._version:
            found = last[3]
        elif self._plan_for(pod, node) is not None:
            return None
        else:
            found = self._allocate(pod, node)
            self._last = (pod, node, self._version, found)
        return found if isinstance(found, str) else None

    def _plan_for(self, pod: Pod, node: Node) -> tuple[list[PodClaim], _Plan] | None:
        """`pod`'s claims and the plan `copies_fit` made for this node, when its claims are
        copies of the planned ones, a planned copy is left and nothing changed since."""
        plan = self._plan
        if (
            plan is None
            or plan.node != node.name
            or plan.version != self._version
            or plan.index >= plan.count
        ):
            return None
        claims = self.pod_claims(pod)
        if isinstance(claims, str) or not self._copies_of(claims, plan.specs):
            return None
        return claims, plan

    def _planned(self, pod: Pod, node: Node) -> dict[str, Allocation] | None:
        """The next allocation `copies_fit` planned for this node, when `pod`'s claims are
        copies of the planned ones and nothing changed since: what the search would find."""
        planned = self._plan_for(pod, node)
        if planned is None:
            return None
        claims, plan = planned
        found = {
            c.key: a for c, a in zip(claims, self._planned_at(plan, plan.index), strict=True)
        }
        plan.offered = found
        return found

    def _planned_at(self, plan: _Plan, index: int) -> tuple[Allocation, ...]:
        """The allocations of the plan's copy `index`."""
        if plan.allocations is not None:
            return plan.allocations[index]
        assert plan.single is not None
        requests, device_ids = plan.single
        return (
            _copy_allocation(requests[index], device_ids[index], self._local_selector(plan.node)),
        )

    def _copies_of(self, claims: Sequence[PodClaim], specs: Sequence[ClaimSpec]) -> bool:
        """Whether `claims` are a pod's own, none allocated or used by another pod, each
        once, asking what `specs` ask: their devices are then found as for any copy."""
        if len(claims) != len(specs):
            return False
        if len(specs) == 1:
            claim, spec = claims[0], specs[0]
            return (
                claim.owned
                and (claim.spec is spec or claim.spec == spec)
                and claim.key not in self._allocations
                and not self.consumers.get(claim.key)
            )
        keys = set()
        for claim, spec in zip(claims, specs, strict=True):
            if (
                not claim.owned
                or claim.key in keys
                or claim.key in self._allocations
                or self.consumers.get(claim.key)
                or (claim.spec is not spec and claim.spec != spec)
            ):
                return False
            keys.add(claim.key)
        return True

    def claims_alike(self, pods: Sequence[Pod]) -> bool:
        """Whether every pod of `pods` has claims of its own, not allocated yet, asking
        what the first pod's ask: each pod then takes devices as a copy of the first would
        (`copies_fit`)."""
        first = self.pod_claims(pods[0]) if pods else "no pods"
        if isinstance(first, str) or not first:
            return False
        specs = tuple(c.spec for c in first)
        self._run = None
        run = self._template_run(pods, first)
        if run is not None:
            # Each claim the pod's own, asking the first's: alike while none is allocated
            # or in use.
            if not self._allocations.keys().isdisjoint(run.keys) or (
                self.consumers and any(map(self.consumers.get, run.keys))
            ):
                return False
            if len(set(run.keys)) == len(run.keys):
                self._run = run
            return True
        for pod in pods:
            claims = self.pod_claims(pod)
            if isinstance(claims, str) or not self._copies_of(claims, specs):
                return False
        return True

    def _template_run(self, pods: Sequence[Pod], first: Sequence[PodClaim]) -> _Run | None:
        """When every pod of `pods` has the one claim the first has, made from one template
        for it and not made yet (no claim status; the first resolved to `first`): the
        pods' claim keys, in one pass (what `_find_claims` gives each of them, without
        resolving them one by one). None otherwise."""
        rep = pods[0]
        made = rep.resource_claims
        if not (
            len(made) == 1
            and made[0].template_name
            and not made[0].claim_name
            and not rep.claim_statuses
            and len(first) == 1
            and first[0].owned
            and first[0].claim is None
        ):
            return None
        namespace = rep.namespace
        if (
            any(map(_claim_statuses, pods))
            or any(map(namespace.__ne__, map(_namespace, pods)))
            or any(map(made.__ne__, map(_resource_claims, pods)))
        ):
            return None
        prefix = namespace + "/"
        suffix = "#" + made[0].name
        keys = [f"{prefix}{name}{suffix}" for name in map(_name, pods)]
        return _Run(tuple(pods), keys, first[0].spec)

    def claims_key(self, pod: Pod) -> tuple[int, ...]:
        """What decides where `pod`'s claims can be allocated, for pods whose claims are
        alike (`claims_alike`): the claim specs, by identity (the pods of a workload
        share their template's), so pods with equal keys ask the very same."""
        claims = self.pod_claims(pod)
        if isinstance(claims, str):
            return ()
        return tuple(id(c.spec) for c in claims)

    def copies_fit(self, pod: Pod, node: Node, limit: int) -> int:
        """How many copies of `pod` (itself the first), at most `limit`, get devices on
        `node` one after the other, each with the allocation the search finds once the
        earlier copies hold theirs. `pod`'s claims must be alike (`claims_alike`). The
        allocations found are kept for the pods placed there next (`allocate` answers
        with them while nothing else changes), so each is searched for once."""
        claims = self.pod_claims(pod)
        if isinstance(claims, str) or limit <= 0:
            return 0
        specs = tuple([c.spec for c in claims])
        spec_ids = tuple(map(id, specs))
        fresh = self._fresh_devices(node)
        known = None if fresh is None else self._known_copies(fresh[0], spec_ids)
        if fresh is not None and known is not None and known.enough(limit):
            # A node of a layout seen before, read from its slices alone.
            plan = self._from_copies(known, limit, fresh[1], node.name, specs)
        else:
            found_all: list[tuple[Allocation, ...]] | None = None
            entry = self._node_pools(node)
            if (
                self._all_held(entry)
                and all(spec.requests for spec in specs)
                and not any(r.admin_access for spec in specs for r in spec.requests)
            ):
                # No free device at all: no copy gets one (a request asks for one or more,
                # or for all of the devices its selectors match, each of which must be free).
                found_all = []
            else:
                layout = self._fresh_layout(entry, node)
                known = None if layout is None else self._known_copies(layout, spec_ids)
                if known is None or not known.enough(limit):
                    found_all = self._search_copies(claims, node, entry, limit)
                    if layout is not None:
                        found = _Copies.of(found_all, entry, limit)
                        self._copies[(layout, spec_ids)] = found
                        self._last_copies = (layout, spec_ids, found)
            if found_all is not None:
                plan = _Plan(node.name, specs, found_all, len(found_all), self._version)
            else:
                assert known is not None
                ids = [c.device_id for p in entry.pools for c in p.devices]
                plan = self._from_copies(known, limit, ids, node.name, specs)
        self._plan = plan
        # The next pod placed there is answered from the plan, not from an earlier filter.
        self._last = None
        return plan.count

    def _known_copies(
        self, layout: tuple[object, ...], spec_ids: tuple[int, ...]
    ) -> _Copies | None:
        """What `copies_fit` found for claims of `spec_ids` on a node of `layout`. The
        layout of a template's copies is one object: the answer for the last one asked is
        found without hashing the layout."""
        last = self._last_copies
        if last is not None and last[0] is layout and last[1] == spec_ids:
            return last[2]
        known = self._copies.get((layout, spec_ids))
        self._last_copies = None if known is None else (layout, spec_ids, known)
        return known

    def _first_copy(self, claims: Sequence[PodClaim], node: Node) -> dict[str, Allocation] | None:
        """What the search gives `claims` (none allocated) on a fresh node of a layout
        seen before, where `copies_fit` already found copies of claims asking the same;
        None when it found none there, or the node is not such a node."""
        fresh = self._fresh_devices(node)
        if fresh is None:
            return None
        known = self._copies.get((fresh[0], tuple(id(c.spec) for c in claims)))
        if known is None or not known.patterns:
            return None
        allocations = _pattern_allocations(
            known.patterns[0], fresh[1], self._local_selector(node.name)
        )
        return {c.key: a for c, a in zip(claims, allocations, strict=True)}

    def _all_held(self, entry: _NodePools) -> bool:
        """Whether every device the node reaches is held by a claim (none shared), so
        that no request without admin access can get one; False for a node without
        devices, whose answer the search gives."""
        allocated = self.allocated
        devices = 0
        for pool in entry.pools:
            for c in pool.devices:
                if c.device_id not in allocated or _shareable(c.device):
                    return False
                devices += 1
        return devices > 0

    def _search_copies(
        self, claims: Sequence[PodClaim], node: Node, entry: _NodePools, limit: int
    ) -> list[tuple[Allocation, ...]]:
        """The allocations of up to `limit` copies of `claims`, each searched for with the
        earlier copies holding theirs (held only for the search)."""
        found_all: list[tuple[Allocation, ...]] = []
        held: list[Held] = []
        try:
            while len(found_all) < limit:
                found = _Search(self, node, claims, entry).run(explain=False)
                if isinstance(found, str):
                    break
                allocations = tuple(found[c.key] for c in claims)
                found_all.append(allocations)
                for claim, allocation in zip(claims, allocations, strict=True):
                    held.extend(self._hold(claim.key, allocation))
        finally:
            self._drop(held)
        return found_all

    def _fresh_layout(self, entry: _NodePools, node: Node) -> tuple[object, ...] | None:
        """What the search on `node` depends on, when that is the layout of its devices
        alone: the node reaches only slices of its own (no shared slices in the cluster),
        none of its devices is held and no counter of its pools is drawn on. A template's
        copies share their Device objects, taints and counters, so the copies of one
        template have one layout and their first claims get the same devices. None when
        the node is not in that state."""
        if self.shared_slices:
            return None
        if not entry.layout_known:
            entry.layout = self._layout(entry, node)
            entry.layout_known = True
        if entry.layout is None:
            return None
        allocated = self.allocated
        for pool in entry.pools:
            if self._counters_drawn(pool.pool_id):
                return None
            for c in pool.devices:
                if c.device_id in allocated:
                    return None
        return entry.layout

    def _fresh_devices(self, node: Node) -> tuple[tuple[object, ...], list[DeviceId]] | None:
        """`_fresh_layout` for a node whose slices are laid out as those of a node seen
        before (a template's copies), read from its slices without its pools: the layout
        and the node's devices in the order of its pools. None when the node is not fresh
        or its slices' layout was not seen."""
        local = self.node_slices.get(node.name)
        if self.shared_slices or not local:
            return None
        known: _Layout | None = None
        last = self._single_layout
        if last is not None and len(local) == 1:
            s, t = local[0], last[0]
            if (
                s.devices is t.devices
                and s.device_taints is t.device_taints
                and s.device_counters is t.device_counters
                and s.shared_counters is t.shared_counters
                and s.node_name == node.name
                and not s.per_device_node_selection
                and self.pool_complete((s.driver, s.pool.name)) == last[1]
            ):
                # The signature `t` had: the same layout.
                known = last[2]
        if known is None:
            signature = self._signature(local, node.name)
            known = None if signature is None else self._layouts.get(signature)
            if known is not None and len(local) == 1:
                s = local[0]
                self._single_layout = (s, self.pool_complete((s.driver, s.pool.name)), known)
        if known is None or known.key is None:
            return None
        if self.used_counters:
            for i in known.pool_slices:
                s = local[i]
                if self._counters_drawn((s.driver, s.pool.name)):
                    return None
        if len(local) == 1:
            driver, pool = local[0].driver, local[0].pool.name
            ids = [(driver, pool, name) for _, name in known.devices]
        else:
            ids = [(local[i].driver, local[i].pool.name, name) for i, name in known.devices]
        if not self.allocated.keys().isdisjoint(ids):
            return None
        return known.key, ids

    def _counters_drawn(self, pool_id: PoolId) -> bool:
        """Whether allocated devices draw on a shared counter of the pool."""
        used = self.used_counters.get(pool_id)
        return used is not None and any(v for counters in used.values() for v in counters.values())

    def _signature(self, local: list[ResourceSlice], node_name: str) -> tuple[object, ...] | None:
        """What the layout of a node's devices is known by when its slices are all its
        own: per slice, its pool (by order of first appearance) and the identity of its
        devices, taints and counters (a template's copies share them), and whether each
        pool is complete. None when a slice is not the node's own."""
        if len(local) == 1:
            # A node's one slice (the usual case), without counting pools.
            [s] = local
            if s.node_name != node_name or s.per_device_node_selection:
                return None
            return (
                ((0, id(s.devices), id(s.device_taints), id(s.device_counters),
                  id(s.shared_counters)),),
                (self.pool_complete((s.driver, s.pool.name)),),
            )
        pools: dict[PoolId, int] = {}
        parts = []
        for s in local:
            if s.node_name != node_name or s.per_device_node_selection:
                return None
            parts.append(
                (pools.setdefault((s.driver, s.pool.name), len(pools)), id(s.devices),
                 id(s.device_taints), id(s.device_counters), id(s.shared_counters))
            )
        return tuple(parts), tuple(map(self.pool_complete, pools))

    def _layout(self, entry: _NodePools, node: Node) -> tuple[object, ...] | None:
        """The layout of the node's devices for `_fresh_layout` (None: some are not its
        own, or are shared). The layout of a node whose slices have the signature of a
        node seen before is that node's, found without a pass over devices."""
        local = entry.local
        signature = None if not local else self._signature(local, node.name)
        if signature is not None:
            known = self._layouts.get(signature)
            if known is not None:
                return known.key
        layout = self._layout_of(entry, node)
        if signature is not None and local is not None:
            self._layouts[signature] = _Layout.of(layout, local, entry)
        return layout

    def _layout_of(self, entry: _NodePools, node: Node) -> tuple[object, ...] | None:
        """The layout of the node's devices, device by device."""
        layout: list[object] = []
        for pool in entry.pools:
            layout.append(pool.complete)
            for c in pool.devices:
                # Shared devices' allocations carry shares: not copied by position.
                if c.slice.node_name != node.name or _shareable(c.device):
                    layout = []
                    break
                layout.append((id(c.device), id(c.taints), id(c.counters),
                               id(c.slice.shared_counters)))
            else:
                continue
            break
        return tuple(layout) if layout else None

    def _from_copies(
        self,
        known: _Copies,
        count: int,
        ids: Sequence[DeviceId],
        node_name: str,
        specs: tuple[ClaimSpec, ...],
    ) -> _Plan:
        """The plan of the first `count` copies `known` holds, of claims asking `specs`, on
        node `node_name` of their layout whose devices are `ids` (in the order of its
        pools). When each copy is one claim given one device without admin access, the
        plan holds their requests and devices, their allocations made only when read."""
        if known.single is not None:
            # Each copy one claim given one device (the fill's usual copies).
            requests, positions = known.single
            if count < len(positions):
                requests, positions = requests[:count], positions[:count]
            if not known.in_order:
                taken = [ids[i] for i in positions]
            elif len(positions) < len(ids):
                taken = list(ids[: len(positions)])
            else:
                # Every device of the node, in order: `ids` itself (made for this node).
                taken = list(ids) if not isinstance(ids, list) else ids
            return _Plan(
                node_name, specs, None, len(taken), self._version, single=(requests, taken)
            )
        # A fresh layout's devices are all local to the node: an allocation of any of
        # them is pinned to it (`_node_selector`).
        pinned = self._local_selector(node_name)
        found = [
            _pattern_allocations(pattern, ids, pinned) for pattern in known.patterns[:count]
        ]
        return _Plan(node_name, specs, found, len(found), self._version)

    def _allocate(self, pod: Pod, node: Node) -> dict[str, Allocation] | str:
        claims = self.pod_claims(pod)
        if isinstance(claims, str):
            return claims
        todo: list[PodClaim] = []
        for claim in claims:
            current = self.allocation(claim.key)
            if current is not None:
                if current.node_selector is not None and not node_selector_matches(
                    current.node_selector, node.name, node.labels
                ):
                    return f"{REASON_CLAIM_ELSEWHERE}: {claim.key} is allocated to other nodes"
                continue
            if all(c.key != claim.key for c in todo):
                todo.append(claim)
        if not todo:
            return {}
        if self._copies and len(todo) == len(claims):
            known = self._first_copy(todo, node)
            if known is not None:
                return known
        entry = self._node_pools(node)
        found = _Search(self, node, todo, entry).run()
        if isinstance(found, str):
            return f"{REASON_DRA}: {found}"
        return found

    def selected(self, selectors: tuple[str, ...], candidate: _Candidate) -> bool:
        """Whether every CEL expression of `selectors` is true for the device."""
        if not selectors:
            return True
        key = (selectors, candidate.device_id[0], id(candidate.device))
        known = self._selected.get(key)
        if known is not None and known[0] is candidate.device:
            return known[1]
        found = True
        for expression in selectors:
            answer = _selects(expression, candidate)
            if answer is True:
                continue
            found = False
            if answer is not False:
                self._selector_failures[key] = answer
            break
        self._selected[key] = (candidate.device, found)
        return found

    def selector_failure(self, selectors: tuple[str, ...], candidate: _Candidate) -> str:
        """Why `selectors` could not be evaluated for the device ("" when they could)."""
        if not self.selected(selectors, candidate):
            return self._selector_failures.get(
                (selectors, candidate.device_id[0], id(candidate.device)), ""
            )
        return ""

    def new_share_id(self) -> str:
        """A share id for a simulated allocation of a shared device (the scheduler makes
        a random one; what matters is that each share has its own)."""
        self._shares_made += 1
        return f"simulated-{self._shares_made}"

    def wants(self, spec: ClaimSpec) -> list[list[_Want]] | str:
        """The requests of a claim spec as the search sees them (each request's
        alternatives), or why they cannot be read (a device class that does not exist)."""
        known = self._wants_of.get(id(spec))
        if known is not None and known[0] is spec:
            return known[1]
        found = self._make_wants(spec)
        self._wants_of[id(spec)] = (spec, found)
        return found

    def _make_wants(self, spec: ClaimSpec) -> list[list[_Want]] | str:
        requests: list[list[_Want]] = []
        for request in spec.requests:
            wants = []
            for alt in request.first_available or (request,):
                device_class = self.classes.get(alt.device_class_name)
                if device_class is None:
                    return (
                        f'request {request.name}: deviceclass "{alt.device_class_name}" '
                        "not found"
                    )
                wants.append(
                    _Want(
                        request.name,
                        alt.name if request.first_available else "",
                        alt.device_class_name,
                        (*device_class.selectors, *alt.selectors),
                        alt.allocation_mode == "All",
                        alt.count,
                        request.admin_access and not request.first_available,
                        alt.tolerations,
                        tuple(alt.capacity_requests.items()),
                    )
                )
            requests.append(wants)
        return requests

    def node_selector(
        self, chosen: Sequence[_Candidate], node_name: str
    ) -> tuple[NodeSelectorTerm, ...] | None:
        """`_node_selector` for an allocation on `node_name`, the one of devices local to
        a node made once per node."""
        if chosen:
            first = chosen[0]
            s = first.slice
            local = first.device.node_name if s.per_device_node_selection else s.node_name
            if not local and first.device.binds_to_node:
                local = node_name
            if local:
                return self._local_selector(local)
        return _node_selector(chosen, node_name)

    def _local_selector(self, node_name: str) -> tuple[NodeSelectorTerm, ...]:
        """The node selector of an allocation of devices local to node `node_name`."""
        known = self._local_selectors.get(node_name)
        if known is None:
            known = self._local_selectors[node_name] = (
                _new_fields_term(_NO_TERM, (_new_values(_NAME_IN, (node_name,)),)),
            )
        return known

    def available(self, pool_id: PoolId, set_name: str, counter: str) -> Fraction | None:
        """What the pool's shared counter has left (None: the pool defines no such
        counter)."""
        total = self.shared_counters.get(pool_id, {}).get(set_name, {}).get(counter)
        if total is None:
            return None
        used = self.used_counters.get(pool_id, {}).get(set_name, {}).get(counter, Fraction(0))
        return total - used

    # ------------------------------------------------------------------ reserve / release

    def reserve(self, pod: Pod, allocations: Mapping[str, Allocation]) -> Callable[[], None]:
        """Record `allocations` (from `allocate`) and `pod` as a consumer of its claims
        that are not its own; returns the undo."""
        plan = self._plan
        planned = (
            plan is not None
            and plan.offered is allocations
            and plan.version == self._version
        )
        self._version += 1
        claims = self.pod_claims(pod)
        keys = [c.key for c in claims if not c.owned] if not isinstance(claims, str) else []
        held: list[Held] = []
        for key, allocation in allocations.items():
            self._allocations[key] = allocation
            held.extend(self._hold(key, allocation))
        added = [k for k in keys if pod.key not in self.consumers.get(k, set())]
        for key in added:
            self.consumers.setdefault(key, set()).add(pod.key)
        if planned and plan is not None:
            # The state is now the one the plan's next allocation was found in.
            plan.index += 1
            plan.version = self._version
            plan.offered = None

        def undo() -> None:
            self._version += 1
            for key in added:
                self.consumers.get(key, set()).discard(pod.key)
            for key in allocations:
                self._allocations.pop(key, None)
            self._drop(held)

        return undo

    def reserve_pods(self, pods: Sequence[Pod], node: Node) -> Callable[[], None]:
        """The Reserve step of `pods` placed on `node` one after the other (a pod whose
        claims cannot be allocated there still uses them); returns the undo of them all."""
        # Where `pods` are in the run of alike pods `claims_alike` found, when they are
        # its next ones (the run's claim keys are then theirs).
        run = self._run
        at: int | None = None
        if run is not None and pods:
            at = run.next
            end = at + len(pods)
            if end <= len(run.pods) and all(map(operator.is_, pods, run.pods[at:end])):
                run.next = end
            else:
                at = None
        planned = self._reserve_planned(pods, node, at)
        if self._planned_count == len(pods):
            return planned
        undos = [planned]
        for pod in pods[self._planned_count :]:
            found = self.allocate(pod, node)
            undos.append(self.reserve(pod, found if not isinstance(found, str) else {}))

        def undo() -> None:
            for one in reversed(undos):
                one()

        return undo

    def _reserve_planned(
        self, pods: Sequence[Pod], node: Node, at: int | None
    ) -> Callable[[], None]:
        """`reserve` of the first of `pods` that take the plan's next allocations on
        `node` (`_planned`), in one pass; `_planned_count` says how many did. `at`: where
        the pods are in the run of alike pods, when they are its next ones."""
        self._planned_count = 0
        plan = self._plan
        if (
            plan is None
            or plan.node != node.name
            or plan.version != self._version
            or plan.index >= plan.count
        ):
            return _nothing
        specs = plan.specs
        if len(specs) == 1:
            batch = self._reserve_copies(plan, pods, at)
            if batch is not None:
                return batch
        allocations = self._allocations
        recorded: list[str] = []
        held: list[Held] = []
        taken = 0
        for pod in pods:
            if plan.index >= plan.count:
                break
            claims = self.pod_claims(pod)
            # Each claim the pod's own (`_copies_of`): none is listed among consumers.
            if isinstance(claims, str) or not self._copies_of(claims, specs):
                break
            for claim, allocation in zip(claims, self._planned_at(plan, plan.index), strict=True):
                key = claim.key
                allocations[key] = allocation
                recorded.append(key)
                held.extend(self._hold(key, allocation))
            plan.index += 1
            taken += 1
        if not taken:
            return _nothing
        self._version += 1
        plan.version = self._version
        plan.offered = None
        self._planned_count = taken

        def undo() -> None:
            self._version += 1
            for key in recorded:
                allocations.pop(key, None)
            self._drop(held)

        return undo

    def _reserve_copies(
        self, plan: _Plan, pods: Sequence[Pod], at: int | None
    ) -> Callable[[], None] | None:
        """`_reserve_planned` as one record, when the pods taking the plan's next
        allocations each have one claim of their own (resolved already), given one
        dedicated device drawing on no counter, and none of those devices is held: the
        claims' allocations and devices are written and undone together. None
        when that is not so (`_reserve_planned` then records them one by one)."""
        [spec] = plan.specs
        start = plan.index
        run = self._run
        single = plan.single
        if at is not None and run is not None and single is not None and run.spec is spec:
            # The pods are the run's next ones: their keys are slices of its keys.
            end = start + min(len(pods), plan.count - start)
            requests, taken = single
            if start or end < len(taken):
                requests, taken = requests[start:end], taken[start:end]
            return self._record_copies(
                plan, run.keys[at : at + end - start], None, taken, requests, known_apart=True
            )
        keys: list[str] = []
        for pod in pods[: plan.count - start]:
            claims = self.pod_claims(pod)
            if isinstance(claims, str) or not self._copies_of(claims, plan.specs):
                break
            keys.append(claims[0].key)
        end = start + len(keys)
        if single is not None:
            return self._record_copies(
                plan, keys, None, single[1][start:end], single[0][start:end], known_apart=False
            )
        assert plan.allocations is not None
        chosen: list[Allocation] = []
        device_ids: list[DeviceId] = []
        for (allocation,) in plan.allocations[start:end]:
            results = allocation.results
            if len(results) != 1:
                return None
            r = results[0]
            if r.admin_access or r.share_id:
                return None
            chosen.append(allocation)
            device_ids.append((r.driver, r.pool, r.device))
        return self._record_copies(plan, keys, chosen, device_ids, None, known_apart=False)

    def _record_copies(
        self,
        plan: _Plan,
        keys: list[str],
        chosen: list[Allocation] | None,
        device_ids: list[DeviceId],
        requests: list[str] | None,
        *,
        known_apart: bool,
    ) -> Callable[[], None] | None:
        """Record the plan's next allocations, each of claim `keys[i]` (its pod's own, so
        not listed among consumers) and of device `device_ids[i]`, as one record: the
        allocations `chosen`, or (None) those of the plan's single copies, of `requests`,
        made when read. None, recording nothing, when a claim is allocated or used
        already, two are one, or a device is held or draws on a counter. `known_apart`:
        the keys are a run's (`claims_alike` found them distinct) and the devices the
        plan's single copies' (distinct positions of a fresh node, none held when planned
        and nothing changed since but the plan's records), so neither is checked again."""
        taken = len(keys)
        allocations = self._allocations
        consumers = self.consumers
        allocated = self.allocated
        device_counters = self.device_counters
        if (
            not taken
            or not allocations.keys().isdisjoint(keys)
            or (consumers and any(map(consumers.get, keys)))
            or (device_counters and not device_counters.keys().isdisjoint(device_ids))
            or not (
                known_apart
                or (
                    len(set(keys)) == taken
                    and len(set(device_ids)) == taken
                    and allocated.keys().isdisjoint(device_ids)
                )
            )
        ):
            return None
        if chosen is None:
            assert requests is not None
            allocations.update(zip(keys, repeat(_Copied(plan.node, keys, requests, device_ids))))
        else:
            allocations.update(zip(keys, chosen, strict=True))
        allocated.update(zip(device_ids, keys, strict=True))
        plan.index += taken
        self._version += 1
        plan.version = self._version
        plan.offered = None
        self._planned_count = taken
        # A partial, not a closure: made for every node an estimate fills.
        return partial(self._unrecord_copies, keys, device_ids)

    def _unrecord_copies(self, keys: list[str], device_ids: list[DeviceId]) -> None:
        """Undo `_record_copies`: undone last in, first out, what the record wrote is
        there to delete."""
        self._version += 1
        allocations = self._allocations
        allocated = self.allocated
        for key in keys:
            del allocations[key]
        for device_id in device_ids:
            del allocated[device_id]

    def release(self, pod: Pod) -> Callable[[], None]:
        """`pod` leaves its node: it no longer uses its claims, and a claim of its own that
        nobody else uses is freed. Returns the undo."""
        self._version += 1
        claims = self.pod_claims(pod)
        if isinstance(claims, str):
            return _nothing
        left: list[str] = []
        # Each claim freed: how it was recorded, and its allocation.
        freed: dict[str, tuple[Allocation | _Copied, Allocation]] = {}
        for claim in claims:
            users = self.consumers.get(claim.key)
            if users is not None and pod.key in users:
                users.discard(pod.key)
                left.append(claim.key)
            if claim.owned and not self.consumers.get(claim.key):
                recorded = self._allocations.pop(claim.key, None)
                if recorded is not None:
                    allocation = self._materialized(claim.key, recorded)
                    freed[claim.key] = (recorded, allocation)
                    self._drop(
                        ((r.driver, r.pool, r.device), r.consumed if r.share_id else None)
                        for r in allocation.results
                        if not r.admin_access
                        and (
                            r.share_id
                            or self.allocated.get((r.driver, r.pool, r.device)) == claim.key
                        )
                    )

        def undo() -> None:
            self._version += 1
            for key in left:
                self.consumers.setdefault(key, set()).add(pod.key)
            for key, (recorded, allocation) in freed.items():
                self._allocations[key] = recorded
                self._hold(key, allocation)

        return undo

    # ------------------------------------------------------------------ what scale-down sees

    def node_pool_utilization(self, node_name: str) -> list[PoolUtilization]:
        """The utilization of each resource pool of the node's local devices, as Cluster
        Autoscaler computes it; empty for a node without local slices. Raises
        `PoolIncomplete` when a pool's newest generation lacks slices (its devices are not
        all known, so neither is its utilization)."""
        pools: dict[PoolId, list[ResourceSlice]] = {}
        for s in self.node_slices.get(node_name, ()):
            pools.setdefault((s.driver, s.pool.name), []).append(s)
        out = []
        for pool_id, slices in pools.items():
            expected = slices[0].pool.slice_count
            if len(slices) < expected:
                raise PoolIncomplete(
                    f"resource pool {pool_id[0]}/{pool_id[1]}: {len(slices)} of "
                    f"{expected} ResourceSlices of generation {slices[0].pool.generation} known"
                )
            out.append(self._pool_utilization(pool_id, slices))
        return out

    def _pool_utilization(self, pool_id: PoolId, slices: Sequence[ResourceSlice]) -> PoolUtilization:
        driver, pool = pool_id
        devices = [d.name for s in slices for d in s.devices]
        # A shared device is in use while any share of it is allocated.
        in_use = [
            d for d in devices
            if (driver, pool, d) in self.allocated or (driver, pool, d) in self.share_count
        ]
        sets: CounterSets = {}
        for s in slices:
            for name, counters in s.shared_counters.items():
                sets[name] = dict(counters)
        plain = [d for d in devices if not self.device_counters.get((driver, pool, d))]
        plain_used = sum(1 for d in in_use if not self.device_counters.get((driver, pool, d)))
        atomic = plain_used / len(plain) if plain else 0.0
        if not sets:
            value = len(in_use) / len(devices) if devices else 0.0
        else:
            used = self.used_counters.get(pool_id, {})
            per_set = []
            for name, totals in sets.items():
                busiest = 0.0
                for counter, total in totals.items():
                    if total > 0:
                        taken = used.get(name, {}).get(counter, Fraction(0))
                        busiest = max(busiest, float(taken / total))
                per_set.append(busiest)
            value = sum(per_set) / len(per_set)
            # Devices that draw on no counter beside partitionable ones: the pool is as
            # busy as the busier kind (when in doubt, a node is kept).
            value = max(value, atomic)
        return PoolUtilization(driver, pool, len(devices), len(in_use), min(value, 1.0))

    def node_devices(self, node: Node) -> list[DeviceUse]:
        """Every device `node` can reach, with the claim holding it."""
        local = {id(s) for s in self.node_slices.get(node.name, ())}
        return [
            DeviceUse(
                c.device_id[0],
                c.device_id[1],
                c.device_id[2],
                self.allocated.get(c.device_id, "")
                or (
                    f"shared by {self.share_count[c.device_id]} allocation(s)"
                    if c.device_id in self.share_count
                    else ""
                ),
                c.taints,
                id(c.slice) in local,
            )
            for pool in self._pools(node)
            for c in pool.devices
        ]


def highest_pool(pools: Sequence[PoolUtilization]) -> PoolUtilization | None:
    """The busiest pool (ties: the first by driver and pool name)."""
    best: PoolUtilization | None = None
    for p in sorted(pools, key=lambda p: (p.driver, p.pool)):
        if best is None or p.utilization > best.utilization:
            best = p
    return best


_claim_statuses = operator.attrgetter("claim_statuses")
_namespace = operator.attrgetter("namespace")
_resource_claims = operator.attrgetter("resource_claims")
_name = operator.attrgetter("name")


def _nothing() -> None:
    return None


def _reaches(device: Device, node: Node) -> bool:
    """Whether `node` can reach a device of a slice with per-device node selection."""
    if device.all_nodes:
        return True
    if device.node_name:
        return device.node_name == node.name
    return device.node_selector is not None and node_selector_matches(
        device.node_selector, node.name, node.labels
    )


def _current(slices: Iterable[ResourceSlice]) -> list[ResourceSlice]:
    """Slices of each pool's newest generation only (older ones are being replaced)."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s.driver, s.pool.name)
        newest[key] = max(newest.get(key, s.pool.generation), s.pool.generation)
    return [s for s in slices if s.pool.generation == newest[(s.driver, s.pool.name)]]


def _selects(expression: str, candidate: _Candidate) -> bool | str:
    """Whether the expression selects the device, or why it cannot be evaluated (the
    device is then not selected, as the scheduler rules it out)."""
    # Imported when a device is first matched: the CEL runtime is large, and most runs of
    # the CLI never meet a claim.
    from clusterscaler.simulator.dra_cel import SelectorError, compile_selector

    try:
        device = candidate.device
        return compile_selector(expression).matches(
            candidate.device_id[0],
            device.attributes,
            device.capacity,
            device.allow_multiple_allocations,
        )
    except SelectorError as e:
        return str(e)


def _shareable(device: Device) -> bool:
    return device.allow_multiple_allocations


def _checks_capacity(want: _Want, candidate: _Candidate) -> bool:
    """Whether the device's capacities decide if `want` may take it (`_capacity_use`): the
    request asks for capacity, the device is shared by its allocations, or a capacity of
    it has a request policy."""
    device = candidate.device
    return bool(want.capacity or device.allow_multiple_allocations or device.capacity_policies)


def consumed_capacity(
    requested: Fraction | None, total: Fraction, policy: CapacityPolicy | None
) -> Fraction:
    """What a request consumes of a capacity of `total`: without a request, the policy's
    default, else the whole capacity; with one, rounded up to the policy's next valid
    value, or to its range's minimum and then to a whole number of steps above it
    (calculateConsumedCapacity)."""
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else total
    if policy is None:
        return requested
    if policy.range_min is not None:
        if requested < policy.range_min:
            return policy.range_min
        if policy.range_step is None:
            return requested
        # As the allocator: in whole units (Quantity.Value rounds up).
        value, step, low = math.ceil(requested), math.ceil(policy.range_step), math.ceil(
            policy.range_min
        )
        steps = -(-(value - low) // step)
        return Fraction(low + step * steps)
    if policy.valid_values:
        for valid in policy.valid_values:
            if requested <= valid:
                return valid
    return requested


def violates_policy(amount: Fraction, policy: CapacityPolicy) -> bool:
    """Whether consuming `amount` breaks the policy (violatesPolicy): above the range's
    maximum or off its steps, or none of the valid values; the default never does."""
    if policy.default is not None and amount == policy.default:
        return False
    if policy.range_min is not None or policy.range_max is not None or policy.range_step is not None:
        if policy.range_max is not None and amount > policy.range_max:
            return True
        if policy.range_step is not None:
            low = math.ceil(policy.range_min) if policy.range_min is not None else 0
            return (math.ceil(amount) - low) % math.ceil(policy.range_step) != 0
        return False
    if policy.valid_values:
        return amount not in policy.valid_values
    return False


def tolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> bool:
    """Whether the taints that block allocation (NoSchedule, NoExecute) are all tolerated,
    as the allocator's `taintPreventsAllocation` decides."""
    for taint in taints:
        if taint.effect in _BLOCKING_EFFECTS and not any(
            _tolerates(t, taint) for t in tolerations
        ):
            return False
    return True


def _tolerates(toleration: Toleration, taint: Taint) -> bool:
    # resourceclaim.ToleratesTaint: an empty operator is Equal; an empty key with Exists
    # tolerates any key.
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


# --------------------------------------------------------------------------- the search


@dataclass(frozen=True, slots=True)
class _Want:
    """A request, or one alternative of a `firstAvailable` request, as the search sees it."""

    request: str
    sub: str
    device_class: str
    selectors: tuple[str, ...]  # the class's, then the request's
    all_devices: bool
    count: int
    admin: bool
    tolerations: tuple[Toleration, ...]
    # capacity.requests: what it asks of each capacity of a device (name as written).
    capacity: Consumed = ()
    # `capacity` by qualified name, per driver of the devices it was asked of (`asked`).
    _asked: dict[str, dict[str, Fraction]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def result_name(self) -> str:
        return f"{self.request}/{self.sub}" if self.sub else self.request

    def asked(self, driver: str) -> dict[str, Fraction]:
        """What the request asks of each capacity of a device of `driver`, by the
        capacity's name qualified as the device's are (a name without a domain is the
        driver's)."""
        known = self._asked.get(driver)
        if known is None:
            known = self._asked[driver] = {
                qualified(name, driver): amount for name, amount in self.capacity
            }
        return known


class _Constraint:
    """`matchAttribute` (one value) or `distinctAttribute` (a value per device) over the
    devices of the requests named (all of the claim's when none is)."""

    def __init__(self, c: DeviceConstraint) -> None:
        self.requests = frozenset(c.requests)
        self.attribute = c.match_attribute or c.distinct_attribute
        self.distinct = not c.match_attribute
        self.values: list[tuple[type, AttributeValue]] = []

    def applies(self, want: _Want) -> bool:
        return not self.requests or want.request in self.requests or (
            bool(want.sub) and want.result_name in self.requests
        )

    def add(self, want: _Want, candidate: _Candidate) -> bool:
        if not self.applies(want):
            return True
        value = candidate.device.attributes.get(self.attribute)
        if value is None:
            return False
        # Typed: an int attribute never equals a bool one.
        typed = (type(value), value)
        if self.distinct:
            if typed in self.values:
                return False
        elif self.values and self.values[0] != typed:
            return False
        self.values.append(typed)
        return True

    def remove(self, want: _Want) -> None:
        if self.applies(want):
            self.values.pop()


class _GiveUp(Exception):
    pass


class _Search:
    """One Allocate call of the structured allocator: the claims of a pod not allocated
    yet, together, on one node."""

    def __init__(
        self, state: DraState, node: Node, claims: Sequence[PodClaim], entry: _NodePools
    ) -> None:
        self.state = state
        self.node = node
        self.claims = claims
        self.entry = entry
        self.pools = entry.pools
        self.steps = 0
        self.wants: list[list[list[_Want]]] = []
        self.constraints: list[list[_Constraint]] = []
        self.results: list[list[tuple[_Want, _Candidate, Consumed | None]]] = [
            [] for _ in claims
        ]
        # This search's shares of devices that allow multiple allocations, and what they
        # consume together.
        self.shares: dict[DeviceId, int] = {}
        self.consuming: dict[DeviceId, dict[str, Fraction]] = {}
        self.in_flight: dict[DeviceId, set[int]] = {}
        self.consumed: dict[PoolId, CounterSets] = {}
        self.everything: dict[_Want, list[_Candidate]] = {}

    # ------------------------------------------------------------------ setting up

    def _prepare(self) -> str | None:
        for claim in self.claims:
            requests = self.state.wants(claim.spec)
            if isinstance(requests, str):
                return f"claim {claim.key}: {requests}"
            for wants in requests:
                for want in wants:
                    if not want.all_devices:
                        continue
                    incomplete = [p for p in self.pools if not p.complete]
                    if incomplete:
                        pool = incomplete[0].pool_id
                        return (
                            f"claim {claim.key}: request {want.request}: asks for all "
                            f"devices, but resource pool {pool[0]}/{pool[1]} is being "
                            "updated"
                        )
                    self.everything[want] = [
                        c for p in self.pools for c in p.devices
                        if self.state.selected(want.selectors, c)
                    ]
            self.wants.append(requests)
            self.constraints.append(
                [_Constraint(c) for c in claim.spec.constraints
                 if c.match_attribute or c.distinct_attribute]
                if claim.spec.constraints else []
            )
        return None

    def _count(self, want: _Want) -> int:
        return len(self.everything[want]) if want.all_devices else want.count

    # ------------------------------------------------------------------ running

    def run(self, *, explain: bool = True) -> dict[str, Allocation] | str:
        """The allocations, or why there are none (without `explain`, a reason that
        does not say which request failed: for callers that only count)."""
        problem = self._prepare()
        if problem is not None:
            return problem
        first = self._first_path()
        if first is True:
            return {
                claim.key: self._allocation(results)
                for claim, results in zip(self.claims, self.results, strict=True)
            }
        self.results = [[] for _ in self.claims]
        self.in_flight = {}
        self.shares = {}
        self.consuming = {}
        if first is None:
            return self._why() if explain else "no allocation"
        try:
            done = self._one(0, 0, 0, 0, False)
        except _GiveUp:
            return (
                f"claim {self.claims[0].key}: no allocation found within {SEARCH_LIMIT} "
                "device choices"
            )
        if not done:
            return self._why() if explain else "no allocation"
        return {
            claim.key: self._allocation(results)
            for claim, results in zip(self.claims, self.results, strict=True)
        }

    def _first_path(self) -> bool | None:
        """The search's first path alone: each device the first usable one, as `_one`
        tries them first. True when it allocates everything: that is the allocation the
        search finds, without its bookkeeping. None when it fails where nothing could
        have been chosen otherwise (one request of one claim, without constraints or
        shared counters: fewer usable devices than wanted); False when the whole search
        must decide. Requests for all devices and devices drawing on shared counters are
        left to the search."""
        only = len(self.claims) == 1 and len(self.wants[0]) == 1 and len(self.wants[0][0]) == 1
        for ci, requests in enumerate(self.wants):
            if self.constraints[ci]:
                return False
            results = self.results[ci]
            for wants in requests:
                want = wants[0]
                if want.all_devices:
                    return False
                needed = want.count
                if len(results) + needed > MAX_RESULTS:
                    return None if only else False
                got = 0
                for candidate in self.state._matching(self.entry, want.selectors):
                    if got == needed:
                        break
                    if candidate.counters or _checks_capacity(want, candidate):
                        return False
                    if not self._usable(ci, want, candidate):
                        continue
                    self.in_flight.setdefault(candidate.device_id, set()).add(ci)
                    results.append((want, candidate, None))
                    got += 1
                if got < needed:
                    return None if only and got <= _FAILS_WITHIN_LIMIT else False
        return True

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool) -> bool:
        """allocateOne: place device `di` of alternative `si` of request `ri` of claim
        `ci`, and everything after it; False when there is no way."""
        self.steps += 1
        if self.steps > SEARCH_LIMIT:
            raise _GiveUp
        if ci == len(self.claims):
            return True
        requests = self.wants[ci]
        if ri == len(requests):
            return self._one(ci + 1, 0, 0, 0, False)
        if not in_sub:
            return any(self._one(ci, ri, i, 0, True) for i in range(len(requests[ri])))
        want = requests[ri][si]
        needed = self._count(want)
        if want.all_devices and needed == 0:
            return False
        if di >= needed:
            return self._one(ci, ri + 1, 0, 0, False)
        if len(self.results[ci]) + needed - di > MAX_RESULTS:
            return False
        if want.all_devices:
            undo = self._take(ci, want, self.everything[want][di])
            if undo is None:
                return False
            if self._one(ci, ri, si, di + 1, True):
                return True
            undo()
            return False
        for candidate in self.state._matching(self.entry, want.selectors):
            undo = self._take(ci, want, candidate)
            if undo is None:
                continue
            if self._one(ci, ri, si, di + 1, True):
                return True
            undo()
        return False

    def _usable(self, ci: int, want: _Want, candidate: _Candidate) -> bool:
        """Whether the device is free for this request (taken neither in the cluster nor
        in this search) and its taints are tolerated."""
        device_id = candidate.device_id
        flight = self.in_flight.get(device_id)
        if want.admin:
            if flight and ci in flight:
                return False
        elif device_id in self.state.allocated or flight:
            return False
        return tolerated(candidate.taints, want.tolerations)

    def _capacity_use(self, want: _Want, candidate: _Candidate) -> dict[str, Fraction] | None:
        """What the request consumes of each capacity of the device, as the allocator's
        CmpRequestOverCapacity judges it: each capacity's request rounded up by its
        policy (the policy's default, else the whole capacity, when not requested); None
        when a request names a capacity the device lacks, an amount breaks the policy, or
        the device's shares (allocated and in this search) and this one exceed it."""
        device = candidate.device
        asked = want.asked(candidate.device_id[0])
        if any(name not in device.capacity for name in asked):
            return None
        used = self.state.shared_use.get(candidate.device_id, {})
        flight = self.consuming.get(candidate.device_id, {})
        out: dict[str, Fraction] = {}
        for name, total in device.capacity.items():
            policy = device.capacity_policies.get(name)
            amount = consumed_capacity(asked.get(name), total, policy)
            if policy is not None and violates_policy(amount, policy):
                return None
            if used.get(name, 0) + amount + flight.get(name, 0) > total:
                return None
            out[name] = amount
        return out

    def _take(self, ci: int, want: _Want, candidate: _Candidate) -> Callable[[], None] | None:
        """allocateDevice: the device for `want` if it is usable, its counters suffice and
        the claim's constraints allow it; returns the undo, or None."""
        if not self._usable(ci, want, candidate):
            return None
        device_id = candidate.device_id
        pool_id = (device_id[0], device_id[1])
        shared = _shareable(candidate.device)
        # A shared device's counters are drawn once, by its first share.
        counters = candidate.counters
        if shared and (device_id in self.state.share_count or device_id in self.consuming):
            counters = _NO_COUNTERS
        if counters and not self._counters_fit(pool_id, counters):
            return None
        use: dict[str, Fraction] | None = None
        if _checks_capacity(want, candidate):
            use = self._capacity_use(want, candidate)
            if use is None:
                return None
        constraints = self.constraints[ci]
        for i, constraint in enumerate(constraints):
            if not constraint.add(want, candidate):
                for earlier in constraints[:i]:
                    earlier.remove(want)
                return None
        consumed: Consumed | None = None
        if shared:
            consumed = tuple((use or {}).items())
            totals = self.consuming.setdefault(device_id, {})
            for name, amount in consumed:
                totals[name] = totals.get(name, Fraction(0)) + amount
            self.shares[device_id] = self.shares.get(device_id, 0) + 1
        else:
            self.in_flight.setdefault(device_id, set()).add(ci)
        self._consume(pool_id, counters, 1)
        self.results[ci].append((want, candidate, consumed))

        def undo() -> None:
            self.results[ci].pop()
            self._consume(pool_id, counters, -1)
            if consumed is None:
                self.in_flight[device_id].discard(ci)
            else:
                totals = self.consuming[device_id]
                for name, amount in consumed:
                    totals[name] -= amount
                self.shares[device_id] -= 1
                if not self.shares[device_id]:
                    del self.shares[device_id]
                    del self.consuming[device_id]
            for constraint in constraints:
                constraint.remove(want)

        return undo

    def _counters_fit(self, pool_id: PoolId, consumes: Mapping[str, Mapping[str, Fraction]]) -> bool:
        flight = self.consumed.get(pool_id, {})
        for set_name, counters in consumes.items():
            for counter, amount in counters.items():
                left = self.state.available(pool_id, set_name, counter)
                if left is None:
                    # A counter its pool does not define (API validation prevents it).
                    continue
                if left - flight.get(set_name, {}).get(counter, Fraction(0)) < amount:
                    return False
        return True

    def _consume(self, pool_id: PoolId, consumes: Mapping[str, Mapping[str, Fraction]], sign: int) -> None:
        if not consumes:
            return
        sets = self.consumed.setdefault(pool_id, {})
        for set_name, counters in consumes.items():
            totals = sets.setdefault(set_name, {})
            for counter, amount in counters.items():
                totals[counter] = totals.get(counter, Fraction(0)) + sign * amount

    def _allocation(
        self, results: Sequence[tuple[_Want, _Candidate, Consumed | None]]
    ) -> Allocation:
        devices = tuple(
            AllocatedDevice(
                want.result_name, c.device_id[0], c.device_id[1], c.device_id[2], want.admin
            )
            if consumed is None
            else AllocatedDevice(
                want.result_name, c.device_id[0], c.device_id[1], c.device_id[2], want.admin,
                self.state.new_share_id(), consumed,
            )
            for want, c, consumed in results
        )
        return Allocation(
            devices, self.state.node_selector([c for _, c, _ in results], self.node.name)
        )

    # ------------------------------------------------------------------ why not

    def _why(self) -> str:
        """Which request of which claim cannot be satisfied on this node, and why (each
        request judged on its own); else the claims' constraints or their sum."""
        for ci, claim in enumerate(self.claims):
            for requests in self.wants[ci]:
                reasons = []
                for want in requests:
                    reason = self._short(ci, want)
                    if reason is None:
                        break
                    reasons.append(reason)
                else:
                    return f"claim {claim.key}: request {requests[0].request}: " + "; ".join(
                        reasons
                    )
        if len(self.claims) == 1:
            return f"claim {self.claims[0].key}: no devices meet the claim's constraints"
        keys = ", ".join(c.key for c in self.claims)
        return f"claims {keys}: no devices meet all of them together"

    def _short(self, ci: int, want: _Want) -> str | None:
        """Why `want` alone cannot be satisfied (None: it can be, taken alone)."""
        matching = [
            c for p in self.pools if p.complete for c in p.devices
            if self.state.selected(want.selectors, c)
        ]
        free = [
            c for c in matching
            if want.admin or c.device_id not in self.state.allocated
        ]
        untainted = [c for c in free if tolerated(c.taints, want.tolerations)]
        counted = [
            c for c in untainted
            if not c.counters
            or (_shareable(c.device) and c.device_id in self.state.share_count)
            or self._counters_fit((c.device_id[0], c.device_id[1]), c.counters)
        ]
        fitting = [
            c for c in counted
            if not _checks_capacity(want, c) or self._capacity_use(want, c) is not None
        ]
        extra = []
        failed = [
            reason for p in self.pools if p.complete for c in p.devices
            if (reason := self.state.selector_failure(want.selectors, c))
        ]
        if failed:
            extra.append(f"{len(failed)} more whose selector failed: {failed[0]}")
        if len(free) < len(matching):
            extra.append(f"{len(matching) - len(free)} more held by other claims")
        if len(untainted) < len(free):
            extra.append(f"{len(free) - len(untainted)} more tainted")
        if len(counted) < len(untainted):
            extra.append(f"{len(untainted) - len(counted)} more without enough shared counters")
        if len(fitting) < len(counted):
            extra.append(f"{len(counted) - len(fitting)} more without enough capacity")
        detail = f" ({', '.join(extra)})" if extra else ""
        if want.all_devices:
            everything = self.everything[want]
            if not everything:
                return f"no device of class {want.device_class} matches"
            usable = {c.device_id for c in fitting}
            busy = sum(1 for c in everything if c.device_id not in usable)
            if busy:
                return (
                    f"all {len(everything)} device(s) of class {want.device_class} wanted, "
                    f"{busy} of them not free{detail}"
                )
            return None
        if len(fitting) < want.count:
            return (
                f"{want.count} device(s) of class {want.device_class} wanted, "
                f"{len(fitting)} free and matching{detail}"
            )
        return None


def _node_selector(
    chosen: Sequence[_Candidate], target: str
) -> tuple[NodeSelectorTerm, ...] | None:
    """The node selector of an allocation on node `target`, as the allocator's
    createNodeSelector makes it: that node, when a device is node-local or binds to its
    node (`bindsToNode`; binding conditions alone do not pin it); else the requirements of the devices' node
    selectors (their slice's, or their own with per-device node selection) together; else
    none (every node)."""
    fields: list[NodeSelectorRequirement] = []
    expressions: list[NodeSelectorRequirement] = []
    for c in chosen:
        s = c.slice
        if s.per_device_node_selection:
            node_name, selector = c.device.node_name, c.device.node_selector
        else:
            node_name, selector = s.node_name, s.node_selector
        if node_name or c.device.binds_to_node:
            return (
                NodeSelectorTerm(
                    match_fields=(
                        NodeSelectorRequirement("metadata.name", "In", (node_name or target,)),
                    )
                ),
            )
        if selector and len(selector) == 1:
            term = selector[0]
            fields.extend(r for r in term.match_fields if r not in fields)
            expressions.extend(r for r in term.match_expressions if r not in expressions)
    if fields or expressions:
        return (NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields)),)
    return None


# Allocations made by the thousand for copies of a pod (`DraState._from_copies`), as
# copies of these with the fields that differ set (without `__init__`).
_NO_DEVICE = AllocatedDevice("", "", "", "")
_NO_ALLOCATION = Allocation()
_new_device = field_replacer(
    AllocatedDevice, ("request", "driver", "pool", "device", "admin_access")
)
_new_allocation = field_replacer(Allocation, ("results", "node_selector"))


def _copy_allocation(
    request: str, device_id: DeviceId, pinned: tuple[NodeSelectorTerm, ...]
) -> Allocation:
    """The allocation of one dedicated device local to a node, pinned there."""
    driver, pool, device = device_id
    found: Allocation = _new_allocation(
        _NO_ALLOCATION, (_new_device(_NO_DEVICE, request, driver, pool, device, False),), pinned
    )
    return found


def _pattern_allocations(
    pattern: _Pattern, ids: Sequence[DeviceId], pinned: tuple[NodeSelectorTerm, ...]
) -> tuple[Allocation, ...]:
    """A copy's allocations on a node of a fresh layout whose devices are `ids`, from their
    positions (`_Copies`): the node's own devices, so each allocation is `pinned` to it."""
    return tuple(
        _new_allocation(
            _NO_ALLOCATION,
            tuple(_new_device(_NO_DEVICE, request, *ids[i], admin) for request, i, admin in results),
            pinned if results else None,
        )
        for results in pattern
    )
# The node selector pinning an allocation to its node, made for every node an estimate adds.
_NO_TERM = NodeSelectorTerm()
_NAME_IN = NodeSelectorRequirement("metadata.name", "In")
_new_fields_term = field_replacer(NodeSelectorTerm, ("match_fields",))
_new_values = field_replacer(NodeSelectorRequirement, ("values",))
# A node's devices as the search sees them, made for every node an estimate adds: every
# field is given, so there is nothing to copy from (None).
_new_candidate = field_replacer(_Candidate, ("device_id", "device", "slice", "taints", "counters"))

# Copies of a slice and of its pool with some fields changed (without `__init__`: a
# template's slices are copied for every node an estimate adds).
_renamed_slice = field_replacer(ResourceSlice, ("name", "node_name", "pool"))
_renamed_pool = field_replacer(Pool, ("name",))


def template_slices(slices: Sequence[ResourceSlice], node_name: str) -> tuple[ResourceSlice, ...]:
    """A live node's slices for a copy of it called `node_name`: each slice renamed, local
    to the new node, in a pool of its own (a new node's devices are its own)."""
    return tuple([
        _renamed_slice(
            s, f"{s.name}-{node_name}", node_name,
            _renamed_pool(s.pool, f"{s.pool.name}-{node_name}"),
        )
        for s in slices
    ])


def with_slices(info: NodeInfo, slices: Sequence[ResourceSlice]) -> NodeInfo:
    """`info` carrying `slices` (renamed for its node)."""
    return replace(info, resource_slices=template_slices(slices, info.node.name))
