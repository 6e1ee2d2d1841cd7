"""Every autoscaler flag, with Cluster Autoscaler's names and defaults.

`AutoscalingOptions` is the option table: one dataclass field per flag, in snake_case,
typed, with the help text and the value form in the field metadata. The command-line parser
(`clusterscaler.commands.cli`), `docs/flags.md` and the validation below are all derived from it, so
a flag exists in exactly one place.

Values follow CA's conventions: Go-style durations (`10m`, `1h30m`, `500ms`), booleans as
`--flag`, `--flag=true|false`, repeatable flags (`--nodes` ...) as lists, `<min>:<max>` totals.
Names take dashes or underscores (`--log_dir` is `--log-dir`), as upstream normalises them.

The table holds every flag Cluster Autoscaler accepts, its logging flags (klog and the
Kubernetes logging options) and `--feature-gates` included. A flag whose feature this
autoscaler does not have carries a `no_effect` reason: it parses and is checked like any
other, `docs/flags.md` marks it, and setting it to anything but its default logs one
warning at start that names it. `PROVIDER_FLAGS` holds the upstream flags of one cloud
provider: the provider's distribution defines each (through `clusterscaler_add_options`);
where it is not installed, or does not define it, the core's definition keeps the flag
accepted.

Long on purpose: the table is the one place every flag is declared (about 170 of them, each
with its help text), next to the value forms they share; splitting it would split the list.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from clusterscaler.framework.durations import DURATION_FORM, format_duration, parse_duration
from clusterscaler.framework.schedulerconfig import SchedulerConfig
from clusterscaler.model.quantity import QuantityError, parse_int_quantity


class OptionError(ValueError):
    """A flag has a value of the wrong form. The message names the flag and the value."""

    def __init__(self, flag: str, value: object, expected: str) -> None:
        super().__init__(f"invalid value {value!r} for {flag}: expected {expected}")
        self.flag = flag
        self.value = value
        self.expected = expected


@dataclass(frozen=True, slots=True)
class MinMax:
    """A `<min>:<max>` pair of non-negative integers (min <= max)."""

    min: int
    max: int

    def __str__(self) -> str:
        return f"{self.min}:{self.max}"


@dataclass(frozen=True, slots=True)
class GpuLimit:
    """One `--gpu-total=<gpu_type>:<min>:<max>`."""

    gpu_type: str
    min: int
    max: int

    def __str__(self) -> str:
        return f"{self.gpu_type}:{self.min}:{self.max}"


# Value kinds: each maps a command-line string to a typed value.
BOOL = "bool"
INT = "int"
FLOAT = "float"
STRING = "string"
DURATION = "duration"
STRING_ARRAY = "stringArray"  # repeatable: each occurrence adds one element
STRING_SLICE = "stringSlice"  # comma-separated, repeatable
MIN_MAX = "minMax"
GPU_TOTAL = "gpuTotal"  # repeatable <type>:<min>:<max>
SEVERITY = "severity"  # klog's INFO, WARNING, ERROR, FATAL (or 0-3)
FEATURE_GATES = "mapStringBool"  # Key=true,Other=false; repeatable, later keys win
CIDRS = "cidrs"  # comma-separated CIDRs
QUANTITY = "quantity"  # a byte size: 512, 1K, 2Ki, 3M, 5Mi
VMODULE = "moduleSpec"  # pattern=N,pattern=N
TRACE_LOCATION = "traceLocation"  # file:N
PRIORITY_GRACE = "priorityGracePeriods"  # priority:seconds,priority:seconds
UINT = "uint"

_MINMAX = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")
_GPU = re.compile(r"^\s*([^:\s]+)\s*:\s*(\d+)\s*:\s*(\d+)\s*$")
_GATE = re.compile(r"^([A-Za-z][A-Za-z0-9]*)=(.*)$")
_VMODULE_ITEM = re.compile(r"^([^=,]+)=(\d+)$")
_TRACE = re.compile(r"^(.+\.(?:go|py)):(\d+)$")
SEVERITIES = ("INFO", "WARNING", "ERROR", "FATAL")

FORMS: dict[str, str] = {
    BOOL: "true or false",
    INT: "an integer",
    FLOAT: "a number",
    STRING: "a string",
    DURATION: DURATION_FORM,
    STRING_ARRAY: "a string (repeat the flag for more)",
    STRING_SLICE: "a comma-separated list",
    MIN_MAX: "<min>:<max> with non-negative integers and min <= max",
    GPU_TOTAL: "<gpu_type>:<min>:<max> with non-negative integers and min <= max",
    SEVERITY: "INFO, WARNING, ERROR or FATAL (or 0 to 3)",
    FEATURE_GATES: "comma-separated <Name>=true|false pairs",
    CIDRS: "a comma-separated list of CIDRs such as 130.211.0.0/22",
    QUANTITY: "a byte size such as 512, 1K, 2Ki, 3M or 5Mi",
    VMODULE: "comma-separated <pattern>=<level> pairs with a non-negative integer level",
    TRACE_LOCATION: "<file>:<line> such as autoscaler.py:120 (or empty)",
    PRIORITY_GRACE: "comma-separated <priority>:<terminationGracePeriodSeconds> integer pairs",
    UINT: "a non-negative integer",
}

REPEATABLE = frozenset({STRING_ARRAY, STRING_SLICE, GPU_TOTAL, FEATURE_GATES})


def parse_bool(flag: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "t", "yes"):
        return True
    if lowered in ("false", "0", "f", "no"):
        return False
    raise OptionError(flag, text, FORMS[BOOL])


def add_bool_flag(parser: argparse.ArgumentParser, flag: str, dest: str, help: str) -> None:
    """Declare a plugin's Go-style boolean flag as the core declares its own: `--flag`,
    `--flag=false` and `--flag false` all work, and a bad value names the flag."""

    def parse(text: str) -> bool:
        try:
            return parse_bool(flag, text)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parser.add_argument(
        flag, dest=dest, nargs="?", const=True, default=False, type=parse, metavar=BOOL, help=help
    )


@dataclass(frozen=True, slots=True)
class BoolFlag:
    """A plugin's own Go-style boolean flag, declared once and read back by the same value:
    `add_to(parser)` in `clusterscaler_add_options` (as `add_bool_flag` does), then
    `value(options)` where the plugin is built: whether the flag was set (False when it was
    not given, or when the plugin's options were made without the command line)."""

    flag: str  # with its dashes, e.g. "--aws-use-static-instance-list"
    help: str

    @property
    def dest(self) -> str:
        """Where argparse puts the value, hence its key in `AutoscalingOptions.extra`."""
        return self.flag.lstrip("-").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        add_bool_flag(parser, self.flag, self.dest, self.help)

    def value(self, options: AutoscalingOptions) -> bool:
        return bool(options.extra.get(self.dest, False))


def parse_min_max(flag: str, text: str) -> MinMax:
    match = _MINMAX.match(text)
    if match is None:
        raise OptionError(flag, text, FORMS[MIN_MAX])
    low, high = int(match.group(1)), int(match.group(2))
    if low > high:
        raise OptionError(flag, text, FORMS[MIN_MAX])
    return MinMax(low, high)


def parse_gpu_limit(flag: str, text: str) -> GpuLimit:
    match = _GPU.match(text)
    if match is None:
        raise OptionError(flag, text, FORMS[GPU_TOTAL])
    low, high = int(match.group(2)), int(match.group(3))
    if low > high:
        raise OptionError(flag, text, FORMS[GPU_TOTAL])
    return GpuLimit(match.group(1), low, high)


def parse_severity(flag: str, text: str) -> str:
    """klog's severity names, any case, or their numbers (0 INFO ... 3 FATAL)."""
    word = text.strip().upper()
    if word in SEVERITIES:
        return word
    if word.isdigit() and int(word) < len(SEVERITIES):
        return SEVERITIES[int(word)]
    raise OptionError(flag, text, FORMS[SEVERITY])


def parse_feature_gates(flag: str, text: str) -> dict[str, bool]:
    gates: dict[str, bool] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        match = _GATE.match(item)
        if match is None:
            raise OptionError(flag, text, FORMS[FEATURE_GATES])
        try:
            gates[match.group(1)] = parse_bool(flag, match.group(2))
        except OptionError:
            raise OptionError(flag, text, FORMS[FEATURE_GATES]) from None
    return gates


def parse_cidrs(flag: str, text: str) -> list[str]:
    cidrs = []
    for item in text.split(","):
        try:
            cidrs.append(str(ipaddress.ip_network(item.strip(), strict=False)))
        except ValueError:
            raise OptionError(flag, text, FORMS[CIDRS]) from None
    return cidrs


def parse_vmodule(flag: str, text: str) -> dict[str, int]:
    levels: dict[str, int] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        match = _VMODULE_ITEM.match(item.strip())
        if match is None:
            raise OptionError(flag, text, FORMS[VMODULE])
        levels[match.group(1)] = int(match.group(2))
    return levels


def parse_trace_location(flag: str, text: str) -> str:
    # klog prints an unset location as ":0".
    if text.strip() in ("", ":0"):
        return ""
    if _TRACE.match(text.strip()) is None:
        raise OptionError(flag, text, FORMS[TRACE_LOCATION])
    return text.strip()


def parse_priority_grace_periods(flag: str, text: str) -> list[tuple[int, int]]:
    """`10000:20,1000:100,0:60`: pods of priority >= each bound get its grace period."""
    pairs = []
    for item in text.split(","):
        parts = item.split(":")
        try:
            if len(parts) != 2:
                raise ValueError(item)
            priority, seconds = int(parts[0].strip()), int(parts[1].strip())
        except ValueError:
            raise OptionError(flag, text, FORMS[PRIORITY_GRACE]) from None
        if seconds < 0:
            raise OptionError(flag, text, FORMS[PRIORITY_GRACE] + " (seconds >= 0)")
        pairs.append((priority, seconds))
    return pairs


def parse_value(kind: str, flag: str, text: str) -> Any:
    """Convert one command-line string of `kind` for `flag`. Raises `OptionError`."""
    if kind == BOOL:
        return parse_bool(flag, text)
    if kind in (INT, UINT):
        try:
            number = int(text.strip())
        except ValueError:
            raise OptionError(flag, text, FORMS[kind]) from None
        if kind == UINT and number < 0:
            raise OptionError(flag, text, FORMS[kind])
        return number
    if kind == SEVERITY:
        return parse_severity(flag, text)
    if kind == FEATURE_GATES:
        return parse_feature_gates(flag, text)
    if kind == CIDRS:
        return parse_cidrs(flag, text)
    if kind == VMODULE:
        return parse_vmodule(flag, text)
    if kind == TRACE_LOCATION:
        return parse_trace_location(flag, text)
    if kind == PRIORITY_GRACE:
        return parse_priority_grace_periods(flag, text) if text.strip() else []
    if kind == QUANTITY:
        try:
            # The Kubernetes logging options document 1K for 1000 (a quantity's `k`).
            size = text.strip()
            return parse_int_quantity(size[:-1] + "k" if size.endswith("K") else size, obj=flag, field="value")
        except QuantityError:
            raise OptionError(flag, text, FORMS[QUANTITY]) from None
    if kind == FLOAT:
        try:
            return float(text.strip())
        except ValueError:
            raise OptionError(flag, text, FORMS[FLOAT]) from None
    if kind == DURATION:
        try:
            return parse_duration(text)
        except ValueError:
            raise OptionError(flag, text, FORMS[DURATION]) from None
    if kind == MIN_MAX:
        return parse_min_max(flag, text)
    if kind == GPU_TOTAL:
        return parse_gpu_limit(flag, text)
    if kind == STRING_SLICE:
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


def format_value(kind: str, value: Any) -> str:
    """Render a typed value back in command-line form (for docs and `--help`)."""
    if kind == BOOL:
        return "true" if value else "false"
    if kind == DURATION:
        return format_duration(value)
    if kind == FEATURE_GATES:
        return ",".join(f"{k}={'true' if v else 'false'}" for k, v in value.items())
    if kind == CIDRS:
        return ",".join(value)
    if kind == VMODULE:
        return ",".join(f"{k}={v}" for k, v in value.items())
    if kind == PRIORITY_GRACE:
        return ",".join(f"{p}:{s}" for p, s in value)
    if kind in REPEATABLE:
        if kind == STRING_SLICE:
            return ",".join(str(v) for v in value)
        return "[" + ", ".join(str(v) for v in value) + "]" if value else "[]"
    if kind == STRING:
        return f'"{value}"'
    return str(value)


def opt(
    default: Any,
    help: str,
    *,
    kind: str | None = None,
    flag: str | None = None,
    deprecated: str | None = None,
    group: str = "general",
    no_effect: str | None = None,
) -> Any:
    """Declare one flag. `kind` is derived from the default's type when not given.

    `no_effect` says why the flag changes nothing here (a feature this autoscaler does not
    have); such a flag is accepted and checked, and a value other than its default is
    warned about at start."""
    if kind is None:
        if isinstance(default, bool):
            kind = BOOL
        elif isinstance(default, int):
            kind = INT
        elif isinstance(default, float):
            kind = FLOAT
        elif isinstance(default, timedelta):
            kind = DURATION
        elif isinstance(default, MinMax):
            kind = MIN_MAX
        elif isinstance(default, str):
            kind = STRING
        else:
            raise TypeError(f"flag kind for default {default!r} must be given explicitly")
    metadata = {
        "help": help,
        "kind": kind,
        "flag": flag,
        "deprecated": deprecated,
        "group": group,
        "no_effect": no_effect,
    }
    if isinstance(default, list):
        frozen = tuple(default)
        return field(default_factory=lambda: list(frozen), metadata=metadata)
    if isinstance(default, dict):
        pairs = tuple(default.items())
        return field(default_factory=lambda: dict(pairs), metadata=metadata)
    return field(default=default, metadata=metadata)


def _m(minutes: float) -> timedelta:
    return timedelta(minutes=minutes)


def _s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


@dataclass
class AutoscalingOptions:
    """Every flag of the autoscaler. Field name = flag name with `-` replaced by `_`."""

    # --- Cluster and cloud -------------------------------------------------------------
    cloud_provider: str = opt("sim", "Cloud provider type (one of the installed providers).", group="cloud")
    cloud_config: str = opt("", "The path to the cloud provider configuration file. Empty string for no configuration file.", group="cloud")
    cluster_name: str = opt("", "Autoscaled cluster name, if available.", group="cloud")
    nodes: list[str] = opt([], "Sets min,max size and other configuration data for a node group in a format accepted by the cloud provider. Can be used multiple times. Format: <min>:<max>:<other...>", kind=STRING_ARRAY, group="cloud")
    node_group_auto_discovery: list[str] = opt([], "One or more definition(s) of node group auto-discovery, `<name of discoverer>:[<key>[=<value>]]`, e.g. `asg:tag=tagKey,anotherTagKey`, `mig:namePrefix=pfx,min=0,max=10`, `label:foo=bar`, `clusterapi:namespace=ns`. Can be used multiple times.", kind=STRING_ARRAY, group="cloud")
    regional: bool = opt(False, "Cluster is regional.", group="cloud")
    kubernetes: str = opt("", "Kubernetes API server location. Leave blank for the default (kubeconfig or in-cluster).", group="kubernetes")
    kubeconfig: str = opt("", "Path to kubeconfig file with authorization and API server location information.", group="kubernetes")
    kube_client_qps: float = opt(5.0, "QPS value for the Kubernetes client.", group="kubernetes")
    kube_client_burst: int = opt(10, "Burst value for the Kubernetes client.", group="kubernetes")
    namespace: str = opt("kube-system", "Namespace in which the autoscaler runs (status ConfigMap, priority expander ConfigMap, Lease).", group="kubernetes")
    user_agent: str = opt("cluster-autoscaler", "User agent used for HTTP calls to the API server.", group="kubernetes")
    kube_api_content_type: str = opt("application/vnd.kubernetes.protobuf", "Content type of requests sent to the API server.", group="kubernetes", no_effect="the autoscaler always reads and writes JSON, which it parses once into its own model")

    # --- Loop ------------------------------------------------------------------------------
    scan_interval: timedelta = opt(_s(10), "How often the cluster is reevaluated for scale up or down.", group="loop")
    max_inactivity: timedelta = opt(_m(10), "Maximum time from last recorded autoscaler activity before /health-check fails.", group="loop")
    max_failing_time: timedelta = opt(_m(15), "Maximum time from last recorded successful autoscaler run before /health-check fails.", group="loop")
    address: str = opt(":8085", "The address to expose Prometheus metrics and /health-check on.", group="loop")
    dry_run: bool = opt(False, "Decide, log, emit events (marked dry-run), write status and metrics, but never change nodes, pods or the cloud.", group="loop")
    profiling: bool = opt(False, "Enable /debug/pprof-like profiling endpoints.", group="loop")
    write_status_configmap: bool = opt(True, "Should the autoscaler write status information to a ConfigMap.", group="loop")
    status_config_map_name: str = opt("cluster-autoscaler-status", "Status ConfigMap name.", group="loop")
    record_duplicated_events: bool = opt(False, "Record duplicated events within a 5 minute window.", group="loop")
    emit_per_nodegroup_metrics: bool = opt(False, "Emit per node group metrics (min/max/target count).", group="loop")
    max_startup_time: timedelta = opt(_m(20), "Maximum time from the start until the first successful autoscaler run before /health-check fails. Raised to --max-inactivity or --max-failing-time when shorter.", group="loop")
    frequent_loops_enabled: bool = opt(True, "Start the next loop before --scan-interval ends: at once after a loop that scaled up or started a scale-down, and as soon as a pod becomes unschedulable (at least 1s after the previous loop ended).", group="loop")
    debugging_snapshot_enabled: bool = opt(False, "Whether the debugging snapshot (/snapshotz) is enabled.", group="loop", no_effect="there is no /snapshotz endpoint; `clusterscaler explain` and `simulate --snapshot` answer the same questions")
    scheduler_config_file: str = opt("", "Path to a KubeSchedulerConfiguration changing the configuration of in-tree scheduler plugins acting on PreFilter and Filter extension points. Read at start (kubescheduler.config.k8s.io/v1 or v1beta3): the profile's disabled filter plugins, NodeResourcesFit's ignoredResources and ignoredResourceGroups, NodeAffinity's addedAffinity and PodTopologySpread's List defaultConstraints change the simulation (docs/operations.md).", group="loop")
    scheduler_verbosity: int = opt(0, "Verbosity threshold for logs produced by the scheduler (at most --v).", group="loop", no_effect="the built-in scheduling predicates do not log")
    predicate_parallelism: int = opt(4, "Maximum parallelism of scheduler predicate checking.", group="loop", no_effect="predicates are checked in one thread, over equivalence groups and indexed nodes")
    cluster_snapshot_parallelism: int = opt(16, "Maximum parallelism of cluster snapshot creation.", group="loop", deprecated="use --predicate-parallelism", no_effect="the snapshot is forked by delta in one thread")
    node_info_cache_expire_time: timedelta = opt(timedelta(hours=87600), "Node Info cache expire time for each item.", group="loop", no_effect="template nodes are rebuilt from live nodes in every loop, with no cache to expire")
    pending_pods_batching_timeout: timedelta = opt(_m(4), "Maximum time spent in scheduling simulations when preparing the batch of pending pods passed to scale-up.", group="loop", no_effect="pending pods are always simulated in full")
    enable_graceful_degradation: bool = opt(False, "Stop the scheduling simulations of pending pods after a timeout and proceed with a subset of the pods.", group="loop", no_effect="graceful degradation is not supported")
    enable_dynamic_resource_allocation: bool = opt(True, "Handle DRA (Dynamic Resource Allocation) objects; locked to true upstream.", group="loop")
    enable_csi_node_aware_scheduling: bool = opt(False, "Whether logic for handling CSINode objects is enabled.", group="loop", no_effect="CSINode volume limits are not simulated")
    enable_inter_pod_affinity_hostname_fast_path: bool = opt(False, "Enable the InterPodAffinityHostnameFastPath scheduler feature gate.", group="loop", no_effect="inter-pod affinity is always checked through the node indexes")
    max_node_skip_eval_time_tracker_enabled: bool = opt(False, "Track the maximum time a node is skipped during scale-down (metric max_node_skip_eval_duration_seconds).", group="loop")
    node_removal_latency_tracking_enabled: bool = opt(False, "Track the latency from when an unneeded node becomes eligible for scale-down until it is removed or needed again (metric node_removal_latency_seconds).", group="loop")

    # --- Limits ----------------------------------------------------------------------------
    max_nodes_total: int = opt(0, "Maximum number of nodes in all node groups. The autoscaler will not grow the cluster beyond this number (0: no limit).", group="limits")
    cores_total: MinMax = opt(MinMax(0, 320000), "Minimum and maximum number of cores in cluster, in the format <min>:<max>.", group="limits")
    memory_total: MinMax = opt(MinMax(0, 6400000), "Minimum and maximum number of gigabytes of memory in cluster, in the format <min>:<max>.", group="limits")
    gpu_total: list[GpuLimit] = opt([], "Minimum and maximum number of different GPUs in cluster, in the format <gpu_type>:<min>:<max>. Can be passed multiple times.", kind=GPU_TOTAL, group="limits")
    max_total_unready_percentage: float = opt(45.0, "Maximum percentage of unready nodes in the cluster. After this is exceeded, the autoscaler halts operations.", group="limits")
    ok_total_unready_count: int = opt(3, "Number of allowed unready nodes, irrespective of max-total-unready-percentage.", group="limits")

    # --- Scale-up --------------------------------------------------------------------------
    estimator: str = opt("binpacking", "Type of resource estimator to be used in scale up.", group="scale-up")
    expander: list[str] = opt(["least-waste"], "Type of node group expander to be used in scale up; a comma-separated chain such as `priority,least-waste`.", kind=STRING_SLICE, group="scale-up")
    expendable_pods_priority_cutoff: int = opt(-10, "Pods with priority below cutoff are expendable: they can be killed without any consideration during scale down and they don't cause scale up. Pods with null priority are not expendable.", group="scale-up")
    new_pod_scale_up_delay: timedelta = opt(_s(0), "Pods younger than this are not considered for scale-up (overridable per pod with the cluster-autoscaler.kubernetes.io/pod-scale-up-delay annotation).", group="scale-up")
    max_nodes_per_scaleup: int = opt(1000, "Maximum number of nodes that can be added in a single scale-up.", group="scale-up")
    max_nodegroup_binpacking_duration: timedelta = opt(_s(10), "Maximum time spent binpacking for a single node group.", group="scale-up")
    max_binpacking_time: timedelta = opt(_m(5), "Maximum time spent binpacking in one scale-up across node groups.", group="scale-up")
    balance_similar_node_groups: bool = opt(False, "Detect similar node groups and balance the number of nodes between them.", group="scale-up")
    balancing_ignore_label: list[str] = opt([], "A node label to ignore when considering node group similarity. One label per flag occurrence.", kind=STRING_ARRAY, group="scale-up")
    balancing_label: list[str] = opt([], "A node label to use (exclusively) when considering node group similarity. One label per flag occurrence.", kind=STRING_ARRAY, group="scale-up")
    memory_difference_ratio: float = opt(0.015, "Maximum difference in memory capacity between two similar node groups, as a ratio of the smaller.", group="scale-up")
    max_allocatable_difference_ratio: float = opt(0.05, "Maximum difference in allocatable resources between two similar node groups.", group="scale-up")
    max_free_difference_ratio: float = opt(0.05, "Maximum difference in free resources between two similar node groups.", group="scale-up")
    scale_up_from_zero: bool = opt(True, "Should the autoscaler scale up when there are 0 ready nodes.", group="scale-up")
    enforce_node_group_min_size: bool = opt(False, "Scale up node groups below their configured minimum size to the minimum.", group="scale-up")
    max_node_provision_time: timedelta = opt(_m(15), "Maximum time the autoscaler waits for a node to be provisioned.", group="scale-up")
    max_node_startup_time: timedelta = opt(_m(15), "Maximum time the autoscaler waits for a registered node to become ready.", group="scale-up")
    initial_node_group_backoff_duration: timedelta = opt(_m(5), "Duration of the first backoff after a failed scale-up of a node group.", group="scale-up")
    max_node_group_backoff_duration: timedelta = opt(_m(30), "Maximum backoff duration for a node group after failed scale-ups.", group="scale-up")
    node_group_backoff_reset_timeout: timedelta = opt(_m(180), "Time after the last failed scale-up at which a node group's backoff is reset.", group="scale-up")
    ignore_taint: list[str] = opt([], "Taint treated as a startup taint (deprecated: use --startup-taint).", kind=STRING_ARRAY, group="scale-up")
    startup_taint: list[str] = opt([], "Taint placed on nodes at startup and removed later: a node carrying it is treated as not ready (starting, then unready), and the taint is ignored in node templates. Equivalent to --ignore-taint.", kind=STRING_ARRAY, group="scale-up")
    startup_taint_prefix: list[str] = opt([], "Taint key prefix: taints whose key starts with it are startup taints, in addition to startup-taint.cluster-autoscaler.kubernetes.io/ and ignore-taint.cluster-autoscaler.kubernetes.io/.", kind=STRING_ARRAY, group="scale-up")
    status_taint: list[str] = opt([], "Taint reflecting node status: ignored in node templates; nodes carrying it are still treated as ready.", kind=STRING_ARRAY, group="scale-up")
    allowed_scheduler_names: list[str] = opt([], "Pods with these scheduler names (besides default-scheduler) are considered for scale-up.", kind=STRING_SLICE, group="scale-up")
    bypassed_scheduler_names: list[str] = opt([], "Pods with these scheduler names are considered for scale-up without waiting for the scheduler to mark them unschedulable.", kind=STRING_SLICE, group="scale-up")
    force_ds: bool = opt(False, "Add pending DaemonSet pods to node templates even when they are not scheduled yet.", group="scale-up")
    grpc_expander_url: str = opt("", "URL to reach the gRPC expander server (--expander=grpc).", group="scale-up")
    grpc_expander_cert: str = opt("", "Path to the certificate used by the gRPC expander server over TLS.", group="scale-up")
    parallel_scale_up: bool = opt(False, "Whether to allow parallel node groups scale up: every group of one scale-up is increased at once, and a failure does not keep the others from being asked. Experimental upstream.", group="scale-up")
    scale_from_unschedulable: bool = opt(False, "Ignore a node's .spec.unschedulable field in node templates when considering to scale a node group.", group="scale-up")
    fastpath_binpacking_enabled: bool = opt(False, "Whether to use the fastpath binpacking algorithm to optimize scale-ups.", group="scale-up", no_effect="the binpacking estimator already packs equivalence groups at once")
    enable_proactive_scaleup: bool = opt(False, "Whether to enable proactive scale-ups.", group="scale-up", no_effect="proactive scale-up is not supported")
    salvo_scale_up: bool = opt(False, "Whether to allow multiple scale-ups in a single loop.", group="scale-up", no_effect="one scale-up is made per loop")
    salvo_scale_up_budget: timedelta = opt(_m(1), "Maximum time spent on subsequent scale-ups in a single loop. Requires --salvo-scale-up.", group="scale-up", no_effect="one scale-up is made per loop")
    scaleup_simulation_for_skipped_node_groups_enabled: bool = opt(False, "Whether to simulate scale-up for skipped node groups.", group="scale-up", no_effect="skipped node groups are reported without a simulation")
    pod_injection_limit: int = opt(5000, "Limits the total number of pods while injecting fake pods.", group="scale-up", no_effect="it bounds the fake pods of proactive scale-up (--enable-proactive-scaleup), which is not supported")
    async_node_groups: bool = opt(False, "Whether node groups are created and deleted asynchronously. Experimental upstream.", group="scale-up", no_effect="node groups are never created or deleted (no node auto-provisioning)")
    enable_provisioning_requests: bool = opt(False, "Whether the autoscaler handles ProvisioningRequest CRs.", group="scale-up")
    provisioning_request_initial_backoff_time: timedelta = opt(_m(1), "Initial backoff time for ProvisioningRequest retry after failed ScaleUp.", group="scale-up")
    provisioning_request_max_backoff_time: timedelta = opt(_m(10), "Max backoff time for ProvisioningRequest retry after failed ScaleUp.", group="scale-up")
    provisioning_request_max_backoff_cache_size: int = opt(1000, "Max size for the ProvisioningRequest cache used for retry backoff.", group="scale-up")
    check_capacity_batch_processing: bool = opt(False, "Whether to enable batch processing for check capacity requests.", group="scale-up")
    check_capacity_provisioning_request_max_batch_size: int = opt(10, "Maximum number of provisioning requests to process in a single batch.", group="scale-up")
    check_capacity_provisioning_request_batch_timebox: timedelta = opt(_s(10), "Maximum time to process a batch of provisioning requests.", group="scale-up")
    check_capacity_processor_instance: str = opt("", "Name of the processor instance: only ProvisioningRequests naming it are processed by this instance.", group="scale-up")
    capacity_buffer_controller_enabled: bool = opt(False, "Whether to enable the default controller for capacity buffers or not: each CapacityBuffer (autoscaling.x-k8s.io/v1beta1) gets the PodTemplate its chunks are made from, their number and its conditions, within the namespace's ResourceQuotas (docs/capacity-buffers.md).", group="scale-up")
    capacity_buffer_pod_injection_enabled: bool = opt(False, "Whether to enable pod list processor that processes ready capacity buffers and injects fake pods accordingly: they are simulated as pending, never created, so nodes are added ahead of demand and kept.", group="scale-up")
    capacity_buffer_pod_dry_run_enabled: bool = opt(True, "Whether to use server dry run to build managed pod templates for capacity buffers. That ensures that the buffers' fake pods will more reliably resemble real pods by going through the pod defaulting, mutating and validating webhooks. No-op if --capacity-buffer-controller-enabled is false. Note: requires \"create\" permission on pods to call server dry run. No real pods will be created.", group="scale-up")
    capacity_quotas_enabled: bool = opt(False, "Whether to enable CapacityQuota CRD support.", group="scale-up")

    # --- Scale-down ------------------------------------------------------------------------
    scale_down_enabled: bool = opt(True, "Should the autoscaler scale down the cluster.", group="scale-down")
    scale_down_delay_after_add: timedelta = opt(_m(10), "How long after scale up that scale down evaluation resumes.", group="scale-down")
    scale_down_delay_after_delete: timedelta = opt(_s(0), "How long after node deletion that scale down evaluation resumes.", group="scale-down")
    scale_down_delay_after_failure: timedelta = opt(_m(3), "How long after scale down failure that scale down evaluation resumes.", group="scale-down")
    scale_down_unneeded_time: timedelta = opt(_m(10), "How long a node should be unneeded before it is eligible for scale down.", group="scale-down")
    scale_down_unready_time: timedelta = opt(_m(20), "How long an unready node should be unneeded before it is eligible for scale down.", group="scale-down")
    scale_down_unready_enabled: bool = opt(True, "Should the autoscaler scale down unready nodes.", group="scale-down")
    scale_down_utilization_threshold: float = opt(0.5, "Sum of cpu or memory of all pods running on the node divided by the node's allocatable, below which a node can be considered for scale down.", group="scale-down")
    scale_down_gpu_utilization_threshold: float = opt(0.5, "Sum of GPU requests of all pods running on the node divided by the node's allocatable GPUs, below which a GPU node can be considered for scale down.", group="scale-down")
    scale_down_non_empty_candidates_count: int = opt(30, "Maximum number of non empty nodes considered in one iteration as candidates for scale down with drain. Non-positive turns the heuristic off.", group="scale-down")
    scale_down_candidates_pool_ratio: float = opt(0.1, "A ratio of nodes considered as additional non-empty candidates for scale-down when some candidates of the previous loop are no longer valid.", group="scale-down", no_effect="as in Cluster Autoscaler's current planner, every eligible node is simulated (bounded by --scale-down-simulation-timeout and --scale-down-non-empty-candidates-count)")
    scale_down_candidates_pool_min_count: int = opt(50, "Minimum number of nodes considered as additional non-empty candidates for scale-down when some candidates of the previous loop are no longer valid.", group="scale-down", no_effect="as in Cluster Autoscaler's current planner, every eligible node is simulated (bounded by --scale-down-simulation-timeout and --scale-down-non-empty-candidates-count)")
    scale_down_simulation_timeout: timedelta = opt(_s(30), "Timeout for the scale-down removal simulation.", group="scale-down")
    unremovable_node_recheck_timeout: timedelta = opt(_m(5), "The timeout before a node that could not be removed is checked again.", group="scale-down")
    max_scale_down_parallelism: int = opt(10, "Maximum number of nodes (empty or needing drain) that can be deleted in parallel.", group="scale-down")
    max_drain_parallelism: int = opt(1, "Maximum number of nodes needing drain that can be drained and deleted in parallel.", group="scale-down")
    max_graceful_termination_sec: int = opt(600, "Maximum number of seconds the autoscaler waits for pod termination when trying to scale down a node.", group="scale-down")
    max_pod_eviction_time: timedelta = opt(_m(2), "Maximum time the autoscaler tries to evict a pod before giving up.", group="scale-down")
    max_bulk_soft_taint_count: int = opt(10, "Maximum number of nodes that can be soft-tainted or untainted with PreferNoSchedule at the same time (0 disables soft tainting).", group="scale-down")
    max_bulk_soft_taint_time: timedelta = opt(_s(3), "Maximum duration of soft tainting or untainting in one loop.", group="scale-down")
    node_delete_delay_after_taint: timedelta = opt(_s(5), "How long to wait before deleting a node after tainting it.", group="scale-down")
    node_deletion_delay_timeout: timedelta = opt(_m(2), "Maximum time to wait for delay-deletion.cluster-autoscaler.kubernetes.io/ annotations to be removed before deleting a node.", group="scale-down")
    min_replica_count: int = opt(0, "Minimum number of replicas that a ReplicaSet or ReplicationController should have to allow deleting their pods in scale down.", group="scale-down")
    skip_nodes_with_system_pods: bool = opt(True, "Never delete nodes with pods from kube-system (except DaemonSet or mirror pods, or pods covered by a PDB).", group="scale-down")
    skip_nodes_with_local_storage: bool = opt(True, "Never delete nodes with pods with local storage, e.g. EmptyDir or HostPath.", group="scale-down")
    skip_nodes_with_custom_controller_pods: bool = opt(True, "Never delete nodes with pods owned by custom controllers, or whose controller cannot be found.", group="scale-down")
    blocking_system_pod_distruption_timeout: timedelta = opt(_m(60), "How long after its creation a kube-system pod without a PDB keeps blocking the removal of its node.", group="scale-down")
    ignore_daemonsets_utilization: bool = opt(False, "Ignore DaemonSet pods when calculating resource utilization for scale down.", group="scale-down")
    ignore_mirror_pods_utilization: bool = opt(False, "Ignore mirror pods when calculating resource utilization for scale down.", group="scale-down")
    daemonset_eviction_for_empty_nodes: bool = opt(False, "Gracefully terminate DaemonSet pods from empty nodes.", group="scale-down")
    daemonset_eviction_for_occupied_nodes: bool = opt(True, "Gracefully terminate DaemonSet pods from non-empty nodes.", group="scale-down")
    cordon_node_before_terminating: bool = opt(True, "Cordon nodes before terminating them during scale down.", group="scale-down")
    force_delete_unregistered_nodes: bool = opt(False, "Delete unregistered nodes even when that would take a node group below its minimum size (through the node group's forced deletion where its provider has one).", group="scale-down")
    force_delete_failed_nodes: bool = opt(False, "Delete failed nodes (instances whose creation failed) even when that would take a node group below its minimum size (through the node group's forced deletion where its provider has one; otherwise as a plain deletion, which the provider may refuse at the minimum).", group="scale-down")
    scale_down_delay_type_local: bool = opt(False, "Apply the --scale-down-delay-after-* flags per node group instead of globally across all node groups.", group="scale-down")
    node_deletion_batcher_interval: timedelta = opt(_s(0), "How long scale-down gathers the nodes of one node group ready for deletion, to delete them with one cloud provider call (0: each node as soon as it is ready).", group="scale-down")
    node_deletion_candidate_ttl: timedelta = opt(_s(0), "Maximum time a node can stay marked as removable (its DeletionCandidateOfClusterAutoscaler taint) before the marking becomes stale; within it, a restarted autoscaler keeps the node's unneeded time (0: the marking is not reused).", group="scale-down")
    drain_priority_config: list[tuple[int, int]] = opt([], "Comma-separated <priority>:<terminationGracePeriodSeconds> pairs enabling the priority evictor: pods are evicted in groups of ascending priority, each with its group's grace period, e.g. 10000:20,1000:100,0:60. Not together with --max-graceful-termination-sec.", kind=PRIORITY_GRACE, group="scale-down")
    dynamic_node_delete_delay_after_taint_enabled: bool = opt(False, "Adjust --node-delete-delay-after-taint to the latency between the autoscaler and the API server.", group="scale-down", no_effect="--node-delete-delay-after-taint is used as given")

    # --- Leader election -------------------------------------------------------------------
    leader_elect: bool = opt(True, "Start a leader election client and gain leadership before executing the main loop.", group="leader-election")
    leader_elect_lease_duration: timedelta = opt(_s(15), "The duration that non-leader candidates wait after observing a leadership renewal before trying to acquire leadership.", group="leader-election")
    leader_elect_renew_deadline: timedelta = opt(_s(10), "The interval between attempts by the leader to renew its lease before it stops leading. Must be <= the lease duration.", group="leader-election")
    leader_elect_retry_period: timedelta = opt(_s(2), "The duration clients wait between attempts of acquisition and renewal of leadership.", group="leader-election")
    leader_elect_resource_lock: str = opt("leases", "The type of resource object used for locking during leader election (only `leases` is supported).", group="leader-election")
    leader_elect_resource_name: str = opt("cluster-autoscaler", "The name of the Lease used for leader election.", group="leader-election")
    leader_elect_resource_namespace: str = opt("", "The namespace of the Lease used for leader election (default: --namespace).", group="leader-election")

    # --- Logging ---------------------------------------------------------------------------
    v: int = opt(0, "Log verbosity: 0-1 warnings and major decisions, 2-3 info, 4 debug, 5+ trace.", group="logging")
    logging_format: str = opt("text", "Log format: text or json.", group="logging")
    vmodule: dict[str, int] = opt({}, "Comma-separated <pattern>=<level> settings for module-filtered logging: a module whose file name (without .py) matches the glob pattern logs at that verbosity (only for the text format), e.g. planner=4,scale*=5.", kind=VMODULE, group="logging")
    logtostderr: bool = opt(True, "Log to standard error instead of --log-file.", group="logging")
    alsologtostderr: bool = opt(False, "Log to standard error as well as to --log-file (no effect when --logtostderr=true).", group="logging")
    log_file: str = opt("", "If non-empty, log to this file (appended to; no effect when --logtostderr=true).", group="logging")
    log_flush_frequency: timedelta = opt(_s(5), "Maximum time between log flushes (every line is flushed as it is written).", group="logging")
    skip_headers: bool = opt(False, "Avoid header prefixes (timestamp and level) in text log lines.", group="logging")
    log_backtrace_at: str = opt("", "When logging hits line <file>:<line>, emit a stack trace.", kind=TRACE_LOCATION, group="logging")
    log_json_split_stream: bool = opt(False, "In JSON format, write error messages to stderr and info messages to stdout. Requires the LoggingAlphaOptions feature gate.", group="logging")
    log_json_info_buffer_size: int = opt(0, "In JSON format with split streams, buffer info messages up to this size. Requires the LoggingAlphaOptions feature gate.", kind=QUANTITY, group="logging")
    log_text_split_stream: bool = opt(False, "In text format, write error messages to stderr and info messages to stdout. Requires the LoggingAlphaOptions feature gate.", group="logging")
    log_text_info_buffer_size: int = opt(0, "In text format with split streams, buffer info messages up to this size. Requires the LoggingAlphaOptions feature gate.", kind=QUANTITY, group="logging")
    stderrthreshold: str = opt("INFO", "Logs at or above this severity go to stderr when writing to files and stderr.", kind=SEVERITY, group="logging", no_effect="as in Cluster Autoscaler, whose logs go through one logger to stderr, or to --log-file with --logtostderr=false")
    alsologtostderrthreshold: str = opt("INFO", "Logs at or above this severity go to stderr when --alsologtostderr=true.", kind=SEVERITY, group="logging", no_effect="as in Cluster Autoscaler, whose logs go through one logger to stderr, or to --log-file with --logtostderr=false")
    legacy_stderr_threshold_behavior: bool = opt(False, "If true, --stderrthreshold is ignored when --logtostderr=true.", group="logging", no_effect="as in Cluster Autoscaler, whose logs go through one logger to stderr, or to --log-file with --logtostderr=false")
    log_dir: str = opt("", "If non-empty, write log files in this directory.", group="logging", no_effect="as in Cluster Autoscaler, whose logs go through one logger to stderr, or to --log-file with --logtostderr=false")
    log_file_max_size: int = opt(1800, "Maximum size a log file can grow to, in megabytes (0: unlimited).", kind=UINT, group="logging", no_effect="as in Cluster Autoscaler, whose logs go through one logger to stderr, or to --log-file with --logtostderr=false")
    one_output: bool = opt(False, "Only write logs to their native severity level's file.", group="logging", no_effect="as in Cluster Autoscaler, whose logs go through one logger to stderr, or to --log-file with --logtostderr=false")
    skip_log_headers: bool = opt(False, "Avoid headers when opening log files.", group="logging", no_effect="as in Cluster Autoscaler, whose logs go through one logger to stderr, or to --log-file with --logtostderr=false")
    add_dir_header: bool = opt(False, "Add the file directory to the header of the log messages.", group="logging")
    feature_gates: dict[str, bool] = opt({}, "Comma-separated <Name>=true|false pairs describing feature gates for alpha/experimental features. LoggingAlphaOptions and LoggingBetaOptions gate the logging options as upstream; other gates have no effect.", kind=FEATURE_GATES, group="logging")

    # --- GCE load balancers ------------------------------------------------------------------
    cloud_provider_gce_lb_src_cidrs: list[str] = opt(["130.211.0.0/22", "209.85.152.0/22", "209.85.204.0/22", "35.191.0.0/16"], "CIDRs opened in the GCE firewall for L4 load-balancer traffic proxy and health checks.", kind=CIDRS, group="gce-load-balancers", no_effect="the autoscaler creates no load balancers (Cluster Autoscaler accepts the flag only because its GCE library registers it)")
    cloud_provider_gce_l7lb_src_cidrs: list[str] = opt(["130.211.0.0/22", "35.191.0.0/16"], "CIDRs opened in the GCE firewall for L7 load-balancer traffic proxy and health checks.", kind=CIDRS, group="gce-load-balancers", no_effect="the autoscaler creates no load balancers (Cluster Autoscaler accepts the flag only because its GCE library registers it)")

    # --- Removed upstream, accepted with a warning ---------------------------------------------
    max_empty_bulk_delete: int = opt(10, "Removed upstream: empty nodes now share --max-scale-down-parallelism.", deprecated="use --max-scale-down-parallelism", group="deprecated")
    parallel_drain: bool = opt(True, "Removed upstream: parallel drain is always on.", deprecated="parallel drain is always on; use --max-drain-parallelism", group="deprecated")
    node_autoprovisioning_enabled: bool = opt(False, "Removed upstream: node auto-provisioning is not supported.", deprecated="node auto-provisioning is not supported", group="deprecated")
    max_autoprovisioned_node_group_count: int = opt(15, "Removed upstream: node auto-provisioning is not supported.", deprecated="node auto-provisioning is not supported", group="deprecated")

    # Values of flags added by plugins through `clusterscaler_add_options`, by argparse dest.
    extra: dict[str, object] = field(default_factory=dict, metadata={"flag": None, "internal": True})
    # What `--scheduler-config-file` configures, read and checked when the flags are parsed.
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig, metadata={"flag": None, "internal": True})

    @property
    def lease_namespace(self) -> str:
        return self.leader_elect_resource_namespace or self.namespace


