"""Dynamic Resource Allocation in the simulation: the scheduler's DynamicResources filter and
its Reserve step, over the devices the cluster's ResourceSlices publish.

`DraState` is the snapshot's view of DRA: the slices reachable from each node, the device
classes, the claims (and templates) by key, which claim each device is allocated to, and
which pods in the snapshot use each claim. For a pod and a node, `allocate` says which
devices the pod's claims would get there (or why none can be found), as the scheduler's
allocator does:

- a claim already allocated stays where it is: the pod fits only nodes its allocation's
  node selector matches;
- an unallocated claim (a ResourceClaim not allocated yet, or the claim a template will make
  for the pod) gets, for each request, `count` devices (`All`: every matching device, at least
  one) among the devices the node can reach that no other claim holds, whose DeviceClass
  selectors and request selectors (CEL) are true; `firstAvailable` tries its subrequests in
  order; `matchAttribute` constraints need one value of the attribute across the devices of
  the requests they name (a search over choices, bounded);
- a device whose selector cannot be evaluated does not match, and the reason is kept.

`reserve` records an allocation in the snapshot (through the snapshot's journal, so a
fork's revert undoes it) and `release` undoes what a pod held: a claim generated for the pod
(owned by it) is freed when the pod leaves, as the ResourceClaim controller deletes it with
the pod; a shared claim keeps its allocation, so a pod of it can only move where the claim
is allocated.

Not simulated (the pod is then judged by the rest): device taints and tolerations,
consumable counters of partitionable devices, admin access (treated as a normal request),
`distinctAttribute` constraints, per-device node selection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from clusterscaler.model.dra import (
    AllocatedDevice,
    Allocation,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceSubRequest,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from clusterscaler.model.scheduling import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    node_selector_matches,
)

if TYPE_CHECKING:
    from clusterscaler.model import Node, NodeInfo, Pod

# The reasons kube-scheduler's DynamicResources plugin gives, as CA reports them.
REASON_DRA = "cannot allocate all claims"
REASON_CLAIM_ELSEWHERE = "resourceclaim not available on the node"
REASON_CLAIM_MISSING = "waiting for resource claim to be created"

DeviceId = tuple[str, str, str]  # driver, pool, device
# How many choices the search for `matchAttribute` constraints tries before giving up.
SEARCH_LIMIT = 10_000
# A device without the attribute a constraint or grouping names.
_MISSING = object()


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
class _Candidate:
    device_id: DeviceId
    device: Device


@dataclass
class DraState:
    """The DRA objects of a snapshot and the allocations simulated on top of them."""

    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    node_slices: dict[str, list[ResourceSlice]] = field(default_factory=dict)
    shared_slices: list[ResourceSlice] = field(default_factory=list)
    # The allocation of each claim now (from its status, then as simulated).
    allocations: dict[str, Allocation] = field(default_factory=dict)
    # Which claim holds each device.
    allocated: dict[DeviceId, str] = field(default_factory=dict)
    # The snapshot's pods that use each claim.
    consumers: dict[str, set[str]] = field(default_factory=dict)

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
            elif s.node_selector is not None or s.all_nodes:
                state.shared_slices.append(s)
        for claim in state.claims.values():
            if claim.allocation is not None:
                state.allocations[claim.key] = claim.allocation
                for result in claim.allocation.results:
                    state.allocated[(result.driver, result.pool, result.device)] = claim.key
        return state

    # ------------------------------------------------------------------ nodes

    def add_node_slices(self, node_name: str, slices: Sequence[ResourceSlice]) -> Callable[[], None]:
        """Publish `slices` (a template's, renamed) for a new node; returns the undo."""
        if not slices:
            return _nothing
        self.node_slices[node_name] = list(slices)

        def undo() -> None:
            self.node_slices.pop(node_name, None)

        return undo

    def slices_of(self, node_name: str) -> list[ResourceSlice]:
        """The node-local slices of a node (a template copies them)."""
        return list(self.node_slices.get(node_name, ()))

    def _reachable(self, node: Node) -> list[ResourceSlice]:
        out = list(self.node_slices.get(node.name, ()))
        for s in self.shared_slices:
            if s.all_nodes or (
                s.node_selector is not None
                and node_selector_matches(s.node_selector, node.name, node.labels)
            ):
                out.append(s)
        return out

    # ------------------------------------------------------------------ claims of a pod

    def pod_claims(self, pod: Pod) -> list[PodClaim] | str:
        """The claims of `pod`, or why one cannot be found."""
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
            out.append(PodClaim(f"{pod.key}#{pc.name}", template.spec, None, True))
        return out

    # ------------------------------------------------------------------ the filter

    def allocate(self, pod: Pod, node: Node) -> dict[str, Allocation] | str:
        """The allocations `pod`'s unallocated claims would get on `node` (by claim key),
        or the reason they cannot."""
        claims = self.pod_claims(pod)
        if isinstance(claims, str):
            return claims
        out: dict[str, Allocation] = {}
        taken: set[DeviceId] = set()
        reachable: list[ResourceSlice] | None = None
        for claim in claims:
            current = self.allocations.get(claim.key)
            if current is not None:
                if current.node_selector is not None and not node_selector_matches(
                    current.node_selector, node.name, node.labels
                ):
                    return f"{REASON_CLAIM_ELSEWHERE}: {claim.key} is allocated to other nodes"
                continue
            if claim.key in out:
                continue
            if reachable is None:
                reachable = self._reachable(node)
            found = self._allocate_claim(claim, node, reachable, taken)
            if isinstance(found, str):
                return f"{REASON_DRA}: {found}"
            out[claim.key] = found
            taken.update((r.driver, r.pool, r.device) for r in found.results)
        return out

    def _free(self, slices: Sequence[ResourceSlice], taken: set[DeviceId]) -> list[_Candidate]:
        return [
            _Candidate(device_id, d)
            for s in slices
            for d in s.devices
            if (device_id := (s.driver, s.pool.name, d.name)) not in self.allocated
            and device_id not in taken
        ]

    def _allocate_claim(
        self, claim: PodClaim, node: Node, slices: Sequence[ResourceSlice], taken: set[DeviceId]
    ) -> Allocation | str:
        free = self._free(slices, taken)
        options: list[list[list[_Candidate]]] = []  # per request: its acceptable device sets
        names: list[str] = []
        for request in claim.spec.requests:
            grouping = tuple(
                c.match_attribute for c in claim.spec.constraints
                if c.match_attribute and (not c.requests or request.name in c.requests)
            )
            choices = self._request_choices(request, free, grouping)
            if isinstance(choices, str):
                return f"claim {claim.key}: request {request.name}: {choices}"
            options.append(choices)
            names.append(request.name)
        chosen = _search(options, names, claim.spec)
        if chosen is None:
            return f"claim {claim.key}: no devices meet the claim's constraints"
        results = tuple(
            AllocatedDevice(name, c.device_id[0], c.device_id[1], c.device_id[2])
            for name, devices in zip(names, chosen, strict=True)
            for c in devices
        )
        node_local = all(self._is_local(node.name, r) for r in results)
        selector = (
            (NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (node.name,)),)),)
            if node_local and results
            else None
        )
        return Allocation(results, selector)

    def _is_local(self, node_name: str, result: AllocatedDevice) -> bool:
        return any(
            s.driver == result.driver and s.pool.name == result.pool
            for s in self.node_slices.get(node_name, ())
        )

    def _request_choices(
        self, request: DeviceRequest, free: Sequence[_Candidate], grouping: tuple[str, ...] = ()
    ) -> list[list[_Candidate]] | str:
        """The device sets that would satisfy `request` (first available subrequest first)."""
        subrequests: Sequence[DeviceRequest | DeviceSubRequest] = request.first_available or (request,)
        reasons: list[str] = []
        sets: list[list[_Candidate]] = []
        for sub in subrequests:
            matching = self._matching(sub, free)
            if isinstance(matching, str):
                reasons.append(matching)
                continue
            if sub.allocation_mode == "All":
                if matching:
                    sets.append(matching)
                else:
                    reasons.append(f"no device of class {sub.device_class_name} is free")
                continue
            if len(matching) < sub.count:
                reasons.append(
                    f"{sub.count} device(s) of class {sub.device_class_name} wanted, "
                    f"{len(matching)} free and matching"
                )
                continue
            # Devices alike in the constrained attributes first: a `matchAttribute`
            # constraint is met within one such group.
            for group in _groups(matching, grouping):
                if len(group) >= sub.count:
                    sets.extend(_windows(group, sub.count))
        return sets if sets else "; ".join(reasons) or "no devices"

    def _matching(
        self, request: DeviceRequest | DeviceSubRequest, free: Sequence[_Candidate]
    ) -> list[_Candidate] | str:
        device_class = self.classes.get(request.device_class_name)
        if device_class is None:
            return f'deviceclass "{request.device_class_name}" not found'
        selectors = (*device_class.selectors, *request.selectors)
        out: list[_Candidate] = []
        for c in free:
            if all(_selected(expr, c) for expr in selectors):
                out.append(c)
        return out

    # ------------------------------------------------------------------ reserve / release

    def reserve(self, pod: Pod, allocations: Mapping[str, Allocation]) -> Callable[[], None]:
        """Record `allocations` (from `allocate`) and `pod` as a consumer of its claims;
        returns the undo."""
        claims = self.pod_claims(pod)
        keys = [c.key for c in claims] if not isinstance(claims, str) else []
        for key, allocation in allocations.items():
            self.allocations[key] = allocation
            for r in allocation.results:
                self.allocated[(r.driver, r.pool, r.device)] = key
        added = [k for k in keys if pod.key not in self.consumers.get(k, set())]
        for key in added:
            self.consumers.setdefault(key, set()).add(pod.key)

        def undo() -> None:
            for key in added:
                self.consumers.get(key, set()).discard(pod.key)
            for key, allocation in allocations.items():
                self.allocations.pop(key, None)
                for r in allocation.results:
                    self.allocated.pop((r.driver, r.pool, r.device), None)

        return undo

    def release(self, pod: Pod) -> Callable[[], None]:
        """`pod` leaves its node: it no longer uses its claims, and a claim of its own that
        nobody else uses is freed. Returns the undo."""
        claims = self.pod_claims(pod)
        if isinstance(claims, str):
            return _nothing
        left: list[str] = []
        freed: dict[str, Allocation] = {}
        for claim in claims:
            users = self.consumers.get(claim.key)
            if users is not None and pod.key in users:
                users.discard(pod.key)
                left.append(claim.key)
            if claim.owned and not self.consumers.get(claim.key):
                allocation = self.allocations.pop(claim.key, None)
                if allocation is not None:
                    freed[claim.key] = allocation
                    for r in allocation.results:
                        self.allocated.pop((r.driver, r.pool, r.device), None)

        def undo() -> None:
            for key in left:
                self.consumers.setdefault(key, set()).add(pod.key)
            for key, allocation in freed.items():
                self.allocations[key] = allocation
                for r in allocation.results:
                    self.allocated[(r.driver, r.pool, r.device)] = key

        return undo


