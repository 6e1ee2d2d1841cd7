"""Dynamic Resource Allocation (`resource.k8s.io`): devices, the slices that publish them,
device classes and resource claims, reduced to what the scheduler's DynamicResources plugin
needs.

Attribute and capacity names are fully qualified (`<domain>/<name>`): a name written without
a domain in a ResourceSlice belongs to the slice's driver, as Kubernetes defines it, so
`model` of driver `gpu.example.com` is `gpu.example.com/model`. CEL selectors see them as
`device.attributes["gpu.example.com"].model`.

`parse_resource_slice`, `parse_device_class`, `parse_resource_claim` and
`parse_resource_claim_template` read each API version the API server serves, told by
`apiVersion`: v1 and v1beta2 (a device's fields on the device, a request's under
`exactly`), v1beta1 and v1alpha3 (a device's fields under `basic`, a request's on the
request). Capacities are read as `{value: <quantity>}` or, as v1alpha3 wrote them, as plain
quantities. Without `apiVersion`, the shape of each device and request tells. Malformed
input is a `ModelError` naming the object, the field and the expected form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeAlias

from clusterscaler.model.common import ModelError, _dict, _int, _list, _meta, _str, _str_map
from clusterscaler.model.quantity import QuantityError, parse_quantity
from clusterscaler.model.scheduling import (
    NodeSelectorTerm,
    OwnerRef,
    Taint,
    Toleration,
    _parse_owners,
    _parse_tolerations,
    parse_node_selector_terms,
)

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


@dataclass(frozen=True, slots=True, order=False)
class Version:
    """A device attribute of type `version`: a semantic version (semver 2.0.0) string."""

    text: str

    def parts(self) -> tuple[int, int, int, tuple[int | str, ...] | None]:
        """Major, minor, patch and the pre-release identifiers (None for a release)."""
        match = _SEMVER.match(self.text)
        if match is None:
            raise ValueError(f"{self.text!r} is not a semantic version")
        pre = match.group(4)
        identifiers: tuple[int | str, ...] | None = None
        if pre is not None:
            identifiers = tuple(int(p) if p.isdigit() else p for p in pre.split("."))
        return int(match.group(1)), int(match.group(2)), int(match.group(3)), identifiers

    def compare(self, other: Version) -> int:
        """-1, 0 or 1, by semver precedence (build metadata ignored)."""
        a, b = self.parts(), other.parts()
        if a[:3] != b[:3]:
            return -1 if a[:3] < b[:3] else 1
        pa, pb = a[3], b[3]
        if pa == pb:
            return 0
        if pa is None:
            return 1
        if pb is None:
            return -1
        for x, y in zip(pa, pb, strict=False):
            if x == y:
                continue
            if isinstance(x, int) and isinstance(y, int):
                return -1 if x < y else 1
            if isinstance(x, int):
                return -1
            if isinstance(y, int):
                return 1
            return -1 if x < y else 1
        return -1 if len(pa) < len(pb) else 1


AttributeValue = bool | int | str | Version

# A node selector as ResourceSlices and allocations carry it: its terms, ORed (match with
# `node_selector_matches`); an empty tuple matches no node, as upstream.
NodeSelector: TypeAlias = tuple[NodeSelectorTerm, ...]


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A device capacity's `requestPolicy` (consumable capacity): what a request that asks
    for none of it consumes (`default`; None: the whole capacity), and what a request may
    consume: one of `valid_values` (ascending), or from `range_min` up to `range_max` (None:
    no bound) in steps of `range_step` (None: any amount)."""

    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] = ()
    range_min: Fraction | None = None
    range_max: Fraction | None = None
    range_step: Fraction | None = None


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a ResourceSlice: its name, attributes and capacities (exact), and, in
    a slice with `perDeviceNodeSelection`, the nodes that can reach it (`node_name`, or
    `node_selector`, or `all_nodes`). A device that `allow_multiple_allocations` is shared
    by the claims allocated it, each consuming part of its capacities (`capacity_policies`
    say how much a request consumes, by capacity name)."""

    name: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, Fraction] = field(default_factory=dict)
    node_name: str = ""
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    allow_multiple_allocations: bool = False
    capacity_policies: Mapping[str, CapacityPolicy] = field(default_factory=dict)
    # Binding conditions: the scheduler binds a pod given the device only once its driver
    # set these conditions on the claim (and gives up on one of the failure conditions);
    # with `binds_to_node` the allocation is pinned to the node it was made for.
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False


def qualified(name: str, driver: str) -> str:
    """An attribute or capacity name with its domain: the driver's when it has none."""
    return name if "/" in name else f"{driver}/{name}"