@dataclass(frozen=True, slots=True)
class FlagSpec:
    """One flag as derived from the option table."""

    name: str  # without dashes, e.g. "scan-interval"
    dest: str  # AutoscalingOptions field
    kind: str
    default: Any
    help: str
    group: str
    deprecated: str | None
    no_effect: str | None = None
    # The distribution that defines the flag through `clusterscaler_add_options`; its value
    # is then in `AutoscalingOptions.extra` under `dest`. None: a field of the table.
    owner: str | None = None

    @property
    def flag(self) -> str:
        return f"--{self.name}"

    @property
    def form(self) -> str:
        return FORMS[self.kind]

    def parse(self, text: str) -> Any:
        return parse_value(self.kind, self.flag, text)


def flag_specs() -> list[FlagSpec]:
    """The option table, in declaration order."""
    specs = []
    defaults = AutoscalingOptions()
    for f in dataclasses.fields(AutoscalingOptions):
        if f.metadata.get("internal"):
            continue
        specs.append(
            FlagSpec(
                name=f.metadata.get("flag") or f.name.replace("_", "-"),
                dest=f.name,
                kind=f.metadata["kind"],
                default=getattr(defaults, f.name),
                help=f.metadata["help"],
                group=f.metadata["group"],
                deprecated=f.metadata.get("deprecated"),
                no_effect=f.metadata.get("no_effect"),
            )
        )
    return specs


