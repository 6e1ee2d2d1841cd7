"""EC2 instance types: vCPUs, memory, GPUs and architecture, for scale-from-zero templates.

The catalogue asks DescribeInstanceTypes for each type the first time it is needed and keeps
the answer (instance types do not change shape). When the API does not know a type or
cannot be reached, the bundled static table answers; `--aws-use-static-instance-list` makes
the table the only source, for clusters without `ec2:DescribeInstanceTypes` permission.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

import structlog
from clusterscaler.api import MachineShape

log = structlog.get_logger()

STATIC_TABLE = "static_instance_types.json"

# The shape of one EC2 instance type, in the provider kit's units.
InstanceTypeInfo = MachineShape


def kube_arch(aws_architectures: Sequence[str]) -> str:
    """`SupportedArchitectures` of EC2 to the `kubernetes.io/arch` value kubelet reports."""
    names = set(aws_architectures)
    if names & {"arm64", "arm64_mac"}:
        return "arm64"
    if names & {"x86_64", "x86_64_mac", "i386"}:
        return "amd64"
    # Unknown future architectures are passed through rather than guessed.
    return sorted(names)[0] if names else "amd64"


def from_api(item: Mapping[str, Any]) -> InstanceTypeInfo:
    """One entry of a DescribeInstanceTypes reply."""
    gpus = item.get("GpuInfo", {}).get("Gpus", [])
    return InstanceTypeInfo(
        name=str(item["InstanceType"]),
        vcpu=int(item["VCpuInfo"]["DefaultVCpus"]),
        memory_mib=int(item["MemoryInfo"]["SizeInMiB"]),
        gpu=sum(int(g.get("Count", 0)) for g in gpus if g.get("Manufacturer") == "NVIDIA"),
        architecture=kube_arch(item.get("ProcessorInfo", {}).get("SupportedArchitectures", [])),
    )


@cache
def static_table() -> Mapping[str, InstanceTypeInfo]:
    """The bundled table, by instance type name."""
    text = resources.files("clusterscaler_aws").joinpath(STATIC_TABLE).read_text("utf-8")
    data = json.loads(text)
    columns = data["columns"]
    expected = ["instanceType", "vcpu", "memoryMiB", "nvidiaGpu", "architecture"]
    if columns != expected:
        raise ValueError(f"{STATIC_TABLE}: columns {columns}; expected {expected}")
    table: dict[str, InstanceTypeInfo] = {}
    for name, vcpu, memory, gpu, arch in data["rows"]:
        table[name] = InstanceTypeInfo(
            name=name, vcpu=int(vcpu), memory_mib=int(memory), gpu=int(gpu), architecture=arch
        )
    return table


class InstanceTypeCatalogue:
    """Instance type lookups with caching and a static fallback.

    `describe` is `DescribeInstanceTypes` for a list of names, returning the reply's
    entries; it raises on API errors (an unknown name is such an error for EC2).
    """

    def __init__(
        self,
        describe: Callable[[Sequence[str]], Iterable[Mapping[str, Any]]] | None,
        *,
        static_only: bool = False,
        retry_after: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._describe = describe
        self._static_only = static_only or describe is None
        self._known: dict[str, InstanceTypeInfo] = {}
        # Names the API could not answer, and when: not asked again before `retry_after`
        # seconds, so an unreachable or partial API does not cost a call per loop.
        self._failed: dict[str, float] = {}
        self._retry_after = retry_after
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def static_only(self) -> bool:
        return self._static_only

    def get(self, name: str) -> InstanceTypeInfo | None:
        """The shape of `name`, or `None` when neither the API nor the table knows it."""
        with self._lock:
            found = self._known.get(name)
        if found is not None:
            return found
        if not self._static_only:
            self.prefetch([name])
            with self._lock:
                found = self._known.get(name)
            if found is not None:
                return found
        return static_table().get(name)

    def prefetch(self, names: Iterable[str]) -> None:
        """Look several types up in one call; failures fall back to the table silently."""
        if self._static_only or self._describe is None:
            return
        now = self._clock()
        with self._lock:
            missing = sorted(
                {
                    n
                    for n in names
                    if n
                    and n not in self._known
                    and now - self._failed.get(n, -self._retry_after) >= self._retry_after
                }
            )
        if not missing:
            return
        try:
            items = list(self._describe(missing))
        except Exception as exc:  # any API failure: the static table still answers
            log.warning(
                "aws_describe_instance_types_failed",
                instance_types=missing,
                error=str(exc),
                fallback="static table",
            )
            if len(missing) > 1:
                # One unknown name fails the whole call for EC2: retry the others one by one.
                for name in missing:
                    self.prefetch([name])
            else:
                with self._lock:
                    self._failed[missing[0]] = now
            return
        with self._lock:
            for item in items:
                info = from_api(item)
                self._known[info.name] = info
                self._failed.pop(info.name, None)
            for name in missing:
                if name not in self._known:
                    self._failed[name] = now
