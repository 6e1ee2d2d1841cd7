"""kube-env: the instance-template metadata that tells what kubelet will make of a new VM.

kube-env is a YAML mapping of variables. Since Kubernetes 1.10 the ones meant for the
autoscaler are gathered in `AUTOSCALER_ENV_VARS`, a `;`-separated list of `name=value`
(`node_labels=a=b,c=d;node_taints=k=v:NoSchedule;kube_reserved=cpu=100m,memory=1Gi;os=linux;
os_distribution=cos;arch=amd64;...`); older templates have `NODE_LABELS`, `NODE_TAINTS` and
`--kube-reserved` in the kubelet arguments instead. `AUTOSCALER_ENV_VARS` is read first, the
older variables are the fallback, as Cluster Autoscaler does.

Every accessor raises `ConfigurationError` naming the template, the variable and the expected
form when a value is malformed: a template built from a guess would launch nodes that pods
cannot use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from clusterscaler.api import (
    GROUP_OPTION_NAMES,
    TAINT_EFFECTS,
    ConfigurationError,
    GroupOptionError,
    KeyValueError,
    NodeGroupOptions,
    QuantityError,
    Taint,
    config_mapping,
    describe_value,
    load_yaml,
    parse_cpu_millis,
    parse_group_option,
    parse_int_quantity,
    parse_key_values,
)

AUTOSCALER_ENV_VARS = "AUTOSCALER_ENV_VARS"
KUBELET_ARG_VARS = ("KUBELET_ARGS", "KUBELET_TEST_ARGS")
OPERATING_SYSTEMS = ("linux", "windows")
DISTRIBUTIONS = ("cos", "cos_containerd", "ubuntu", "ubuntu_containerd", "windows_ltsc", "windows_sac")
ARCHITECTURES = ("amd64", "arm64")
DEFAULT_OS = "linux"
DEFAULT_DISTRIBUTION = "cos"
DEFAULT_ARCH = "amd64"
DEFAULT_EVICTION_MEMORY = 100 * 1024 * 1024
DEFAULT_EVICTION_STORAGE_RATIO = 0.1
_KUBE_RESERVED_ARG = re.compile(r"--kube-reserved=([^\s'\"]+)")
_EVICTION_HARD_ARG = re.compile(r"--eviction-hard=([^\s'\"]+)")
_MAX_PODS_ARG = re.compile(r"--max-pods=([^\s'\"]+)")

KNOWN_OPTIONS = GROUP_OPTION_NAMES


@dataclass(frozen=True, slots=True)
class EvictionHard:
    """kubelet's hard eviction thresholds that allocatable is reduced by."""

    memory: int = DEFAULT_EVICTION_MEMORY
    ephemeral_storage_ratio: float = DEFAULT_EVICTION_STORAGE_RATIO