def _provider_flag(
    name: str, default: Any, kind: str, help: str, owner: str, no_effect: str
) -> FlagSpec:
    return FlagSpec(
        name=name,
        dest=name.replace("-", "_"),
        kind=kind,
        default=default,
        help=help,
        group="cloud-provider",
        deprecated=None,
        no_effect=no_effect,
        owner=owner,
    )


def _not_installed(distribution: str) -> str:
    return f"{distribution}, which reads it, is not installed"


# Upstream flags of one cloud provider. The provider's distribution defines each flag it
# honours; where none does, the core defines it (with `no_effect` as the reason) so that a
# Cluster Autoscaler command line still parses.
PROVIDER_FLAGS: tuple[FlagSpec, ...] = (
    _provider_flag("aws-use-static-instance-list", False, BOOL, "Should CA fetch instance types in runtime or use a static list. AWS only.", "clusterscaler-aws", _not_installed("clusterscaler-aws")),
    _provider_flag("gce-concurrent-refreshes", 1, INT, "Maximum number of concurrent refreshes per cloud object type. GCE only.", "clusterscaler-gce", _not_installed("clusterscaler-gce")),
    _provider_flag("gce-mig-instances-min-refresh-wait-time", timedelta(seconds=5), DURATION, "The minimum time which needs to pass before GCE MIG instances from a given MIG can be refreshed. GCE only.", "clusterscaler-gce", _not_installed("clusterscaler-gce")),
    _provider_flag("bulk-mig-instances-listing-enabled", False, BOOL, "Fetch GCE MIG instances in bulk instead of per MIG. GCE only.", "clusterscaler-gce", "MIG instances are listed per MIG"),
    _provider_flag("clusterapi-cloud-config-authoritative", False, BOOL, "Treat the cloud-config flag authoritatively (do not fall back to the kubeconfig flag). ClusterAPI only.", "clusterscaler-machineapi", _not_installed("clusterscaler-machineapi")),
)  # fmt: skip