# --------------------------------------------------------------------------- the objects


ALLOCATION_MODES = ("ExactCount", "All")
# The effects of device taints Kubernetes defines; others are kept as written, and are to
# be treated as `None` (no effect), as the API asks of consumers.
DEVICE_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")


@dataclass(frozen=True, slots=True)
class Pool:
    """The pool a ResourceSlice belongs to: its name, its generation (slices of an older
    generation are stale) and how many slices the pool has at that generation."""

    name: str
    generation: int = 0
    slice_count: int = 1


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """A ResourceSlice: devices a driver publishes, and the nodes that can reach them.

    Exactly one of `node_name` (the devices are local to that node), `node_selector`
    (reachable from the nodes it selects), `all_nodes` and `per_device_node_selection`
    (each device says, in its own `node_name`, `node_selector` or `all_nodes`) is set by
    Kubernetes. Attribute and capacity names of the
    devices are qualified by `driver` (see the module docstring).

    `device_taints` holds the taints of each device that has any, by device name.
    `shared_counters` holds the slice's counter sets (counter set, counter name, value);
    `device_counters` what each device that consumes counters draws from them (device
    name, counter set, counter name, amount).
    """

    name: str
    driver: str
    pool: Pool
    node_name: str = ""
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    devices: tuple[Device, ...] = ()
    device_taints: Mapping[str, tuple[Taint, ...]] = field(default_factory=dict)
    shared_counters: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)
    device_counters: Mapping[str, Mapping[str, Mapping[str, Fraction]]] = field(
        default_factory=dict
    )
    per_device_node_selection: bool = False

    def __hash__(self) -> int:
        return hash(self.name)


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A DeviceClass: the CEL selectors every device of the class satisfies, and the
    extended resource name (such as `example.com/gpu`) pods may request the class by."""

    name: str
    selectors: tuple[str, ...] = ()
    extended_resource_name: str = ""

    def __hash__(self) -> int:
        return hash(self.name)


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    """One alternative of a request's `firstAvailable` list: the same fields as an exact
    request, without admin access. Its allocation results name the request
    `<request>/<subrequest>`."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = "ExactCount"
    count: int = 1
    tolerations: tuple[Toleration, ...] = ()
    # capacity.requests: how much of each capacity of a shared device it consumes.
    capacity_requests: Mapping[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A request of a claim: `count` devices of a class (or all of them with allocation
    mode `All`) that satisfy every selector, or, when `first_available` is set, the
    first of those alternatives that can be satisfied (the class, selectors and count
    fields then keep their defaults). `tolerations` tolerate device taints."""

    name: str
    device_class_name: str = ""
    selectors: tuple[str, ...] = ()
    allocation_mode: str = "ExactCount"
    count: int = 1
    admin_access: bool = False
    first_available: tuple[DeviceSubRequest, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    # capacity.requests: how much of each capacity of a shared device it consumes.
    capacity_requests: Mapping[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    """A constraint across the devices of some requests (all of the claim's when
    `requests` is empty): the same value of the attribute `match_attribute`, or distinct
    values of `distinct_attribute`. Names are fully qualified, as written."""

    requests: tuple[str, ...] = ()
    match_attribute: str = ""
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """What a claim asks for: its device requests and the constraints between them."""

    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """A device allocated to a claim: the request it satisfies (`<request>/<subrequest>`
    for an alternative of `firstAvailable`), and the device by driver, pool and name.
    With `admin_access` the claim has the device for administration and does not take it:
    other claims may still be allocated it."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    # On a device that allows multiple allocations: this allocation's share of it and
    # what the share consumes of its capacities (name, amount).
    share_id: str = ""
    consumed: tuple[tuple[str, Fraction], ...] = ()


@dataclass(frozen=True, slots=True)
class Allocation:
    """A claim's allocation: the devices and the nodes that can reach them all (`None`:
    every node)."""

    results: tuple[AllocatedDevice, ...] = ()
    node_selector: NodeSelector | None = None


@dataclass(frozen=True, slots=True)
class ConsumerRef:
    """An object a claim is reserved for (a pod, as a rule): resource, name and uid."""

    resource: str
    name: str
    uid: str = ""
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """A ResourceClaim: what it asks for, its allocation (`None` until allocated) and the
    consumers it is reserved for. A claim generated from a template for a pod is owned by
    that pod (`owner_uid`)."""

    namespace: str
    name: str
    uid: str = ""
    spec: ClaimSpec = field(default_factory=ClaimSpec)
    allocation: Allocation | None = None
    reserved_for: tuple[ConsumerRef, ...] = ()
    owners: tuple[OwnerRef, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.namespace, self.name, self.uid))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def owner(self) -> OwnerRef | None:
        """The controlling owner, if any."""
        for o in self.owners:
            if o.controller:
                return o
        return None

    @property
    def owner_uid(self) -> str:
        """The uid of the controlling owner ("" when none)."""
        owner = self.owner
        return owner.uid if owner is not None else ""


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    """A ResourceClaimTemplate: the spec of the claim generated for each pod using it."""

    namespace: str
    name: str
    spec: ClaimSpec = field(default_factory=ClaimSpec)

    def __hash__(self) -> int:
        return hash((self.namespace, self.name))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


