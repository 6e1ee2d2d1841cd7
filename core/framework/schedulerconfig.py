"""`--scheduler-config-file`: the KubeSchedulerConfiguration the simulation follows.

Cluster Autoscaler reads the cluster's kube-scheduler configuration and runs its PreFilter
and Filter plugins as that profile configures them. `load_scheduler_config` reads the same
file (YAML or JSON, `kubescheduler.config.k8s.io/v1`, or `v1beta3`) and keeps what changes
where a pod fits, as a plain `SchedulerConfig`:

- the filter plugins whose Filter the profile switches off, resolved per extension point
  as kube-scheduler does: a plugin is off at `filter` when `plugins.filter.disabled` names
  it (or `"*"`), or when `plugins.multiPoint.disabled` does and `plugins.filter.enabled`
  does not enable it again. Disabling a plugin at `preFilter` only leaves its Filter
  unchanged for plugins whose Filter does without it (TaintToleration, NodeUnschedulable,
  NodeName and NodeVolumeLimits have nothing there; NodeAffinity and VolumeZone compute
  what they need); for the others kube-scheduler's Filter fails for every pod, so such a
  profile is refused;
- `NodeResourcesFitArgs.ignoredResources` and `ignoredResourceGroups` (extended resources
  the fit check skips);
- `PodTopologySpreadArgs.defaultConstraints` with `defaultingType: List` (the System
  defaults are ScheduleAnyway: they only score, so they change no filter);
- `NodeAffinityArgs.addedAffinity`'s required node selector terms, which every pod must
  match besides its own node selector and affinity.

Like Cluster Autoscaler, one profile only is accepted (none: kube-scheduler's defaults;
an empty entry is the default profile). Bad input raises `SchedulerConfigError`, naming
the file, the field and the form expected; plugin names the simulation does not know are returned in
`SchedulerConfig.unknown_plugins` for the caller to warn about.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.model import (
    ModelError,
    NodeSelectorTerm,
    TopologySpreadConstraint,
    parse_node_selector_terms,
)
from clusterscaler.model.common import describe_value
from clusterscaler.model.yamltext import (
    MAX_CONFIG_FILE_BYTES,
    YamlFileError,
    load_yaml,
    read_parsed_file,
)

__all__ = [
    "API_VERSIONS",
    "FILTER_PLUGINS",
    "KNOWN_PLUGINS",
    "SchedulerConfig",
    "SchedulerConfigError",
    "is_extended_resource",
    "load_scheduler_config",
    "parse_scheduler_config",
]

API_VERSIONS = ("kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1beta3")
DEFAULT_SCHEDULER = "default-scheduler"

# The in-tree plugins that act at PreFilter or Filter and that the simulation checks, in
# kube-scheduler's filter order. VolumeZone and VolumeBinding are checked apart.
FILTER_PLUGINS = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",
)

# Every other in-tree plugin name: accepted anywhere, with nothing to change in a
# simulation of PreFilter and Filter (scoring, binding, queueing, or not simulated).
_OTHER_IN_TREE = (
    "PrioritySort",
    "SchedulingGates",
    "DefaultPreemption",
    "DefaultBinder",
    "ImageLocality",
    "NodeResourcesBalancedAllocation",
    "EBSLimits",
    "GCEPDLimits",
    "AzureDiskLimits",
    "CinderLimits",
    "SelectorSpread",
)
KNOWN_PLUGINS = frozenset(FILTER_PLUGINS + _OTHER_IN_TREE)

# The fields of each plugin's args (kube-scheduler's v1 types); any other is an error.
_ARGS_FIELDS: Mapping[str, frozenset[str]] = {
    "NodeResourcesFit": frozenset({"ignoredResources", "ignoredResourceGroups", "scoringStrategy"}),
    "PodTopologySpread": frozenset({"defaultConstraints", "defaultingType"}),
    "InterPodAffinity": frozenset({"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"}),
    "NodeAffinity": frozenset({"addedAffinity"}),
    "VolumeBinding": frozenset({"bindTimeoutSeconds", "shape"}),
    "NodeResourcesBalancedAllocation": frozenset({"resources"}),
    "DefaultPreemption": frozenset({"minCandidateNodesPercentage", "minCandidateNodesAbsolute"}),
    "DynamicResources": frozenset({"filterTimeout"}),
}

_TOP_FIELDS = frozenset(
    {
        "apiVersion",
        "kind",
        "parallelism",
        "leaderElection",
        "clientConnection",
        "healthzBindAddress",
        "metricsBindAddress",
        "enableProfiling",
        "enableContentionProfiling",
        "percentageOfNodesToScore",
        "podInitialBackoffSeconds",
        "podMaxBackoffSeconds",
        "profiles",
        "extenders",
        "delayCacheUntilActive",
    }
)
_PROFILE_FIELDS = frozenset(
    {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
)
_EXTENSION_POINTS = frozenset(
    {
        "preEnqueue",
        "queueSort",
        "preFilter",
        "filter",
        "postFilter",
        "preScore",
        "score",
        "reserve",
        "permit",
        "preBind",
        "bind",
        "postBind",
        "multiPoint",
    }
)
# The filter plugins whose Filter reads the state their PreFilter writes and returns an
# error for every pod without it (kube-scheduler's pkg/scheduler/framework/plugins). The
# other filter plugins have no PreFilter (NodeUnschedulable, NodeName, TaintToleration),
# one that only skips (NodeVolumeLimits), or a Filter computing what it needs itself
# (NodeAffinity, VolumeZone).
_NEEDS_PREFILTER = frozenset(
    {
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
    }
)
_SPREAD_FIELDS = frozenset(
    {
        "maxSkew",
        "topologyKey",
        "whenUnsatisfiable",
        "labelSelector",
        "minDomains",
        "nodeAffinityPolicy",
        "nodeTaintsPolicy",
        "matchLabelKeys",
    }
)


class SchedulerConfigError(ValueError):
    """The scheduler configuration file is unreadable or holds a value of the wrong form."""


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """What of the scheduler's configuration changes where pods fit; the default changes
    nothing. `disabled_filters` names entries of `FILTER_PLUGINS`; `default_spread` holds
    the List default constraints (without selector: it is derived per pod)."""

    path: str = ""
    profile: str = DEFAULT_SCHEDULER
    disabled_filters: frozenset[str] = frozenset()
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()
    default_spread: tuple[TopologySpreadConstraint, ...] = ()
    # NodeAffinity's addedAffinity (required terms, ORed); `None`: none.
    added_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    unknown_plugins: tuple[str, ...] = field(default=(), compare=False)

    @property
    def changes_filters(self) -> bool:
        """Whether any filter runs differently from kube-scheduler's defaults."""
        return bool(
            self.disabled_filters
            or self.ignored_resources
            or self.ignored_resource_groups
            or self.added_node_affinity is not None
        )

    @property
    def filters_default_spread(self) -> bool:
        """Whether a default constraint rejects nodes (whenUnsatisfiable DoNotSchedule)."""
        return "PodTopologySpread" not in self.disabled_filters and any(
            c.when_unsatisfiable == "DoNotSchedule" for c in self.default_spread
        )

    def ignores_resource(self, name: str) -> bool:
        """Whether NodeResourcesFit skips the extended resource `name`."""
        if not is_extended_resource(name):
            return False
        return (
            name in self.ignored_resources or name.split("/", 1)[0] in self.ignored_resource_groups
        )