def _nothing() -> None:
    return None


def _current(slices: Iterable[ResourceSlice]) -> list[ResourceSlice]:
    """Slices of each pool's newest generation only (older ones are being replaced)."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s.driver, s.pool.name)
        newest[key] = max(newest.get(key, s.pool.generation), s.pool.generation)
    return [s for s in slices if s.pool.generation == newest[(s.driver, s.pool.name)]]


def _selected(expression: str, candidate: _Candidate) -> bool:
    # Imported when a device is first matched: the CEL runtime is large, and most runs of
    # the CLI never meet a claim.
    from clusterscaler.simulator.dra_cel import SelectorError, compile_selector

    try:
        return compile_selector(expression).matches(
            candidate.device_id[0], candidate.device.attributes, candidate.device.capacity
        )
    except SelectorError:
        # As the scheduler: a selector that cannot be evaluated for a device rules it out.
        return False


def _groups(matching: Sequence[_Candidate], attributes: tuple[str, ...]) -> list[list[_Candidate]]:
    """`matching` split by the values of `attributes` (one group when there are none)."""
    if not attributes:
        return [list(matching)]
    groups: dict[tuple[object, ...], list[_Candidate]] = {}
    for c in matching:
        key = tuple(c.device.attributes.get(a, _MISSING) for a in attributes)
        groups.setdefault(key, []).append(c)
    return list(groups.values())


def _windows(matching: Sequence[_Candidate], count: int) -> list[list[_Candidate]]:
    """Sets of `count` devices to try: the first `count`, then sliding along the list (the
    search for constraints tries them in order)."""
    if len(matching) == count:
        return [list(matching)]
    return [list(matching[i : i + count]) for i in range(len(matching) - count + 1)]


def _search(
    options: Sequence[Sequence[list[_Candidate]]], names: Sequence[str], spec: ClaimSpec
) -> list[list[_Candidate]] | None:
    """One device set per request, disjoint, meeting the `matchAttribute` constraints."""
    constraints = [c for c in spec.constraints if c.match_attribute]
    chosen: list[list[_Candidate]] = []
    used: set[DeviceId] = set()
    tries = 0

    def meets() -> bool:
        for constraint in constraints:
            scope = set(constraint.requests) or set(names)
            values = {
                c.device.attributes.get(constraint.match_attribute, _MISSING)
                for name, devices in zip(names, chosen, strict=False)
                if name in scope
                for c in devices
            }
            if _MISSING in values or len(values) > 1:
                return False
        return True

    def step(i: int) -> bool:
        nonlocal tries
        if i == len(options):
            return True
        for devices in options[i]:
            tries += 1
            if tries > SEARCH_LIMIT:
                return False
            ids = {c.device_id for c in devices}
            if ids & used:
                continue
            chosen.append(devices)
            used.update(ids)
            if meets() and step(i + 1):
                return True
            chosen.pop()
            used.difference_update(ids)
        return False

    return chosen if step(0) else None



def template_slices(slices: Sequence[ResourceSlice], node_name: str) -> tuple[ResourceSlice, ...]:
    """A live node's slices for a copy of it called `node_name`: each slice renamed, local
    to the new node, in a pool of its own (a new node's devices are its own)."""
    return tuple(
        replace(s, name=f"{s.name}-{node_name}", node_name=node_name,
                pool=replace(s.pool, name=f"{s.pool.name}-{node_name}"))
        for s in slices
    )


def with_slices(info: NodeInfo, slices: Sequence[ResourceSlice]) -> NodeInfo:
    """`info` carrying `slices` (renamed for its node)."""
    return replace(info, resource_slices=template_slices(slices, info.node.name))