# --------------------------------------------------------------------------- parsing

# The API versions of resource.k8s.io and their form: devices' fields directly on the
# device and a request's under `exactly` (v1, v1beta2), or devices' fields under `basic`
# and a request's directly on it (v1beta1, and v1alpha3 before it).
_FLAT_VERSIONS = frozenset({"resource.k8s.io/v1", "resource.k8s.io/v1beta2"})
_NESTED_VERSIONS = frozenset({"resource.k8s.io/v1beta1", "resource.k8s.io/v1alpha3"})
_VERSIONS_FORM = (
    "resource.k8s.io/v1, resource.k8s.io/v1beta2, resource.k8s.io/v1beta1 or "
    "resource.k8s.io/v1alpha3"
)
# The fields of an exact request, on the request (v1beta1) or under `exactly` (v1).
_EXACT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess")


def _nested_form(raw: Mapping[str, Any], obj: str) -> bool | None:
    """Whether the object is of the v1beta1 form (True), the v1 form (False), or, without
    `apiVersion`, to be told by the shape of each device and request (None)."""
    version = raw.get("apiVersion")
    if version is None or version == "":
        return None
    if not isinstance(version, str):
        raise ModelError(obj, "apiVersion", _VERSIONS_FORM, version)
    if version in _FLAT_VERSIONS:
        return False
    if version in _NESTED_VERSIONS:
        return True
    raise ModelError(obj, "apiVersion", _VERSIONS_FORM, version)