def all_flag_specs() -> list[FlagSpec]:
    """The option table and the cloud-provider flags: every flag the autoscaler accepts."""
    return [*flag_specs(), *PROVIDER_FLAGS]


def validate(options: AutoscalingOptions) -> None:
    """Check relations between values that no single flag can check. Raises `OptionError`."""
    checks: list[tuple[str, Any, bool, str]] = [
        ("--scale-down-utilization-threshold", options.scale_down_utilization_threshold,
         0.0 <= options.scale_down_utilization_threshold <= 1.0, "a number between 0 and 1"),
        ("--scale-down-gpu-utilization-threshold", options.scale_down_gpu_utilization_threshold,
         0.0 <= options.scale_down_gpu_utilization_threshold <= 1.0, "a number between 0 and 1"),
        ("--max-total-unready-percentage", options.max_total_unready_percentage,
         0.0 <= options.max_total_unready_percentage <= 100.0, "a percentage between 0 and 100"),
        ("--scale-down-candidates-pool-ratio", options.scale_down_candidates_pool_ratio,
         0.0 <= options.scale_down_candidates_pool_ratio <= 1.0, "a number between 0 and 1"),
        ("--max-nodes-total", options.max_nodes_total, options.max_nodes_total >= 0,
         "a non-negative integer (0: no limit)"),
        ("--max-nodes-per-scaleup", options.max_nodes_per_scaleup,
         options.max_nodes_per_scaleup > 0, "a positive integer"),
        ("--max-scale-down-parallelism", options.max_scale_down_parallelism,
         options.max_scale_down_parallelism > 0, "a positive integer"),
        ("--max-drain-parallelism", options.max_drain_parallelism,
         options.max_drain_parallelism > 0, "a positive integer"),
        ("--max-graceful-termination-sec", options.max_graceful_termination_sec,
         options.max_graceful_termination_sec >= 0, "a non-negative integer"),
        ("--ok-total-unready-count", options.ok_total_unready_count,
         options.ok_total_unready_count >= 0, "a non-negative integer"),
        ("--min-replica-count", options.min_replica_count, options.min_replica_count >= 0,
         "a non-negative integer"),
        ("--kube-client-qps", options.kube_client_qps, options.kube_client_qps > 0,
         "a positive number"),
        ("--kube-client-burst", options.kube_client_burst, options.kube_client_burst > 0,
         "a positive integer"),
        ("--scan-interval", format_duration(options.scan_interval),
         options.scan_interval > timedelta(0), "a positive Go duration such as 10s"),
        ("--logging-format", options.logging_format, options.logging_format in ("text", "json"),
         "text or json"),
        ("--v", options.v, options.v >= 0, "a non-negative integer"),
        ("--leader-elect-resource-lock", options.leader_elect_resource_lock,
         options.leader_elect_resource_lock in ("leases",), "leases"),
        ("--leader-elect-renew-deadline", format_duration(options.leader_elect_renew_deadline),
         options.leader_elect_renew_deadline <= options.leader_elect_lease_duration,
         "a duration no longer than --leader-elect-lease-duration "
         f"({format_duration(options.leader_elect_lease_duration)})"),
        ("--leader-elect-retry-period", format_duration(options.leader_elect_retry_period),
         options.leader_elect_retry_period < options.leader_elect_renew_deadline,
         "a duration shorter than --leader-elect-renew-deadline "
         f"({format_duration(options.leader_elect_renew_deadline)})"),
        ("--expander", ",".join(options.expander), bool(options.expander),
         "a comma-separated list of expander names"),
        ("--predicate-parallelism", options.predicate_parallelism,
         options.predicate_parallelism >= 1, "a positive integer"),
        ("--enable-dynamic-resource-allocation", options.enable_dynamic_resource_allocation,
         options.enable_dynamic_resource_allocation, "true (locked to true, as upstream)"),
        ("--v", options.v, options.v <= MAX_VERBOSITY, f"at most {MAX_VERBOSITY}"),
    ]
    for flag, value, ok, expected in checks:
        if not ok:
            raise OptionError(flag, value, expected)
    _validate_schedulers(options)
    _validate_logging(options)
    if options.drain_priority_config and options.max_graceful_termination_sec != DEFAULT_GRACEFUL_TERMINATION:
        raise OptionError(
            "--drain-priority-config",
            format_value(PRIORITY_GRACE, options.drain_priority_config),
            "no --max-graceful-termination-sec besides it (its default "
            f"{DEFAULT_GRACEFUL_TERMINATION}): each priority group carries its own grace period",
        )
    gpu_types = [limit.gpu_type for limit in options.gpu_total]
    duplicates = sorted({t for t in gpu_types if gpu_types.count(t) > 1})
    if duplicates:
        raise OptionError(
            "--gpu-total", duplicates[0], "each GPU type at most once"
        )