@dataclass(frozen=True, slots=True)
class KubeEnv:
    """A parsed kube-env. `source` names the template in error messages."""

    source: str
    values: Mapping[str, str] = field(default_factory=dict)
    autoscaler_vars: Mapping[str, str] = field(default_factory=dict)

    def _error(self, var: str, value: str, expected: str) -> ConfigurationError:
        return ConfigurationError(f"{self.source}: kube-env {var}={describe_value(value)}: expected {expected}")

    def var(self, name: str) -> str | None:
        """A variable of AUTOSCALER_ENV_VARS, or None when absent."""
        return self.autoscaler_vars.get(name)

    def _kubelet_args(self) -> str:
        return " ".join(self.values.get(name, "") for name in KUBELET_ARG_VARS)

    def _pairs(self, var: str, raw: str, expected: str) -> dict[str, str]:
        result: dict[str, str] = {}
        if not raw.strip():
            return result
        for item in raw.split(","):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise self._error(var, raw, expected)
            result[key.strip()] = value.strip()
        return result

    def labels(self) -> dict[str, str]:
        """`node_labels` (or `NODE_LABELS`): `k=v,k2=v2`."""
        raw = self.var("node_labels")
        var = f"{AUTOSCALER_ENV_VARS}.node_labels"
        if raw is None:
            raw, var = self.values.get("NODE_LABELS", ""), "NODE_LABELS"
        return self._pairs(var, raw, "a list of key=value, e.g. a=b,cloud.google.com/gke-nodepool=pool-1")

    def taints(self) -> tuple[Taint, ...]:
        """`node_taints` (or `NODE_TAINTS`): `key=value:Effect,...`."""
        raw = self.var("node_taints")
        var = f"{AUTOSCALER_ENV_VARS}.node_taints"
        if raw is None:
            raw, var = self.values.get("NODE_TAINTS", ""), "NODE_TAINTS"
        form = "a list of key=value:Effect with Effect one of " + ", ".join(TAINT_EFFECTS)
        taints: list[Taint] = []
        for key, value in self._pairs(var, raw, form).items():
            taint_value, sep, effect = value.rpartition(":")
            if not sep or effect not in TAINT_EFFECTS:
                raise self._error(var, raw, form)
            taints.append(Taint(key=key, value=taint_value, effect=effect))
        return tuple(sorted(taints, key=lambda t: (t.key, t.effect)))

    def kube_reserved(self) -> dict[str, int] | None:
        """cpu (milli-cores), memory and ephemeral-storage (bytes) kubelet reserves, or None
        when kube-env does not say (then allocatable is capacity, as upstream)."""
        raw = self.var("kube_reserved")
        var = f"{AUTOSCALER_ENV_VARS}.kube_reserved"
        if raw is None:
            match = _KUBE_RESERVED_ARG.search(self._kubelet_args())
            if match is None:
                return None
            raw, var = match.group(1), "KUBELET_ARGS --kube-reserved"
        form = "a list of resource=quantity for cpu, memory and ephemeral-storage, e.g. cpu=100m,memory=1Gi"
        reserved: dict[str, int] = {}
        for name, value in self._pairs(var, raw, form).items():
            try:
                if name == "cpu":
                    reserved[name] = parse_cpu_millis(value, obj=self.source, field=var)
                elif name in ("memory", "ephemeral-storage"):
                    reserved[name] = parse_int_quantity(value, obj=self.source, field=var)
            except QuantityError:
                raise self._error(var, raw, form) from None
            # Other resources (pid, ...) do not reduce what pods can request.
        return reserved

    def eviction_hard(self) -> EvictionHard:
        """`evictionHard` (`memory.available=100Mi,nodefs.available=10%`) or kubelet's
        `--eviction-hard=memory.available<100Mi,...`; the kubelet defaults otherwise."""
        raw = self.var("evictionHard")
        var = f"{AUTOSCALER_ENV_VARS}.evictionHard"
        separator = "="
        if raw is None:
            match = _EVICTION_HARD_ARG.search(self._kubelet_args())
            if match is None:
                return EvictionHard()
            raw, var, separator = match.group(1), "KUBELET_ARGS --eviction-hard", "<"
        form = f"memory.available{separator}<quantity>,nodefs.available{separator}<percent>%"
        memory = DEFAULT_EVICTION_MEMORY
        ratio = DEFAULT_EVICTION_STORAGE_RATIO
        for item in raw.split(","):
            key, sep, value = item.partition(separator)
            if not sep:
                raise self._error(var, raw, form)
            if key.strip() == "memory.available":
                try:
                    memory = parse_int_quantity(value.strip(), obj=self.source, field=var)
                except QuantityError:
                    raise self._error(var, raw, form) from None
            elif key.strip() == "nodefs.available":
                text = value.strip()
                try:
                    ratio = float(text[:-1]) / 100 if text.endswith("%") else -1.0
                except ValueError:
                    ratio = -1.0
                if not 0.0 <= ratio <= 1.0:
                    raise self._error(var, raw, form)
        return EvictionHard(memory=memory, ephemeral_storage_ratio=ratio)

    def _choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        raw = self.var(name)
        if raw is None:
            return default
        if raw not in choices:
            raise self._error(f"{AUTOSCALER_ENV_VARS}.{name}", raw, "one of " + ", ".join(choices))
        return raw

    def operating_system(self) -> str:
        return self._choice("os", OPERATING_SYSTEMS, DEFAULT_OS)

    def os_distribution(self) -> str:
        return self._choice("os_distribution", DISTRIBUTIONS, DEFAULT_DISTRIBUTION)

    def arch(self) -> str:
        return self._choice("arch", ARCHITECTURES, DEFAULT_ARCH)

    def extended_resources(self) -> dict[str, int]:
        """`extended_resources=name=quantity,...`: resources a device plugin will advertise."""
        raw = self.var("extended_resources")
        if raw is None:
            return {}
        var = f"{AUTOSCALER_ENV_VARS}.extended_resources"
        form = "a list of resource=quantity, e.g. example.com/foo=4"
        result: dict[str, int] = {}
        for name, value in self._pairs(var, raw, form).items():
            try:
                result[name] = parse_int_quantity(value, obj=self.source, field=var)
            except QuantityError:
                raise self._error(var, raw, form) from None
        return result

    def local_ssd_count(self) -> int:
        """`ephemeral_storage_local_ssd_count`: local SSDs that hold ephemeral storage."""
        raw = self.var("ephemeral_storage_local_ssd_count")
        if raw is None:
            return 0
        if not raw.isdigit():
            raise self._error(f"{AUTOSCALER_ENV_VARS}.ephemeral_storage_local_ssd_count", raw, "a non-negative integer")
        return int(raw)

    def boot_disk_ephemeral_storage_blocked(self) -> bool:
        return self.var("BLOCK_EPH_STORAGE_BOOT_DISK") == "true"

    def max_pods(self) -> int | None:
        """`max_pods_per_node`, or kubelet's `--max-pods`; None for the default of 110."""
        raw = self.var("max_pods_per_node")
        var = f"{AUTOSCALER_ENV_VARS}.max_pods_per_node"
        if raw is None:
            match = _MAX_PODS_ARG.search(self._kubelet_args())
            if match is None:
                return None
            raw, var = match.group(1), "KUBELET_ARGS --max-pods"
        if not raw.isdigit() or int(raw) == 0:
            raise self._error(var, raw, "a positive integer")
        return int(raw)

    def autoscaling_options(self) -> NodeGroupOptions | None:
        """Per-MIG overrides from `autoscaling_options=<option>=<value>,...`; None when unset."""
        raw = self.var("autoscaling_options")
        if raw is None:
            return None
        var = f"{AUTOSCALER_ENV_VARS}.autoscaling_options"
        pairs = self._pairs(var, raw, "a list of option=value")
        values: dict[str, Any] = {}
        for name, value in sorted(pairs.items()):
            try:
                option, parsed = parse_group_option(name, value)
            except GroupOptionError as exc:
                unknown = name.lower() not in GROUP_OPTION_NAMES
                raise self._error(
                    var if unknown else f"{var}.{name}",
                    raw if unknown else value,
                    "option names among " + ", ".join(GROUP_OPTION_NAMES)
                    if unknown
                    else exc.expected,
                ) from None
            values[option] = parsed
        return NodeGroupOptions(**values) if values else None


