"""kube-env parsing, machine types and the reserved-memory estimates, as plain functions."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from clusterscaler.api import ConfigurationError, Taint
from clusterscaler_gce.kube_env import EvictionHard, parse_kube_env
from clusterscaler_gce.machine_types import MachineTypeCatalogue, family, is_custom, parse_custom
from clusterscaler_gce.reserved import (
    GIB,
    KIB,
    MIB,
    kernel_reserved,
    local_ssd_overhead,
    os_reserved_ephemeral_storage,
)

SOURCE = "MIG p/us-central1-b/pool instance template 'tpl'"
MODERN = (
    "ENABLE_NODE_PROBLEM_DETECTOR: 'daemonset'\n"
    "NODE_LABELS: legacy=ignored\n"
    "AUTOSCALER_ENV_VARS: node_labels=a=b,cloud.google.com/gke-nodepool=pool-1;"
    "node_taints='dedicated=ml:NoSchedule,spot=true:PreferNoSchedule';"
    "kube_reserved=cpu=1000m,memory=300Mi,ephemeral-storage=41Gi,pid=1000;"
    "os=linux;os_distribution=ubuntu;arch=arm64;evictionHard=memory.available=200Mi,nodefs.available=5%;"
    "extended_resources=example.com/foo=4;ephemeral_storage_local_ssd_count=2;max_pods_per_node=64\n"
)
LEGACY = (
    "NODE_LABELS: a=b,cloud.google.com/gke-nodepool=old-pool\n"
    "NODE_TAINTS: 'gpu=present:NoExecute'\n"
    "KUBELET_ARGS: --v=2 --kube-reserved=cpu=60m,memory=960Mi --eviction-hard=memory.available<250Mi,nodefs.available<15% --max-pods=32\n"
)


def test_autoscaler_env_vars_win() -> None:
    env = parse_kube_env(MODERN, SOURCE)
    assert env.labels() == {"a": "b", "cloud.google.com/gke-nodepool": "pool-1"}
    assert env.taints() == (
        Taint("dedicated", "ml", "NoSchedule"),
        Taint("spot", "true", "PreferNoSchedule"),
    )
    assert env.kube_reserved() == {"cpu": 1000, "memory": 300 * MIB, "ephemeral-storage": 41 * GIB}
    assert (env.operating_system(), env.os_distribution(), env.arch()) == ("linux", "ubuntu", "arm64")
    assert env.eviction_hard() == EvictionHard(memory=200 * MIB, ephemeral_storage_ratio=0.05)
    assert env.extended_resources() == {"example.com/foo": 4}
    assert env.local_ssd_count() == 2
    assert env.max_pods() == 64


def test_legacy_variables_are_the_fallback() -> None:
    env = parse_kube_env(LEGACY, SOURCE)
    assert env.labels() == {"a": "b", "cloud.google.com/gke-nodepool": "old-pool"}
    assert env.taints() == (Taint("gpu", "present", "NoExecute"),)
    assert env.kube_reserved() == {"cpu": 60, "memory": 960 * MIB}
    assert env.eviction_hard() == EvictionHard(memory=250 * MIB, ephemeral_storage_ratio=0.15)
    assert env.max_pods() == 32
    assert (env.operating_system(), env.os_distribution(), env.arch()) == ("linux", "cos", "amd64")


def test_empty_kube_env_has_defaults() -> None:
    env = parse_kube_env("", SOURCE)
    assert env.labels() == {} and env.taints() == ()
    assert env.kube_reserved() is None
    assert env.eviction_hard() == EvictionHard()
    assert env.max_pods() is None and env.autoscaling_options() is None


def test_autoscaling_options() -> None:
    env = parse_kube_env(
        "AUTOSCALER_ENV_VARS: autoscaling_options=zeroormaxnodescaling=true,maxnodeprovisiontime=20m,"
        "ignoredaemonsetsutilization=false,scaledowngpuutilizationthreshold=0.3,scaledownunreadytime=1h\n",
        SOURCE,
    )
    options = env.autoscaling_options()
    assert options is not None
    assert options.zero_or_max_node_scaling is True
    assert options.max_node_provision_time == timedelta(minutes=20)
    assert options.ignore_daemonsets_utilization is False
    assert options.scale_down_gpu_utilization_threshold == 0.3
    assert options.scale_down_unready_time == timedelta(hours=1)
    assert options.scale_down_unneeded_time is None


@pytest.mark.parametrize(
    ("kube_env", "call", "message"),
    [
        ("- a\n- b\n", "labels", "kube-env: expected a YAML mapping of NAME: value, got list"),
        ("A: [1, 2]\n", "labels", "kube-env 'A': expected a scalar value"),
        ("? '" + "9" * 5000 + "'\n: [1]\n", "labels", "kube-env '99999"),
        ("A: 'unterminated\n", "labels", "kube-env is not valid YAML"),
        ("AUTOSCALER_ENV_VARS: node_labels=a=b;oops\n", "labels", "AUTOSCALER_ENV_VARS entry 'oops': expected name=value"),
        ("AUTOSCALER_ENV_VARS: node_labels=a\n", "labels", "AUTOSCALER_ENV_VARS.node_labels='a': expected a list of key=value"),
        ("NODE_TAINTS: a=b\n", "taints", "NODE_TAINTS='a=b': expected a list of key=value:Effect"),
        ("AUTOSCALER_ENV_VARS: node_taints=a=b:Sometimes\n", "taints", "Effect one of NoSchedule, PreferNoSchedule, NoExecute"),
        ("AUTOSCALER_ENV_VARS: kube_reserved=cpu=lots\n", "kube_reserved", "kube_reserved='cpu=lots': expected a list of resource=quantity"),
        ("KUBELET_ARGS: --kube-reserved=memory=1Zz\n", "kube_reserved", "KUBELET_ARGS --kube-reserved='memory=1Zz'"),
        ("AUTOSCALER_ENV_VARS: os=plan9\n", "operating_system", "os='plan9': expected one of linux, windows"),
        ("AUTOSCALER_ENV_VARS: os_distribution=macos\n", "os_distribution", "os_distribution='macos': expected one of cos"),
        ("AUTOSCALER_ENV_VARS: arch=riscv\n", "arch", "arch='riscv': expected one of amd64, arm64"),
        ("AUTOSCALER_ENV_VARS: evictionHard=nodefs.available=150%\n", "eviction_hard", "evictionHard='nodefs.available=150%'"),
        ("AUTOSCALER_ENV_VARS: evictionHard=memory.available=lots\n", "eviction_hard", "expected memory.available=<quantity>"),
        ("AUTOSCALER_ENV_VARS: ephemeral_storage_local_ssd_count=two\n", "local_ssd_count", "expected a non-negative integer"),
        ("AUTOSCALER_ENV_VARS: extended_resources=foo=bar\n", "extended_resources", "expected a list of resource=quantity"),
        ("KUBELET_ARGS: --max-pods=0\n", "max_pods", "KUBELET_ARGS --max-pods='0': expected a positive integer"),
        ("AUTOSCALER_ENV_VARS: autoscaling_options=scaledownunneededtime=soon\n", "autoscaling_options", "a duration such as 10m"),
        ("AUTOSCALER_ENV_VARS: autoscaling_options=scaledownutilizationthreshold=2\n", "autoscaling_options", "a number between 0 and 1"),
        ("AUTOSCALER_ENV_VARS: autoscaling_options=unknownoption=1\n", "autoscaling_options", "option names among"),
    ],
)
def test_bad_kube_env_names_template_variable_and_form(kube_env: str, call: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        env = parse_kube_env(kube_env, SOURCE)
        getattr(env, call)()
    assert str(info.value).startswith(SOURCE + ": kube-env")
    assert message in str(info.value)
    # A value or name of thousands of characters is quoted bounded.
    assert len(str(info.value)) < 800, len(str(info.value))


@pytest.mark.parametrize(
    ("name", "cpu", "memory_mib"),
    [
        ("custom-2-4096", 2, 4096),
        ("n2-custom-8-32768", 8, 32768),
        ("n2d-custom-4-16384-ext", 4, 16384),
        ("e2-custom-medium-4096", 2, 4096),
        ("e2-custom-small-2048", 2, 2048),
    ],
)
def test_custom_machine_types(name: str, cpu: int, memory_mib: int) -> None:
    assert is_custom(name)
    machine = parse_custom(name, SOURCE)
    assert (machine.cpu, machine.memory) == (cpu, memory_mib * MIB)


@pytest.mark.parametrize("name", ["custom-x-4096", "n2-custom-8", "custom-2-lots", "n2-custom-0-1024"])
def test_bad_custom_machine_types(name: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_custom(name, SOURCE)
    assert f"machine type {name!r}" in str(info.value)
    assert "expected [<family>-]custom-<cpus>-<memory MiB>" in str(info.value)


def test_machine_families() -> None:
    assert [family(n) for n in ("n1-standard-4", "custom-2-2048", "e2-medium", "n2d-custom-2-2048")] == ["n1", "n1", "e2", "n2d"]
    assert not is_custom("n1-standard-4")


def test_catalogue_asks_once_per_type_and_zone_and_never_for_custom() -> None:
    calls: list[tuple[str, str, str]] = []

    def fetch(project: str, zone: str, name: str) -> object:
        from clusterscaler_gce.machine_types import MachineType

        calls.append((project, zone, name))
        return MachineType(name, 4, 15360 * MIB)

    catalogue = MachineTypeCatalogue(fetch)  # type: ignore[arg-type]
    for _ in range(3):
        assert catalogue.get("p", "z-1-a", "n1-standard-4", SOURCE).cpu == 4
    assert catalogue.get("p", "z-1-a", "custom-6-6144", SOURCE).cpu == 6
    assert calls == [("p", "z-1-a", "n1-standard-4")]


@pytest.mark.parametrize(
    ("memory", "os", "distribution", "arch", "expected"),
    [
        # 4 GiB COS: 64 MiB (1/64) + 16 + 64 (swiotlb) + 8 (low memory) + 0.175%.
        (4 * GIB, "linux", "cos", "amd64", 64 * MIB + 16 * MIB + 64 * MIB + 8 * MIB + int(0.00175 * 4 * GIB)),
        # 2 GiB: no swiotlb.
        (2 * GIB, "linux", "cos", "amd64", 32 * MIB + 16 * MIB + 8 * MIB + int(0.00175 * 2 * GIB)),
        # 256 GiB: the correction is capped at 248 MiB, no low-memory offset.
        (256 * GIB, "linux", "cos", "amd64", 4 * GIB + 16 * MIB + 64 * MIB + 248 * MIB),
        (16 * GIB, "linux", "ubuntu", "amd64", 256 * MIB + 16 * MIB + 64 * MIB + int(0.00175 * 16 * GIB) + 4 * MIB),
        (16 * GIB, "linux", "cos", "arm64", round((256 * MIB + 16 * MIB + 64 * MIB + int(0.00175 * 16 * GIB)) * 0.9971)),
        (16 * GIB, "linux", "cos_containerd", "amd64", 256 * MIB + 16 * MIB + 64 * MIB + int(0.00175 * 16 * GIB)),
        (16 * GIB, "windows", "windows_ltsc", "amd64", 0),
    ],
    ids=["cos-4g", "cos-2g", "cos-256g-capped", "ubuntu", "cos-arm64", "cos-containerd", "windows"],
)
def test_kernel_reserved(memory: int, os: str, distribution: str, arch: str, expected: int) -> None:
    assert kernel_reserved(memory, os, distribution, arch) == expected


def test_ephemeral_storage_reservations() -> None:
    disk = 100 * GIB
    cos = os_reserved_ephemeral_storage(disk, "cos", "amd64")
    assert cos == math.ceil(0.015635 * disk) + math.ceil(4.148 * GIB) + min(100 * MIB, math.ceil(0.001 * disk))
    assert os_reserved_ephemeral_storage(disk, "cos", "arm64") == cos + 65536 * KIB
    assert 3 * GIB < os_reserved_ephemeral_storage(disk, "ubuntu", "amd64") < 4 * GIB
    assert local_ssd_overhead(2, "cos") == 13725224 * KIB
    # Counts not measured use the next measured one.
    assert local_ssd_overhead(12, "ubuntu_containerd") == 52747688 * KIB
    assert local_ssd_overhead(1, "windows_ltsc") == 0