DEFAULT_GRACEFUL_TERMINATION = 600
MAX_VERBOSITY = 2**31 - 1
# Feature gates that change something here: they gate the logging options, as upstream.
LOGGING_GATES = frozenset({"LoggingAlphaOptions", "LoggingBetaOptions", "AllAlpha", "AllBeta"})


def logging_gate(options: AutoscalingOptions, name: str) -> bool:
    """Whether LoggingAlphaOptions or LoggingBetaOptions is on (AllAlpha and AllBeta count)."""
    alpha = name == "LoggingAlphaOptions"
    every = options.feature_gates.get("AllAlpha" if alpha else "AllBeta", not alpha)
    return options.feature_gates.get(name, every)


def _validate_schedulers(options: AutoscalingOptions) -> None:
    if not options.allowed_scheduler_names:
        return
    for name in options.bypassed_scheduler_names:
        if name not in options.allowed_scheduler_names:
            raise OptionError(
                "--bypassed-scheduler-names",
                name,
                "a subset of --allowed-scheduler-names "
                f"({','.join(options.allowed_scheduler_names)})",
            )


def _validate_logging(options: AutoscalingOptions) -> None:
    if options.vmodule and options.logging_format != "text":
        raise OptionError(
            "--vmodule",
            format_value(VMODULE, options.vmodule),
            "no value with --logging-format=json (only the text format supports it)",
        )
    if options.logging_format == "json" and not logging_gate(options, "LoggingBetaOptions"):
        raise OptionError(
            "--logging-format", "json", "text while --feature-gates=LoggingBetaOptions=false"
        )
    if logging_gate(options, "LoggingAlphaOptions"):
        return
    for flag, value, default in (
        ("--log-json-split-stream", options.log_json_split_stream, False),
        ("--log-json-info-buffer-size", options.log_json_info_buffer_size, 0),
        ("--log-text-split-stream", options.log_text_split_stream, False),
        ("--log-text-info-buffer-size", options.log_text_info_buffer_size, 0),
    ):
        if value != default:
            raise OptionError(
                flag,
                str(value).lower(),
                f"its default ({str(default).lower()}) unless "
                "--feature-gates=LoggingAlphaOptions=true",
            )


