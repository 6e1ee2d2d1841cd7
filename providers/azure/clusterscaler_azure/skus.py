"""Azure VM sizes: vCPUs, memory, GPUs and architecture, for scale-from-zero templates.

The bundled table (`static_skus.json`) answers by default. With `enableDynamicInstanceList`
the Resource SKUs API of the scale set's location is asked first (one call per location,
kept for `SKU_TTL`), and the table answers when the API does not know the size or cannot be
reached. Size names are compared without regard to case; a `_Promo` size falls back to its
standard twin, as upstream.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import structlog
from clusterscaler.api import MachineShape, TtlCache

log = structlog.get_logger()

STATIC_TABLE = "static_skus.json"
SKU_TTL = 24 * 3600.0
_PROMO = re.compile(r"_promo$", re.IGNORECASE)
# NP-series report FPGAs as GPUs; AMD GPUs (NVv4) are not driven by the NVIDIA plugin.
_FPGA_SERIES = re.compile(r"^standard_np", re.IGNORECASE)
_AMD_GPU_SERIES = re.compile(r"^standard_nv\d+ad?s_v4$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SkuInfo(MachineShape):
    """The shape of one VM size, in the provider kit's units, and what its series says of
    its GPUs."""

    @property
    def fpga(self) -> bool:
        return _FPGA_SERIES.match(self.name) is not None

    @property
    def nvidia(self) -> bool:
        return self.gpu > 0 and not self.fpga and _AMD_GPU_SERIES.match(self.name) is None


@cache
def static_table() -> Mapping[str, SkuInfo]:
    """The bundled table, by lower-cased size name."""
    raw = json.loads(resources.files("clusterscaler_azure").joinpath(STATIC_TABLE).read_text())
    return {
        name.lower(): SkuInfo(name=name, vcpu=v[0], memory_mib=v[1], gpu=v[2], architecture=v[3])
        for name, v in raw["sizes"].items()
    }


def from_resource_sku(raw: Mapping[str, Any]) -> SkuInfo | None:
    """One `virtualMachines` entry of a Resource SKUs reply; `None` when it lacks vCPUs or
    memory (or is not a VM size)."""
    if str(raw.get("resourceType", "")).lower() != "virtualmachines" or not raw.get("name"):
        return None
    caps = {
        str(c.get("name", "")).lower(): str(c.get("value", ""))
        for c in raw.get("capabilities") or []
    }
    try:
        vcpu = int(caps["vcpus"])
        memory_mib = round(float(caps["memorygb"]) * 1024)
        gpu = int(caps.get("gpus", "0") or 0)
    except (KeyError, ValueError):
        return None
    arch = "arm64" if caps.get("cpuarchitecturetype", "").lower() == "arm64" else "amd64"
    return SkuInfo(name=str(raw["name"]), vcpu=vcpu, memory_mib=memory_mib, gpu=gpu,
                   architecture=arch)


def _lookup(table: Mapping[str, SkuInfo], name: str) -> SkuInfo | None:
    found = table.get(name.lower())
    if found is None and _PROMO.search(name):
        found = table.get(_PROMO.sub("", name).lower())
    return found


class SkuCatalogue:
    """VM sizes by name, from the Resource SKUs API (when enabled) and the bundled table."""

    def __init__(
        self,
        list_skus: Callable[[str], Iterable[Mapping[str, Any]]] | None,
        *,
        dynamic: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._list_skus = list_skus
        self._dynamic = dynamic and list_skus is not None
        # A failed listing is kept as "unavailable" (None) for a minute only: the bundled
        # table answers meanwhile, and the API is asked again soon.
        self._by_location: TtlCache[dict[str, SkuInfo] | None] = TtlCache(
            SKU_TTL, clock, ttl_of=lambda table: SKU_TTL if table is not None else 60.0
        )

    def get(self, name: str, location: str) -> SkuInfo | None:
        if self._dynamic:
            found = _lookup(self._location_table(location), name)
            if found is not None:
                return found
        return _lookup(static_table(), name)

    def _location_table(self, location: str) -> dict[str, SkuInfo]:
        table = self._by_location.get_or(location.lower(), lambda: self._list(location))
        return table if table is not None else {}

    def _list(self, location: str) -> dict[str, SkuInfo] | None:
        assert self._list_skus is not None
        table: dict[str, SkuInfo] = {}
        try:
            for raw in self._list_skus(location):
                info = from_resource_sku(raw)
                if info is not None:
                    table.setdefault(info.name.lower(), info)
        except Exception as exc:
            log.warning("azure_resource_skus_unavailable", location=location, error=str(exc))
            return None
        return table
