"""Machine types: vCPUs and memory of predefined types (machineTypes.get, cached) and of
custom types, whose name carries them: `custom-<cpus>-<memMB>` (N1) or
`<family>-custom-<cpus>-<memMB>[-ext]`, with e2's shared-core `e2-custom-{micro,small,medium}`
counting 2 vCPUs as the API reports them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from clusterscaler.api import ConfigurationError, TtlCache

from clusterscaler_gce.reserved import MIB

CUSTOM_FORM = "[<family>-]custom-<cpus>-<memory MiB>, e.g. n2-custom-8-32768"
# Machine types do not change; the cache only guards against a type being redefined.
MACHINE_TYPE_TTL = 3600.0


@dataclass(frozen=True, slots=True)
class MachineType:
    name: str
    cpu: int
    memory: int  # bytes


def is_custom(machine_type: str) -> bool:
    parts = machine_type.split("-")
    return len(parts) >= 2 and (parts[0] == "custom" or parts[1] == "custom")


def family(machine_type: str) -> str:
    """`n2-standard-4` -> `n2`; `custom-2-4096` -> `n1`."""
    first = machine_type.split("-", 1)[0]
    return "n1" if first == "custom" else first


def parse_custom(machine_type: str, source: str) -> MachineType:
    parts = machine_type.split("-")
    if "custom" not in parts:
        raise ConfigurationError(f"{source}: machine type {machine_type!r} is not custom; expected {CUSTOM_FORM}")
    index = parts.index("custom")
    if index + 2 >= len(parts):
        raise ConfigurationError(f"{source}: machine type {machine_type!r}: expected {CUSTOM_FORM}")
    cpu_part, mem_part = parts[index + 1], parts[index + 2]
    if family(machine_type) == "e2" and cpu_part in ("micro", "small", "medium"):
        cpu = 2
    elif cpu_part.isdigit() and int(cpu_part) > 0:
        cpu = int(cpu_part)
    else:
        raise ConfigurationError(f"{source}: machine type {machine_type!r}: vCPU count {cpu_part!r}; expected {CUSTOM_FORM}")
    if not mem_part.isdigit() or int(mem_part) == 0:
        raise ConfigurationError(f"{source}: machine type {machine_type!r}: memory {mem_part!r}; expected {CUSTOM_FORM}")
    return MachineType(name=machine_type, cpu=cpu, memory=int(mem_part) * MIB)


class MachineTypeCatalogue:
    """Predefined machine types per (project, zone), fetched once and cached."""

    def __init__(
        self,
        fetch: Callable[[str, str, str], MachineType],
        *,
        ttl: float = MACHINE_TYPE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._cache: TtlCache[MachineType] = TtlCache(ttl, clock)

    def get(self, project: str, zone: str, machine_type: str, source: str) -> MachineType:
        if is_custom(machine_type):
            return parse_custom(machine_type, source)
        return self._cache.get_or(
            (project, zone, machine_type), lambda: self._fetch(project, zone, machine_type)
        )