def ineffective_values(
    options: AutoscalingOptions, fallbacks: Sequence[FlagSpec] = ()
) -> list[tuple[FlagSpec, str]]:
    """The flags set to something other than their default that change nothing here, with
    the value as given; `fallbacks` are the `PROVIDER_FLAGS` the core defined."""
    found = []
    values = [(spec, getattr(options, spec.dest)) for spec in flag_specs()]
    values += [(spec, options.extra.get(spec.dest, spec.default)) for spec in fallbacks]
    for spec, value in values:
        if spec.no_effect and value != spec.default:
            found.append((spec, value if spec.kind == STRING else format_value(spec.kind, value)))
    return found


def ineffective_feature_gates(options: AutoscalingOptions) -> list[str]:
    """The feature gates given that change nothing here (only the logging gates do)."""
    return sorted(name for name in options.feature_gates if name not in LOGGING_GATES)


def adjust(options: AutoscalingOptions) -> list[tuple[str, dict[str, Any]]]:
    """Apply upstream's corrections of values that contradict others, in place; return a
    warning (event and fields) for each."""
    warnings: list[tuple[str, dict[str, Any]]] = []
    longest = max(options.max_inactivity, options.max_failing_time, options.max_startup_time)
    if options.max_startup_time < longest:
        warnings.append(
            (
                "max_startup_time_raised",
                {
                    "flag": "--max-startup-time",
                    "value": format_duration(options.max_startup_time),
                    "raised_to": format_duration(longest),
                    "reason": "at least --max-inactivity and --max-failing-time",
                },
            )
        )
        options.max_startup_time = longest
    return warnings


