"""`Resources`: requests and capacity as integer vectors (milli-CPU, bytes, counts, extended resources), exact and cheap to add and compare."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypedDict, Unpack

from clusterscaler.model.common import _CACHE_LIMIT, ModelError
from clusterscaler.model.quantity import (
    QuantityError,
    format_bytes,
    format_cpu,
    parse_cpu_millis,
    parse_int_quantity,
)

# --------------------------------------------------------------------------- resources

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
# The extended resource of NVIDIA GPUs: what the autoscaler counts as a node's GPUs.
GPU_RESOURCE = "nvidia.com/gpu"
_EMPTY: Mapping[str, int] = {}


class Resources:
    """An immutable vector of integer resource amounts.

    `cpu` is in milli-cores, `memory` and `ephemeral_storage` in bytes, `pods` a count,
    `extended` maps other Kubernetes resource names (`nvidia.com/gpu`, `hugepages-2Mi`) to
    integer amounts. Zero-valued extended entries are dropped so equal vectors compare equal.
    """

    __slots__ = ("_hash", "cpu", "ephemeral_storage", "extended", "memory", "pods")

    cpu: int
    memory: int
    pods: int
    ephemeral_storage: int
    extended: Mapping[str, int]
    _hash: int | None
    ZERO: ClassVar[Resources]

    def __init__(
        self,
        cpu: int = 0,
        memory: int = 0,
        pods: int = 0,
        ephemeral_storage: int = 0,
        extended: Mapping[str, int] | None = None,
    ) -> None:
        object.__setattr__(self, "cpu", cpu)
        object.__setattr__(self, "memory", memory)
        object.__setattr__(self, "pods", pods)
        object.__setattr__(self, "ephemeral_storage", ephemeral_storage)
        if extended:
            ext = {k: v for k, v in extended.items() if v}
            object.__setattr__(self, "extended", ext if ext else _EMPTY)
        else:
            object.__setattr__(self, "extended", _EMPTY)
        object.__setattr__(self, "_hash", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Resources is immutable (tried to set {name})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            Resources,
            (self.cpu, self.memory, self.pods, self.ephemeral_storage, dict(self.extended)),
        )

    def __repr__(self) -> str:
        parts = [f"cpu={self.cpu}", f"memory={self.memory}", f"pods={self.pods}"]
        if self.ephemeral_storage:
            parts.append(f"ephemeral_storage={self.ephemeral_storage}")
        if self.extended:
            parts.append(f"extended={dict(self.extended)!r}")
        return f"Resources({', '.join(parts)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return (
            self.cpu == other.cpu
            and self.memory == other.memory
            and self.pods == other.pods
            and self.ephemeral_storage == other.ephemeral_storage
            and self.extended == other.extended
        )

    def __hash__(self) -> int:
        h: int | None = self._hash
        if h is None:
            h = hash(
                (
                    self.cpu,
                    self.memory,
                    self.pods,
                    self.ephemeral_storage,
                    frozenset(self.extended.items()),
                )
            )
            object.__setattr__(self, "_hash", h)
        return h

    def __add__(self, other: Resources) -> Resources:
        if not isinstance(other, Resources):
            return NotImplemented
        ext: Mapping[str, int] | None = None
        if other.extended:
            if self.extended:
                merged = dict(self.extended)
                for k, v in other.extended.items():
                    merged[k] = merged.get(k, 0) + v
                ext = merged
            else:
                ext = other.extended
        elif self.extended:
            ext = self.extended
        return Resources(
            self.cpu + other.cpu,
            self.memory + other.memory,
            self.pods + other.pods,
            self.ephemeral_storage + other.ephemeral_storage,
            ext,
        )

    def __sub__(self, other: Resources) -> Resources:
        if not isinstance(other, Resources):
            return NotImplemented
        ext: Mapping[str, int] | None = self.extended
        if other.extended:
            merged = dict(self.extended)
            for k, v in other.extended.items():
                merged[k] = merged.get(k, 0) - v
            ext = merged
        return Resources(
            self.cpu - other.cpu,
            self.memory - other.memory,
            self.pods - other.pods,
            self.ephemeral_storage - other.ephemeral_storage,
            ext,
        )

    def __mul__(self, factor: int) -> Resources:
        return Resources(
            self.cpu * factor,
            self.memory * factor,
            self.pods * factor,
            self.ephemeral_storage * factor,
            {k: v * factor for k, v in self.extended.items()},
        )

    __rmul__ = __mul__

    def fits(self, other: Resources) -> bool:
        """Whether this request fits into `other` (free capacity) in every dimension."""
        if (
            self.cpu > other.cpu
            or self.memory > other.memory
            or self.pods > other.pods
            or self.ephemeral_storage > other.ephemeral_storage
        ):
            return False
        if self.extended:
            oext = other.extended
            for k, v in self.extended.items():
                if v > oext.get(k, 0):
                    return False
        return True

    def insufficient(self, free: Resources) -> list[str]:
        """Kubernetes names of the resources this request does not fit into `free`."""
        out: list[str] = []
        if self.pods > free.pods:
            out.append(PODS)
        if self.cpu > free.cpu:
            out.append(CPU)
        if self.memory > free.memory:
            out.append(MEMORY)
        if self.ephemeral_storage > free.ephemeral_storage:
            out.append(EPHEMERAL_STORAGE)
        for k, v in sorted(self.extended.items()):
            if v > free.extended.get(k, 0):
                out.append(k)
        return out

    def is_zero(self) -> bool:
        return not (self.cpu or self.memory or self.pods or self.ephemeral_storage or self.extended)

    def get(self, name: str) -> int:
        """Amount of a resource by its Kubernetes name (`cpu` in milli-cores)."""
        if name == CPU:
            return self.cpu
        if name == MEMORY:
            return self.memory
        if name == PODS:
            return self.pods
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        return self.extended.get(name, 0)

    def names(self) -> list[str]:
        """Kubernetes names of the non-zero resources."""
        out = [
            n
            for n, v in (
                (CPU, self.cpu),
                (MEMORY, self.memory),
                (PODS, self.pods),
                (EPHEMERAL_STORAGE, self.ephemeral_storage),
            )
            if v
        ]
        out.extend(sorted(self.extended))
        return out

    def with_(self, **changes: Unpack[ResourcesChanges]) -> Resources:
        values: ResourcesChanges = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": self.pods,
            "ephemeral_storage": self.ephemeral_storage,
            "extended": self.extended,
        }
        values.update(changes)
        return Resources(**values)

    @classmethod
    def from_k8s(cls, mapping: Mapping[str, object] | None, *, obj: str, field: str) -> Resources:
        """Parse a Kubernetes ResourceList (`{"cpu": "500m", "memory": "1Gi", ...}`)."""
        if not mapping:
            return ZERO
        if type(mapping) is not dict and not isinstance(mapping, Mapping):
            raise ModelError(obj, field, "a map of resource name to quantity", mapping)
        # Few distinct resource lists exist in a cluster; equal lists share one vector.
        try:
            cache_key: Any = tuple(mapping.items())
            cached = _RESOURCES_CACHE.get(cache_key)
        except TypeError:
            cache_key = None
            cached = None
        if cached is not None:
            return cached
        result = cls._parse_list(mapping, obj=obj, field=field)
        if cache_key is not None:
            if len(_RESOURCES_CACHE) > _CACHE_LIMIT:
                _RESOURCES_CACHE.clear()
            _RESOURCES_CACHE[cache_key] = result
        return result

    @classmethod
    def _parse_list(cls, mapping: Mapping[str, Any], *, obj: str, field: str) -> Resources:
        cpu = memory = pods = eph = 0
        ext: dict[str, int] | None = None
        try:
            for name, value in mapping.items():
                if name == CPU:
                    cpu = parse_cpu_millis(value, obj=obj, field=f"{field}.{name}")
                elif name == MEMORY:
                    memory = parse_int_quantity(value, obj=obj, field=f"{field}.{name}")
                elif name == PODS:
                    pods = parse_int_quantity(value, obj=obj, field=f"{field}.{name}")
                elif name == EPHEMERAL_STORAGE:
                    eph = parse_int_quantity(value, obj=obj, field=f"{field}.{name}")
                else:
                    if ext is None:
                        ext = {}
                    ext[name] = parse_int_quantity(value, obj=obj, field=f"{field}.{name}")
        except QuantityError as exc:
            raise ModelError(exc.obj, exc.field, exc.expected, exc.value) from None
        return cls(cpu, memory, pods, eph, ext)

    def to_k8s(self) -> dict[str, str]:
        """A Kubernetes ResourceList with canonical quantity strings (zeros omitted)."""
        out: dict[str, str] = {}
        if self.cpu:
            out[CPU] = format_cpu(self.cpu)
        if self.memory:
            out[MEMORY] = format_bytes(self.memory)
        if self.pods:
            out[PODS] = str(self.pods)
        if self.ephemeral_storage:
            out[EPHEMERAL_STORAGE] = format_bytes(self.ephemeral_storage)
        for k in sorted(self.extended):
            v = self.extended[k]
            out[k] = format_bytes(v) if k.startswith("hugepages-") else str(v)
        return out


class ResourcesChanges(TypedDict, total=False):
    """What `Resources.with_` may change: any argument of `Resources`, of its type."""

    cpu: int
    memory: int
    pods: int
    ephemeral_storage: int
    extended: Mapping[str, int] | None


ZERO = Resources()
Resources.ZERO = ZERO
_OVERCOMMITTABLE = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE})
_RESOURCES_CACHE: dict[Any, Resources] = {}
POD_SLOT = Resources(pods=1)


def _max_resources(a: Resources, b: Resources) -> Resources:
    ext: dict[str, int] | None = None
    if a.extended or b.extended:
        ext = dict(a.extended)
        for k, v in b.extended.items():
            if v > ext.get(k, 0):
                ext[k] = v
    return Resources(
        max(a.cpu, b.cpu),
        max(a.memory, b.memory),
        max(a.pods, b.pods),
        max(a.ephemeral_storage, b.ephemeral_storage),
        ext,
    )