def _name(value: Any, obj: str, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ModelError(obj, field, "a non-empty string", value)
    return value


def _bool(value: Any, obj: str, field: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ModelError(obj, field, "true or false", value)
    return value


def _object(value: Any, obj: str, field: str, expected: str) -> dict[str, Any]:
    """`value`, which must be an object (present)."""
    if not isinstance(value, dict):
        raise ModelError(obj, field, expected, value)
    return value


def _quantity(value: Any, obj: str, field: str) -> Fraction:
    """A non-negative quantity, exactly."""
    try:
        parsed = parse_quantity(value, obj=obj, field=field)
    except QuantityError as exc:
        raise ModelError(exc.obj, exc.field, exc.expected, exc.value) from None
    if parsed < 0:
        raise ModelError(obj, field, "a non-negative quantity", value)
    return parsed


def _quantities(value: Any, obj: str, field: str, qualify: str = "") -> dict[str, Fraction]:
    """A map of name to quantity, each written `{value: <quantity>}` (capacities from
    v1beta1 on, counters) or as a plain quantity (capacities of v1alpha3); names are
    qualified by the driver `qualify` when given."""
    out: dict[str, Fraction] = {}
    for name, v in _dict(value, obj, field).items():
        f = f"{field}.{name}"
        if not isinstance(name, str) or not name:
            raise ModelError(obj, f, "a non-empty name", name)
        if isinstance(v, dict):
            amount = _quantity(v.get("value"), obj, f"{f}.value")
        else:
            amount = _quantity(v, obj, f)
        out[qualified(name, qualify) if qualify else name] = amount
    return out


def _capacity_policies(
    value: Any, obj: str, field: str, driver: str
) -> dict[str, CapacityPolicy]:
    """The `requestPolicy` of each capacity that has one (names qualified by the driver)."""
    out: dict[str, CapacityPolicy] = {}
    for name, v in _dict(value, obj, field).items():
        if not isinstance(v, dict) or v.get("requestPolicy") is None:
            continue
        f = f"{field}.{name}.requestPolicy"
        p = _object(v.get("requestPolicy"), obj, f, "an object with default, validValues or validRange")
        default = None if p.get("default") is None else _quantity(p.get("default"), obj, f"{f}.default")
        values = tuple(
            _quantity(q, obj, f"{f}.validValues[{i}]")
            for i, q in enumerate(_list(p.get("validValues"), obj, f"{f}.validValues"))
        )
        if list(values) != sorted(values):
            raise ModelError(obj, f"{f}.validValues", "values in ascending order", p.get("validValues"))
        low = high = step = None
        if p.get("validRange") is not None:
            r = _object(p.get("validRange"), obj, f"{f}.validRange", "an object with min, max and step")
            low = None if r.get("min") is None else _quantity(r.get("min"), obj, f"{f}.validRange.min")
            high = None if r.get("max") is None else _quantity(r.get("max"), obj, f"{f}.validRange.max")
            step = None if r.get("step") is None else _quantity(r.get("step"), obj, f"{f}.validRange.step")
            if step is not None and step <= 0:
                raise ModelError(obj, f"{f}.validRange.step", "a positive quantity", r.get("step"))
        out[qualified(name, driver)] = CapacityPolicy(default, values, low, high, step)
    return out


def _names(value: Any, obj: str, field: str) -> tuple[str, ...]:
    """A list of non-empty strings (condition types)."""
    return tuple(_name(v, obj, f"{field}[{i}]") for i, v in enumerate(_list(value, obj, field)))


def _capacity_requests(value: Any, obj: str, field: str) -> dict[str, Fraction]:
    """`capacity.requests` of a request: name to the amount it asks for."""
    if value is None:
        return {}
    c = _object(value, obj, field, "an object with requests")
    return _quantities(c.get("requests"), obj, f"{field}.requests")


_ATTRIBUTE_TYPES = ("bool", "int", "string", "version")
_ATTRIBUTE_FORM = "an object with exactly one of bool, int, string or version"


def _attribute(value: Any, obj: str, field: str) -> AttributeValue:
    if not isinstance(value, dict):
        raise ModelError(obj, field, _ATTRIBUTE_FORM, value)
    given = [t for t in _ATTRIBUTE_TYPES if value.get(t) is not None]
    if len(given) != 1:
        raise ModelError(obj, field, _ATTRIBUTE_FORM, value)
    kind = given[0]
    v = value[kind]
    f = f"{field}.{kind}"
    if kind == "bool":
        if not isinstance(v, bool):
            raise ModelError(obj, f, "true or false", v)
        return v
    if kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise ModelError(obj, f, "an integer", v)
        return v
    if not isinstance(v, str):
        raise ModelError(obj, f, "a string", v)
    if kind == "string":
        return v
    if not _SEMVER.match(v):
        raise ModelError(obj, f, "a semantic version such as 1.2.3", v)
    return Version(v)


def _attributes(value: Any, driver: str, obj: str, field: str) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    for name, v in _dict(value, obj, field).items():
        f = f"{field}.{name}"
        if not isinstance(name, str) or not name:
            raise ModelError(obj, f, "a non-empty name", name)
        out[qualified(name, driver)] = _attribute(v, obj, f)
    return out


def _device_taints(value: Any, obj: str, field: str) -> tuple[Taint, ...]:
    """A device's taints. Their effect is kept as written: Kubernetes may add effects, and
    consumers must treat one they do not know as `None` (see `DEVICE_TAINT_EFFECTS`)."""
    out = []
    for i, t in enumerate(_list(value, obj, field)):
        f = f"{field}[{i}]"
        t = _object(t, obj, f, "a taint object with key, value and effect")
        key = _name(t.get("key"), obj, f"{f}.key")
        effect = t.get("effect")
        if not isinstance(effect, str) or not effect:
            raise ModelError(
                obj, f"{f}.effect", "one of " + ", ".join(DEVICE_TAINT_EFFECTS), effect
            )
        out.append(Taint(key, _str(t.get("value"), obj, f"{f}.value"), effect))
    return tuple(out)


def _counter_sets(
    value: Any, obj: str, field: str, name_key: str
) -> dict[str, dict[str, Fraction]]:
    """`sharedCounters` (`name_key` "name") or a device's `consumesCounters` ("counterSet"):
    counter set name, counter name, value. A set named twice adds up."""
    out: dict[str, dict[str, Fraction]] = {}
    for i, s in enumerate(_list(value, obj, field)):
        f = f"{field}[{i}]"
        s = _object(s, obj, f, f"an object with {name_key} and counters")
        name = _name(s.get(name_key), obj, f"{f}.{name_key}")
        counters = out.setdefault(name, {})
        for counter, amount in _quantities(s.get("counters"), obj, f"{f}.counters").items():
            counters[counter] = counters.get(counter, Fraction(0)) + amount
    return out


def _node_selector(value: Any, obj: str, field: str) -> NodeSelector | None:
    if value is None:
        return None
    selector = _object(value, obj, field, "a node selector object with nodeSelectorTerms")
    return parse_node_selector_terms(
        selector.get("nodeSelectorTerms"), obj, f"{field}.nodeSelectorTerms"
    )


@dataclass(slots=True)
class _SliceDevices:
    devices: list[Device] = field(default_factory=list)
    taints: dict[str, tuple[Taint, ...]] = field(default_factory=dict)
    counters: dict[str, dict[str, dict[str, Fraction]]] = field(default_factory=dict)


def _parse_devices(
    value: Any, driver: str, nested: bool | None, obj: str, out: _SliceDevices
) -> None:
    seen: set[str] = set()
    for i, d in enumerate(_list(value, obj, "spec.devices")):
        f = f"spec.devices[{i}]"
        d = _object(d, obj, f, "a device object with a name")
        name = _name(d.get("name"), obj, f"{f}.name")
        if name in seen:
            raise ModelError(obj, f"{f}.name", "a device name unique in the slice", name)
        seen.add(name)
        is_nested = "basic" in d if nested is None else nested
        if is_nested:
            if "attributes" in d or "capacity" in d:
                raise ModelError(
                    obj, f, "attributes and capacity under basic (the v1beta1 form)", sorted(d)
                )
            body_field = f"{f}.basic"
            body = _dict(d.get("basic"), obj, body_field)
        else:
            if "basic" in d:
                raise ModelError(
                    obj,
                    f"{f}.basic",
                    "attributes and capacity on the device itself (basic is the v1beta1 "
                    "form; this object's apiVersion is of v1 or v1beta2)",
                )
            body_field, body = f, d
        attributes = _attributes(body.get("attributes"), driver, obj, f"{body_field}.attributes")
        capacity = _quantities(body.get("capacity"), obj, f"{body_field}.capacity", driver)
        # Where the device is reachable, read only in a slice with perDeviceNodeSelection.
        out.devices.append(
            Device(
                name,
                attributes,
                capacity,
                _str(body.get("nodeName"), obj, f"{body_field}.nodeName"),
                _node_selector(body.get("nodeSelector"), obj, f"{body_field}.nodeSelector"),
                _bool(body.get("allNodes"), obj, f"{body_field}.allNodes"),
                _bool(
                    body.get("allowMultipleAllocations"),
                    obj,
                    f"{body_field}.allowMultipleAllocations",
                ),
                _capacity_policies(
                    body.get("capacity"), obj, f"{body_field}.capacity", driver
                ),
                _names(body.get("bindingConditions"), obj, f"{body_field}.bindingConditions"),
                _names(
                    body.get("bindingFailureConditions"),
                    obj,
                    f"{body_field}.bindingFailureConditions",
                ),
                _bool(body.get("bindsToNode"), obj, f"{body_field}.bindsToNode"),
            )
        )
        taints = _device_taints(body.get("taints"), obj, f"{body_field}.taints")
        if taints:
            out.taints[name] = taints
        consumed = _counter_sets(
            body.get("consumesCounters"), obj, f"{body_field}.consumesCounters", "counterSet"
        )
        if consumed:
            out.counters[name] = consumed


def parse_resource_slice(raw: Mapping[str, object]) -> ResourceSlice:
    """Parse a ResourceSlice of resource.k8s.io v1, v1beta2 or v1beta1."""
    meta, obj = _meta(raw, "ResourceSlice", namespaced=False)
    nested = _nested_form(raw, obj)
    spec = _object(raw.get("spec"), obj, "spec", "an object with driver, pool and devices")
    driver = _name(spec.get("driver"), obj, "spec.driver")
    pool_raw = _object(spec.get("pool"), obj, "spec.pool", "an object with name and generation")
    pool = Pool(
        _name(pool_raw.get("name"), obj, "spec.pool.name"),
        _int(pool_raw.get("generation"), obj, "spec.pool.generation", 0),
        _int(pool_raw.get("resourceSliceCount"), obj, "spec.pool.resourceSliceCount", 1),
    )
    devices = _SliceDevices()
    _parse_devices(spec.get("devices"), driver, nested, obj, devices)
    return ResourceSlice(
        name=meta["name"],
        driver=driver,
        pool=pool,
        node_name=_str(spec.get("nodeName"), obj, "spec.nodeName"),
        node_selector=_node_selector(spec.get("nodeSelector"), obj, "spec.nodeSelector"),
        all_nodes=_bool(spec.get("allNodes"), obj, "spec.allNodes"),
        devices=tuple(devices.devices),
        device_taints=devices.taints,
        shared_counters=_counter_sets(
            spec.get("sharedCounters"), obj, "spec.sharedCounters", "name"
        ),
        device_counters=devices.counters,
        per_device_node_selection=_bool(
            spec.get("perDeviceNodeSelection"), obj, "spec.perDeviceNodeSelection"
        ),
    )


def _selectors(value: Any, obj: str, field: str) -> tuple[str, ...]:
    """The CEL expressions of a list of device selectors (`[{cel: {expression}}]`)."""
    out = []
    for i, s in enumerate(_list(value, obj, field)):
        f = f"{field}[{i}]"
        s = _object(s, obj, f, "a selector object with cel.expression")
        cel = _object(s.get("cel"), obj, f"{f}.cel", "an object with expression")
        out.append(_name(cel.get("expression"), obj, f"{f}.cel.expression"))
    return tuple(out)


def parse_device_class(raw: Mapping[str, Any]) -> DeviceClass:
    """Parse a DeviceClass of resource.k8s.io v1, v1beta2 or v1beta1 (one form)."""
    meta, obj = _meta(raw, "DeviceClass", namespaced=False)
    _nested_form(raw, obj)
    spec = _dict(raw.get("spec"), obj, "spec")
    return DeviceClass(
        name=meta["name"],
        selectors=_selectors(spec.get("selectors"), obj, "spec.selectors"),
        extended_resource_name=_str(
            spec.get("extendedResourceName"), obj, "spec.extendedResourceName"
        ),
    )


def _allocation_mode_and_count(fields: Mapping[str, Any], obj: str, prefix: str) -> tuple[str, int]:
    mode = fields.get("allocationMode") or "ExactCount"
    if mode not in ALLOCATION_MODES:
        raise ModelError(obj, f"{prefix}.allocationMode", "ExactCount or All", mode)
    count = _int(fields.get("count"), obj, f"{prefix}.count", 1)
    if mode == "ExactCount" and count < 1:
        raise ModelError(obj, f"{prefix}.count", "an integer >= 1", count)
    return mode, count


def _tolerations(value: Any, obj: str, field: str) -> tuple[Toleration, ...]:
    return _parse_tolerations(value, obj, field) if value else ()


def _sub_request(value: Any, obj: str, field: str) -> DeviceSubRequest:
    r = _object(value, obj, field, "an object with name and deviceClassName")
    mode, count = _allocation_mode_and_count(r, obj, field)
    return DeviceSubRequest(
        name=_name(r.get("name"), obj, f"{field}.name"),
        device_class_name=_name(r.get("deviceClassName"), obj, f"{field}.deviceClassName"),
        selectors=_selectors(r.get("selectors"), obj, f"{field}.selectors"),
        allocation_mode=mode,
        count=count,
        tolerations=_tolerations(r.get("tolerations"), obj, f"{field}.tolerations"),
        capacity_requests=_capacity_requests(r.get("capacity"), obj, f"{field}.capacity"),
    )


def _request(value: Any, nested: bool | None, obj: str, field: str) -> DeviceRequest:
    r = _object(value, obj, field, "a request object with a name")
    name = _name(r.get("name"), obj, f"{field}.name")
    if nested is None:
        nested = "exactly" not in r
    exact: dict[str, Any] | None
    if nested:
        if "exactly" in r:
            raise ModelError(
                obj,
                f"{field}.exactly",
                "deviceClassName and the other fields on the request itself (exactly is the "
                "form of v1 and v1beta2; this object's apiVersion is v1beta1)",
            )
        exact_field = field
        exact = r if any(r.get(k) is not None for k in _EXACT_FIELDS) else None
    else:
        flat = [k for k in _EXACT_FIELDS if k in r]
        if flat:
            raise ModelError(
                obj,
                f"{field}.{flat[0]}",
                f"exactly.{flat[0]} (fields on the request itself are the v1beta1 form; this "
                "object's apiVersion is of v1 or v1beta2)",
            )
        exact_field = f"{field}.exactly"
        raw_exact = r.get("exactly")
        exact = (
            None
            if raw_exact is None
            else _object(raw_exact, obj, exact_field, "an object with deviceClassName")
        )
    first_raw = r.get("firstAvailable")
    if first_raw:
        if exact is not None:
            raise ModelError(
                obj,
                field,
                "either an exact request (deviceClassName ...) or firstAvailable, not both",
            )
        first = tuple(
            _sub_request(s, obj, f"{field}.firstAvailable[{i}]")
            for i, s in enumerate(_list(first_raw, obj, f"{field}.firstAvailable"))
        )
        return DeviceRequest(
            name,
            first_available=first,
            tolerations=_tolerations(r.get("tolerations"), obj, f"{field}.tolerations"),
        )
    if exact is None:
        where = f"{field}.deviceClassName" if nested else exact_field
        raise ModelError(
            obj,
            where,
            "a device class name" if nested else "an object with deviceClassName",
            hint="or firstAvailable on the request",
        )
    mode, count = _allocation_mode_and_count(exact, obj, exact_field)
    return DeviceRequest(
        name=name,
        device_class_name=_name(
            exact.get("deviceClassName"), obj, f"{exact_field}.deviceClassName"
        ),
        selectors=_selectors(exact.get("selectors"), obj, f"{exact_field}.selectors"),
        allocation_mode=mode,
        count=count,
        admin_access=_bool(exact.get("adminAccess"), obj, f"{exact_field}.adminAccess"),
        tolerations=_tolerations(exact.get("tolerations"), obj, f"{exact_field}.tolerations"),
        capacity_requests=_capacity_requests(
            exact.get("capacity"), obj, f"{exact_field}.capacity"
        ),
    )


def _constraint(value: Any, obj: str, field: str) -> DeviceConstraint:
    c = _object(value, obj, field, "a constraint object with requests and matchAttribute")
    requests = _list(c.get("requests"), obj, f"{field}.requests")
    for i, name in enumerate(requests):
        _name(name, obj, f"{field}.requests[{i}]")
    return DeviceConstraint(
        tuple(requests),
        _str(c.get("matchAttribute"), obj, f"{field}.matchAttribute"),
        _str(c.get("distinctAttribute"), obj, f"{field}.distinctAttribute"),
    )


def _claim_spec(value: Any, nested: bool | None, obj: str, field: str) -> ClaimSpec:
    spec = _dict(value, obj, field)
    devices = _dict(spec.get("devices"), obj, f"{field}.devices")
    rf = f"{field}.devices.requests"
    requests = []
    seen: set[str] = set()
    for i, r in enumerate(_list(devices.get("requests"), obj, rf)):
        request = _request(r, nested, obj, f"{rf}[{i}]")
        if request.name in seen:
            raise ModelError(
                obj, f"{rf}[{i}].name", "a request name unique in the claim", request.name
            )
        seen.add(request.name)
        requests.append(request)
    cf = f"{field}.devices.constraints"
    constraints = tuple(
        _constraint(c, obj, f"{cf}[{i}]")
        for i, c in enumerate(_list(devices.get("constraints"), obj, cf))
    )
    return ClaimSpec(tuple(requests), constraints)


def _allocation(value: Any, obj: str) -> Allocation | None:
    if value is None:
        return None
    field = "status.allocation"
    a = _object(value, obj, field, "an allocation object with devices")
    devices = _dict(a.get("devices"), obj, f"{field}.devices")
    rf = f"{field}.devices.results"
    results = []
    for i, r in enumerate(_list(devices.get("results"), obj, rf)):
        f = f"{rf}[{i}]"
        r = _object(r, obj, f, "an object with request, driver, pool and device")
        results.append(
            AllocatedDevice(
                _name(r.get("request"), obj, f"{f}.request"),
                _name(r.get("driver"), obj, f"{f}.driver"),
                _name(r.get("pool"), obj, f"{f}.pool"),
                _name(r.get("device"), obj, f"{f}.device"),
                _bool(r.get("adminAccess"), obj, f"{f}.adminAccess"),
                _str(r.get("shareID"), obj, f"{f}.shareID"),
                tuple(
                    _quantities(
                        r.get("consumedCapacity"),
                        obj,
                        f"{f}.consumedCapacity",
                        _name(r.get("driver"), obj, f"{f}.driver"),
                    ).items()
                ),
            )
        )
    return Allocation(
        tuple(results), _node_selector(a.get("nodeSelector"), obj, f"{field}.nodeSelector")
    )


def _reserved_for(value: Any, obj: str) -> tuple[ConsumerRef, ...]:
    out = []
    for i, c in enumerate(_list(value, obj, "status.reservedFor")):
        f = f"status.reservedFor[{i}]"
        c = _object(c, obj, f, "an object with resource, name and uid")
        out.append(
            ConsumerRef(
                _name(c.get("resource"), obj, f"{f}.resource"),
                _name(c.get("name"), obj, f"{f}.name"),
                _str(c.get("uid"), obj, f"{f}.uid"),
                _str(c.get("apiGroup"), obj, f"{f}.apiGroup"),
            )
        )
    return tuple(out)


def parse_resource_claim(raw: Mapping[str, Any]) -> ResourceClaim:
    """Parse a ResourceClaim of resource.k8s.io v1, v1beta2 or v1beta1."""
    meta, obj = _meta(raw, "ResourceClaim", namespaced=True)
    nested = _nested_form(raw, obj)
    status = _dict(raw.get("status"), obj, "status")
    return ResourceClaim(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        uid=_str(meta.get("uid"), obj, "metadata.uid"),
        spec=_claim_spec(raw.get("spec"), nested, obj, "spec"),
        allocation=_allocation(status.get("allocation"), obj),
        reserved_for=_reserved_for(status.get("reservedFor"), obj),
        owners=_parse_owners(meta, obj),
        annotations=_str_map(meta.get("annotations"), obj, "metadata.annotations"),
    )


def parse_resource_claim_template(raw: Mapping[str, Any]) -> ResourceClaimTemplate:
    """Parse a ResourceClaimTemplate of resource.k8s.io v1, v1beta2 or v1beta1."""
    meta, obj = _meta(raw, "ResourceClaimTemplate", namespaced=True)
    nested = _nested_form(raw, obj)
    spec = _dict(raw.get("spec"), obj, "spec")
    return ResourceClaimTemplate(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        spec=_claim_spec(spec.get("spec"), nested, obj, "spec.spec"),
    )


def parse_template_slice(raw: Mapping[str, object]) -> ResourceSlice:
    """A ResourceSlice a node group declares for its template (scale from zero): the devices
    a DRA driver will publish for each new node. Read as `parse_resource_slice` reads it;
    it must be node-local (`spec.nodeName`, any value: it becomes the new node's, or none),
    as Cluster Autoscaler supports only node-local devices for new nodes."""
    found = parse_resource_slice(raw)
    if found.all_nodes or found.node_selector is not None or found.per_device_node_selection:
        _, obj = _meta(raw, "ResourceSlice", namespaced=False)
        field = (
            "spec.allNodes" if found.all_nodes
            else "spec.nodeSelector" if found.node_selector is not None
            else "spec.perDeviceNodeSelection"
        )
        raise ModelError(
            obj, field,
            "a node-local slice (spec.nodeName, or no node field): a template declares the "
            "devices of its own node",
        )
    return found