def validate_names(
    flag: str, names: Sequence[str], installed: Sequence[str], kind: str
) -> None:
    """Check that every name in a plugin-backed flag is installed; list the choices if not."""
    for name in names:
        if name not in installed:
            choices = ", ".join(sorted(installed)) or "none installed"
            raise OptionError(flag, name, f"one of the installed {kind}: {choices}")


ValueParser = Callable[[str], Any]


# Default of every autoscaler flag in the parser, so that a flag given on the command line
# can be told from one left at its default (scenario files yield to given flags).
UNSET: Any = object()


def flag_given(ns: argparse.Namespace, dest: str) -> bool:
    """Whether the flag of `dest` was given on the command line (not just defaulted)."""
    raw = getattr(ns, dest, UNSET)
    return raw is not UNSET and raw is not None


def options_from_namespace(
    ns: argparse.Namespace, parser_dests: set[str]
) -> tuple[AutoscalingOptions, list[FlagSpec]]:
    """Build options from parsed flags; also return the deprecated flags that were given."""
    values: dict[str, Any] = {}
    deprecated_given: list[FlagSpec] = []
    for spec in flag_specs():
        if not flag_given(ns, spec.dest):
            continue
        raw = getattr(ns, spec.dest)
        if spec.kind == STRING_SLICE:
            raw = [item for chunk in raw for item in chunk]
        elif spec.kind == FEATURE_GATES:
            raw = {name: value for chunk in raw for name, value in chunk.items()}
        values[spec.dest] = raw
        if spec.deprecated:
            deprecated_given.append(spec)
    known = {spec.dest for spec in flag_specs()} | {"disable_plugins", "command"}
    extra = {
        dest: getattr(ns, dest)
        for dest in sorted(parser_dests)
        if dest not in known and hasattr(ns, dest)
    }
    return AutoscalingOptions(**values, extra=extra), deprecated_given