def parse_kube_env(text: str, source: str) -> KubeEnv:
    """Parse kube-env's YAML and its AUTOSCALER_ENV_VARS."""
    try:
        parsed = load_yaml(text) if text.strip() else {}
    # PyYAML raises ValueError for an integer beyond 4,300 digits and RecursionError
    # for deep nesting: both are malformed input like any YAML error.
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise ConfigurationError(f"{source}: kube-env is not valid YAML: {exc}") from None
    # An empty kube-env (`null`) sets nothing.
    loaded = config_mapping({} if parsed is None else parsed, f"{source}: kube-env", "a YAML mapping of NAME: value")
    values: dict[str, str] = {}
    for key, value in loaded.items():
        if isinstance(value, (dict, list)):
            # The name quoted bounded: a 5,000-character key is a line, not a page.
            raise ConfigurationError(
                f"{source}: kube-env {describe_value(key)}: expected a scalar value, got a "
                f"{type(value).__name__}"
            )
        if isinstance(value, bool):
            values[str(key)] = "true" if value else "false"
        else:
            values[str(key)] = "" if value is None else str(value)
    try:
        pairs = parse_key_values(values.get(AUTOSCALER_ENV_VARS, ""), ";")
    except KeyValueError as exc:
        raise ConfigurationError(
            f"{source}: kube-env {AUTOSCALER_ENV_VARS} entry {describe_value(exc.entry)}: expected name=value "
            "(entries separated by ';')"
        ) from exc
    autoscaler_vars = {name: value.strip("\"'") for name, value in pairs.items()}
    return KubeEnv(source=source, values=values, autoscaler_vars=autoscaler_vars)
