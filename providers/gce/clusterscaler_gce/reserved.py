"""What the OS keeps from a VM before kubelet sees it, as Cluster Autoscaler estimates it.

Memory: the Linux kernel reserves about 1/64 of physical memory plus 16 MiB, 64 MiB more for
the software IO TLB above 3 GiB, 8 MiB more up to 8 GiB, and on COS and Ubuntu a measured
correction of 0.175% (at most 248 MiB; Ubuntu adds 4 MiB; COS on arm64 is 0.29% less).
Windows reserves nothing here. Ephemeral storage: the OS partitions of the boot disk, or the
filesystem overhead measured per local-SSD count when local SSDs hold ephemeral storage.
These are estimates; once a node of the group exists its real allocatable is used instead.
"""

from __future__ import annotations

import math

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
LOCAL_SSD_SIZE = 375 * GIB

_KERNEL_RESERVED_RATIO = 64
_KERNEL_RESERVED = 16 * MIB
_SWIOTLB_RESERVED = 64 * MIB
_SWIOTLB_THRESHOLD = 3 * GIB
_LOW_MEMORY_OFFSET = 8 * MIB
_LOW_MEMORY_THRESHOLD = 8 * GIB
_CORRECTION_RATIO = 0.00175
_MAX_CORRECTION = 248 * MIB
_UBUNTU_OFFSET = 4 * MIB
_ARM64_COS_RATIO = 0.9971

# Filesystem overhead of ephemeral storage on N local SSDs, in KiB, as measured on GKE
# (N * 375 GiB - the node's ephemeral-storage capacity).
_LOCAL_SSD_OVERHEAD_KIB: dict[str, dict[int, int]] = {
    "cos": {1: 7289472, 2: 13725224, 3: 20031312, 4: 26332924, 5: 32634536, 6: 38946604,
            7: 45254008, 8: 51556096, 16: 52837800, 24: 78686620},
    "ubuntu": {1: 7219840, 2: 13651496, 3: 19953488, 4: 26255100, 5: 32556712, 6: 38860588,
               7: 45163896, 8: 51465984, 16: 52747688, 24: 78601704},
}


def base_distribution(distribution: str) -> str:
    """`cos_containerd` reserves as `cos`, `ubuntu_containerd` as `ubuntu`."""
    return distribution.removesuffix("_containerd")


def kernel_reserved(physical_memory: int, operating_system: str, distribution: str, arch: str) -> int:
    """Bytes of memory the kernel keeps from a VM with `physical_memory` bytes."""
    if operating_system != "linux":
        return 0
    reserved = physical_memory // _KERNEL_RESERVED_RATIO + _KERNEL_RESERVED
    if physical_memory > _SWIOTLB_THRESHOLD:
        reserved += _SWIOTLB_RESERVED
    if physical_memory <= _LOW_MEMORY_THRESHOLD:
        reserved += _LOW_MEMORY_OFFSET
    family = base_distribution(distribution)
    if family == "cos":
        reserved += int(min(_CORRECTION_RATIO * physical_memory, _MAX_CORRECTION))
        if arch == "arm64":
            reserved = round(reserved * _ARM64_COS_RATIO)
    elif family == "ubuntu":
        reserved += int(min(_CORRECTION_RATIO * physical_memory, _MAX_CORRECTION))
        reserved += _UBUNTU_OFFSET
    return reserved


def os_reserved_ephemeral_storage(disk_size: int, distribution: str, arch: str) -> int:
    """Bytes of the boot disk the OS partitions take."""
    family = base_distribution(distribution)
    buffer = int(min(100 * MIB, math.ceil(0.001 * disk_size)))
    if family == "cos":
        storage = math.ceil(0.015635 * disk_size) + math.ceil(4.148 * GIB) + buffer
        if arch == "arm64":
            storage += 65536 * KIB
        return storage
    if family == "ubuntu":
        return math.ceil(0.03083 * disk_size) + math.ceil(0.171 * GIB) + buffer
    if family in ("windows_ltsc", "windows_sac"):
        return math.ceil(0.1133 * GIB) + math.ceil(0.010 * GIB)
    return 0


def local_ssd_overhead(count: int, distribution: str) -> int:
    """Bytes of filesystem overhead of ephemeral storage on `count` local SSDs. Counts that
    were not measured use the next measured one: better too little than too much."""
    table = _LOCAL_SSD_OVERHEAD_KIB.get(base_distribution(distribution))
    if table is None or count <= 0:
        return 0
    measured = count if count <= 8 else (16 if count <= 16 else 24)
    return table[measured] * KIB