def is_extended_resource(name: str) -> bool:
    """An extended resource as Kubernetes defines it: a domain-prefixed name outside the
    `kubernetes.io` domains (so not cpu, memory, hugepages-*, ...)."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _json_or_yaml(text: str) -> Any:
    """A JSON document (the text starts with `{`) read as JSON, any other as YAML."""
    return json.loads(text) if text.lstrip().startswith("{") else load_yaml(text)


def load_scheduler_config(path: str) -> SchedulerConfig:
    """Read and check the file at `path`. Raises `SchedulerConfigError`."""
    try:
        doc = read_parsed_file(
            path, f"--scheduler-config-file {path}", "a KubeSchedulerConfiguration",
            _json_or_yaml, max_bytes=MAX_CONFIG_FILE_BYTES, language="YAML or JSON",
        )
    except YamlFileError as exc:
        raise SchedulerConfigError(str(exc)) from None
    return parse_scheduler_config(doc, path)


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path

    def error(self, where: str, expected: str, value: Any) -> SchedulerConfigError:
        # The value quoted in a line: a 5,000-character string is not echoed whole.
        return self.fail(where, f"expected {expected}, got {describe_value(value)}")

    def fail(self, where: str, message: str) -> SchedulerConfigError:
        if len(where) > 300:  # a field path holding the file's own keys
            where = f"{where[:200]}... ({len(where)} characters)"
        return SchedulerConfigError(f"--scheduler-config-file {self.path}: {where}: {message}")

    def mapping(self, value: Any, where: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(where, "a mapping", value)
        return value

    def sequence(self, value: Any, where: str) -> Sequence[Any]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(where, "a list", value)
        return value

    def only(self, value: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
        unknown = sorted(str(k) for k in value if k not in allowed)
        if unknown:
            prefix = f"{where}." if where else ""
            name = unknown[0]
            # A blank key, or one holding a line break, is quoted: named, on one line.
            shown = name if name.strip() and name.isprintable() else describe_value(name)
            raise self.error(
                f"{prefix}{shown}",
                "one of the known fields " + ", ".join(sorted(allowed)),
                "unknown field",
            )

    def strings(self, value: Any, where: str) -> tuple[str, ...]:
        items = self.sequence(value, where)
        for i, item in enumerate(items):
            if not isinstance(item, str) or not item:
                raise self.error(f"{where}[{i}]", "a non-empty string", item)
        return tuple(items)


def parse_scheduler_config(doc: Any, path: str) -> SchedulerConfig:
    """Check a decoded KubeSchedulerConfiguration; `path` names it in errors."""
    r = _Reader(path)
    if not isinstance(doc, Mapping):
        raise r.error("the document", "a KubeSchedulerConfiguration mapping", doc)
    if doc.get("apiVersion") not in API_VERSIONS:
        raise r.error("apiVersion", " or ".join(API_VERSIONS), doc.get("apiVersion"))
    if doc.get("kind") != "KubeSchedulerConfiguration":
        raise r.error("kind", "KubeSchedulerConfiguration", doc.get("kind"))
    r.only(doc, _TOP_FIELDS, "")
    # An empty entry (`- ` alone) is a profile with every field defaulted.
    profiles = [
        r.mapping(p, f"profiles[{i}]")
        for i, p in enumerate(r.sequence(doc.get("profiles"), "profiles"))
    ]
    for i, p in enumerate(profiles):
        r.only(p, _PROFILE_FIELDS, f"profiles[{i}]")
    if not profiles:
        return SchedulerConfig(path=path)
    if len(profiles) > 1:
        # Cluster Autoscaler simulates one scheduler and refuses more profiles.
        raise r.fail(
            "profiles",
            f"expected one scheduler profile only (found {len(profiles)} profiles),"
            " as Cluster Autoscaler simulates one scheduler",
        )
    profile = profiles[0]
    where = "profiles[0]"
    name = profile.get("schedulerName") or DEFAULT_SCHEDULER
    if not isinstance(name, str):
        raise r.error(f"{where}.schedulerName", "a string", name)
    unknown: list[str] = []
    disabled = _disabled_filters(r, profile.get("plugins"), f"{where}.plugins", unknown)
    ignored: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    spread: tuple[TopologySpreadConstraint, ...] = ()
    seen: set[str] = set()
    added: tuple[NodeSelectorTerm, ...] | None = None
    for i, entry in enumerate(r.sequence(profile.get("pluginConfig"), f"{where}.pluginConfig")):
        at = f"{where}.pluginConfig[{i}]"
        entry = r.mapping(entry, at)
        r.only(entry, frozenset({"name", "args"}), at)
        plugin = entry.get("name")
        if not isinstance(plugin, str) or not plugin:
            raise r.error(f"{at}.name", "a plugin name", plugin)
        if plugin in seen:
            raise r.error(f"{at}.name", "each plugin configured once", plugin)
        seen.add(plugin)
        args = r.mapping(entry.get("args"), f"{at}.args")
        fields = _ARGS_FIELDS.get(plugin)
        if fields is None:
            if plugin not in unknown:
                unknown.append(plugin)
            continue
        r.only(args, fields | {"apiVersion", "kind"}, f"{at}.args")
        if plugin == "NodeResourcesFit":
            ignored = r.strings(args.get("ignoredResources"), f"{at}.args.ignoredResources")
            groups = r.strings(
                args.get("ignoredResourceGroups"), f"{at}.args.ignoredResourceGroups"
            )
            for j, g in enumerate(groups):
                if "/" in g:
                    raise r.error(
                        f"{at}.args.ignoredResourceGroups[{j}]", "a resource group without '/'", g
                    )
        elif plugin == "PodTopologySpread":
            spread = _default_spread(r, args, f"{at}.args")
        elif plugin == "NodeAffinity":
            added = _added_affinity(r, args.get("addedAffinity"), f"{at}.args.addedAffinity")
    return SchedulerConfig(
        path=path,
        profile=name,
        disabled_filters=disabled,
        ignored_resources=frozenset(ignored),
        ignored_resource_groups=frozenset(groups),
        default_spread=spread,
        unknown_plugins=tuple(unknown),
        added_node_affinity=added,
    )


def _disabled_filters(r: _Reader, value: Any, where: str, unknown: list[str]) -> frozenset[str]:
    """The filter plugins whose Filter the profile switches off, each extension point
    resolved as kube-scheduler resolves it (its v1 defaults enable every filter plugin at
    multiPoint)."""
    plugins = r.mapping(value, where)
    r.only(plugins, _EXTENSION_POINTS, where)
    # The names enabled and disabled at each point.
    points: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for point in sorted(plugins):
        at = f"{where}.{point}"
        sets = r.mapping(plugins[point], at)
        r.only(sets, frozenset({"enabled", "disabled"}), at)
        names: dict[str, set[str]] = {"enabled": set(), "disabled": set()}
        for kind in ("enabled", "disabled"):
            for i, item in enumerate(r.sequence(sets.get(kind), f"{at}.{kind}")):
                item_at = f"{at}.{kind}[{i}]"
                item = r.mapping(item, item_at)
                r.only(item, frozenset({"name", "weight"}), item_at)
                name = item.get("name")
                if not isinstance(name, str) or not name:
                    raise r.error(f"{item_at}.name", "a plugin name or *", name)
                if name != "*" and name not in KNOWN_PLUGINS and name not in unknown:
                    unknown.append(name)
                names[kind].add(name)
        points[point] = (frozenset(names["enabled"]), frozenset(names["disabled"]))
    none: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
    multi_enabled, multi_disabled = points.get("multiPoint", none)
    # multiPoint: the defaults less the disabled ones ("*": all), plus the enabled ones.
    multi = multi_enabled | (
        frozenset() if "*" in multi_disabled else frozenset(FILTER_PLUGINS) - multi_disabled
    )

    def runs(point: str, plugin: str) -> bool:
        # Enabled at the point itself, or at multiPoint and not disabled at the point.
        enabled, disabled = points.get(point, none)
        if plugin in enabled:
            return True
        return plugin in multi and plugin not in disabled and "*" not in disabled

    off: set[str] = set()
    for plugin in FILTER_PLUGINS:
        if not runs("filter", plugin):
            off.add(plugin)
        elif plugin in _NEEDS_PREFILTER and not runs("preFilter", plugin):
            if plugin in multi:
                raise r.fail(
                    f"{where}.preFilter.disabled",
                    f"{plugin}'s Filter needs its PreFilter (without it kube-scheduler's"
                    " Filter fails for every pod); disable it at filter or multiPoint",
                )
            raise r.fail(
                f"{where}.filter.enabled",
                f"{plugin}'s Filter needs its PreFilter (without it kube-scheduler's Filter"
                " fails for every pod), which multiPoint disables; enable it at preFilter"
                " as well",
            )
    return frozenset(off)


def _default_spread(
    r: _Reader, args: Mapping[str, Any], where: str
) -> tuple[TopologySpreadConstraint, ...]:
    # Unset or null: System, kube-scheduler's default.
    defaulting = args.get("defaultingType") or "System"
    if defaulting not in ("System", "List"):
        raise r.error(f"{where}.defaultingType", "System or List", defaulting)
    items = r.sequence(args.get("defaultConstraints"), f"{where}.defaultConstraints")
    if defaulting == "System":
        if items:
            raise r.error(
                f"{where}.defaultConstraints", "none with defaultingType System", "a list"
            )
        # kube-scheduler's System defaults (hostname maxSkew 3, zone maxSkew 5) are
        # ScheduleAnyway: they only score nodes.
        return ()
    out: list[TopologySpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(items):
        at = f"{where}.defaultConstraints[{i}]"
        c = r.mapping(c, at)
        r.only(c, _SPREAD_FIELDS, at)
        if c.get("labelSelector") is not None:
            raise r.error(
                f"{at}.labelSelector",
                "no selector (it is derived for each pod)",
                c["labelSelector"],
            )
        if c.get("matchLabelKeys"):
            raise r.error(f"{at}.matchLabelKeys", "no matchLabelKeys", c["matchLabelKeys"])
        skew = c.get("maxSkew")
        if not isinstance(skew, int) or isinstance(skew, bool) or skew < 1:
            raise r.error(f"{at}.maxSkew", "an integer >= 1", skew)
        key = c.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise r.error(f"{at}.topologyKey", "a node label key", key)
        when = c.get("whenUnsatisfiable")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise r.error(f"{at}.whenUnsatisfiable", "DoNotSchedule or ScheduleAnyway", when)
        if (key, when) in seen:
            raise r.error(at, "one constraint per topologyKey and whenUnsatisfiable", [key, when])
        seen.add((key, when))
        min_domains = c.get("minDomains")
        if min_domains is not None and (
            not isinstance(min_domains, int) or isinstance(min_domains, bool) or min_domains < 1
        ):
            raise r.error(f"{at}.minDomains", "an integer >= 1", min_domains)
        policies: list[str] = []
        for name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
            policy = c.get(name) or default
            if policy not in ("Honor", "Ignore"):
                raise r.error(f"{at}.{name}", "Honor or Ignore", policy)
            policies.append(str(policy))
        out.append(
            TopologySpreadConstraint(skew, key, when, None, min_domains, policies[0], policies[1])
        )
    return tuple(out)


def _added_affinity(r: _Reader, value: Any, where: str) -> tuple[NodeSelectorTerm, ...] | None:
    """The required terms of NodeAffinityArgs.addedAffinity (the preferred ones only
    score); `None` when there are none."""
    affinity = r.mapping(value, where)
    r.only(
        affinity,
        frozenset(
            {
                "requiredDuringSchedulingIgnoredDuringExecution",
                "preferredDuringSchedulingIgnoredDuringExecution",
            }
        ),
        where,
    )
    required_at = f"{where}.requiredDuringSchedulingIgnoredDuringExecution"
    required = r.mapping(
        affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), required_at
    )
    if not required:
        return None
    r.only(required, frozenset({"nodeSelectorTerms"}), required_at)
    try:
        terms = parse_node_selector_terms(
            required.get("nodeSelectorTerms"),
            f"--scheduler-config-file {r.path}",
            f"{required_at}.nodeSelectorTerms",
        )
    except ModelError as exc:
        raise SchedulerConfigError(str(exc)) from None
    if not terms:
        raise r.error(f"{required_at}.nodeSelectorTerms", "at least one term", [])
    return terms
