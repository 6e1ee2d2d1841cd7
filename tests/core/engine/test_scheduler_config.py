"""`--scheduler-config-file`: reading a KubeSchedulerConfiguration, and its profile applied to
the predicates (disabled filters, ignored resources) and to pods (List default spread
constraints)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import load_plugins, parse_autoscaler_args
from clusterscaler.framework.schedulerconfig import (
    FILTER_PLUGINS,
    SchedulerConfig,
    SchedulerConfigError,
    load_scheduler_config,
    parse_scheduler_config,
)
from clusterscaler.model import (
    ClusterObjects,
    Controller,
    LabelSelector,
    LabelSelectorRequirement,
    OwnerRef,
    Taint,
)
from clusterscaler.simulator import ClusterSnapshot, check_predicates, failing_predicates
from clusterscaler.simulator.builders import make_node, make_pod, spread
from clusterscaler.simulator.profile import configured_filters, with_default_spread

V1 = "kubescheduler.config.k8s.io/v1"


def config(*profiles: dict[str, Any], api: str = V1) -> SchedulerConfig:
    doc = {"apiVersion": api, "kind": "KubeSchedulerConfiguration", "profiles": list(profiles)}
    return parse_scheduler_config(doc, "sched.yaml")


def disabled(point: str, *names: str, enabled: tuple[str, ...] = ()) -> dict[str, Any]:
    sets: dict[str, Any] = {"disabled": [{"name": n} for n in names]}
    if enabled:
        sets["enabled"] = [{"name": n} for n in enabled]
    return {"plugins": {point: sets}}


def test_no_profile_changes_nothing() -> None:
    cfg = config()
    assert cfg == SchedulerConfig(path="sched.yaml")
    assert configured_filters(cfg) is None
    assert not cfg.filters_default_spread


@pytest.mark.parametrize("point", ["filter", "multiPoint"])
def test_disabled_filter_at_filter_or_multipoint(point: str) -> None:
    assert config(disabled(point, "TaintToleration")).disabled_filters == {"TaintToleration"}


@pytest.mark.parametrize("plugin", ["TaintToleration", "NodeUnschedulable", "NodeName", "NodeAffinity", "VolumeZone", "NodeVolumeLimits"])
def test_disabled_at_prefilter_leaves_a_filter_that_does_without_it(plugin: str) -> None:
    cfg = config(disabled("preFilter", plugin))
    assert cfg.disabled_filters == frozenset()
    assert configured_filters(cfg) is None


@pytest.mark.parametrize(
    "plugin", ["NodePorts", "NodeResourcesFit", "VolumeRestrictions", "VolumeBinding", "PodTopologySpread", "InterPodAffinity"]
)
def test_disabled_at_prefilter_only_is_refused_when_the_filter_needs_it(plugin: str) -> None:
    with pytest.raises(SchedulerConfigError) as err:
        config(disabled("preFilter", plugin))
    assert str(err.value) == (
        f"--scheduler-config-file sched.yaml: profiles[0].plugins.preFilter.disabled: {plugin}'s Filter needs its"
        " PreFilter (without it kube-scheduler's Filter fails for every pod); disable it at filter or multiPoint"
    )
    # "*" at preFilter too; disabling the Filter as well is fine.
    with pytest.raises(SchedulerConfigError, match=r"preFilter\.disabled: NodePorts's Filter needs its PreFilter"):
        config(disabled("preFilter", "*"))
    both = {"plugins": {"preFilter": {"disabled": [{"name": plugin}]}, "filter": {"disabled": [{"name": plugin}]}}}
    assert config(both).disabled_filters == {plugin}
    assert config(disabled("multiPoint", plugin)).disabled_filters == {plugin}


def test_enabled_and_disabled_are_resolved_per_extension_point() -> None:
    # Enabled at preFilter does not bring back the Filter disabled at filter.
    cfg = config({"plugins": {"filter": {"disabled": [{"name": "NodeAffinity"}]}, "preFilter": {"enabled": [{"name": "NodeAffinity"}]}}})
    assert cfg.disabled_filters == {"NodeAffinity"}
    # Disabled at multiPoint, enabled again at filter: the Filter runs.
    cfg = config({"plugins": {"multiPoint": {"disabled": [{"name": "TaintToleration"}]}, "filter": {"enabled": [{"name": "TaintToleration"}]}}})
    assert cfg.disabled_filters == frozenset()
    # multiPoint "*" with one enabled again there: only that one runs.
    cfg = config(disabled("multiPoint", "*", enabled=("NodeResourcesFit",)))
    assert cfg.disabled_filters == set(FILTER_PLUGINS) - {"NodeResourcesFit"}
    # Disabled at multiPoint, enabled at filter only: its PreFilter stays off.
    with pytest.raises(SchedulerConfigError) as err:
        config({"plugins": {"multiPoint": {"disabled": [{"name": "NodePorts"}]}, "filter": {"enabled": [{"name": "NodePorts"}]}}})
    assert str(err.value).startswith(
        "--scheduler-config-file sched.yaml: profiles[0].plugins.filter.enabled: NodePorts's Filter needs its PreFilter"
    )
    cfg = config(
        {
            "plugins": {
                "multiPoint": {"disabled": [{"name": "NodePorts"}]},
                "filter": {"enabled": [{"name": "NodePorts"}]},
                "preFilter": {"enabled": [{"name": "NodePorts"}]},
            }
        }
    )
    assert cfg.disabled_filters == frozenset()


def test_disabled_at_scoring_points_changes_no_filter() -> None:
    assert config(disabled("score", "TaintToleration")).disabled_filters == frozenset()


def test_star_disables_every_filter_but_the_ones_enabled_again() -> None:
    cfg = config(disabled("filter", "*", enabled=("NodeResourcesFit",)))
    filters = configured_filters(cfg)
    assert filters is not None
    assert [name for name, _ in filters] == ["NodeResourcesFit"]


def test_one_profile_only() -> None:
    batch = {"schedulerName": "batch", **disabled("filter", "NodePorts")}
    assert config(batch).disabled_filters == {"NodePorts"}
    assert config(batch).profile == "batch"
    with pytest.raises(SchedulerConfigError) as err:
        config(batch, {"schedulerName": "default-scheduler"})
    assert str(err.value) == (
        "--scheduler-config-file sched.yaml: profiles: expected one scheduler profile only (found 2 profiles),"
        " as Cluster Autoscaler simulates one scheduler"
    )


def test_an_empty_profile_is_the_default_one(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(f"apiVersion: {V1}\nkind: KubeSchedulerConfiguration\nprofiles:\n-\n")
    assert load_scheduler_config(str(path)) == SchedulerConfig(path=str(path))


def test_a_file_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_bytes(f"apiVersion: {V1}\nkind: KubeSchedulerConfiguration\n# caf\xe9\n".encode("latin-1"))
    with pytest.raises(SchedulerConfigError) as err:
        load_scheduler_config(str(path))
    assert str(err.value) == f"--scheduler-config-file {path}: expected UTF-8 text, got byte 0xe9 at offset 81"


def test_null_defaulting_type_is_system() -> None:
    cfg = config({"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": None}}]})
    assert cfg.default_spread == ()
    with pytest.raises(SchedulerConfigError, match="defaultConstraints: expected none with defaultingType System"):
        config({"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": None, "defaultConstraints": [{"maxSkew": 1}]}}]})


def test_v1beta3_json_file(tmp_path: Path) -> None:
    path = tmp_path / "sched.json"
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta3",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [disabled("filter", "NodeAffinity")],
    }
    path.write_text(json.dumps(doc))
    assert load_scheduler_config(str(path)).disabled_filters == {"NodeAffinity"}


def test_unknown_plugin_names_are_collected_not_rejected() -> None:
    cfg = config(
        {
            **disabled("filter", "MyFilter", "TaintToleration"),
            "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}],
        }
    )
    assert cfg.unknown_plugins == ("MyFilter", "Coscheduling")
    assert cfg.disabled_filters == {"TaintToleration"}


@pytest.mark.parametrize(
    ("profile", "field"),
    [
        ({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"ignored": []}}]}, "profiles[0].pluginConfig[0].args.ignored"),
        ({"pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeigth": 1}}]}, "profiles[0].pluginConfig[0].args.hardPodAffinityWeigth"),
        ({"plugins": {"filters": {}}}, "profiles[0].plugins.filters"),
        ({"schedulerNames": "x"}, "profiles[0].schedulerNames"),
        (
            {"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "System", "defaultConstraints": [{"maxSkew": 1}]}}]},
            "profiles[0].pluginConfig[0].args.defaultConstraints: expected none with defaultingType System",
        ),
        (
            {"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"a": "b"}}}
            ]}}]},
            "profiles[0].pluginConfig[0].args.defaultConstraints[0].labelSelector: expected no selector",
        ),
        (
            {"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "Lists"}}]},
            "profiles[0].pluginConfig[0].args.defaultingType: expected System or List, got 'Lists'",
        ),
        (
            {"pluginConfig": [{"name": "NodeResourcesFit", "args": {"ignoredResourceGroups": ["example.com/x"]}}]},
            "profiles[0].pluginConfig[0].args.ignoredResourceGroups[0]: expected a resource group without '/'",
        ),
    ],
    ids=["fit-arg", "affinity-arg", "extension-point", "profile-field", "system-with-list", "selector", "defaulting", "group"],
)
def test_bad_fields_are_named(profile: dict[str, Any], field: str) -> None:
    with pytest.raises(SchedulerConfigError) as err:
        config(profile)
    assert str(err.value).startswith(f"--scheduler-config-file sched.yaml: {field}")


def test_ignored_resources_are_extended_resources_only() -> None:
    cfg = config(
        {
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {"ignoredResources": ["example.com/dongle", "cpu"], "ignoredResourceGroups": ["nvidia.com"]},
                }
            ]
        }
    )
    assert cfg.ignores_resource("example.com/dongle")
    assert cfg.ignores_resource("nvidia.com/gpu")
    assert not cfg.ignores_resource("cpu")
    assert not cfg.ignores_resource("example.com/other")


def snapshot_of(cfg: SchedulerConfig, node: Any) -> ClusterSnapshot:
    return ClusterSnapshot.from_objects(ClusterObjects(nodes=[node]), configured_filters(cfg))


def test_disabled_taint_toleration_is_not_checked() -> None:
    node = make_node("n1", taints=[Taint("dedicated", "gpu", "NoSchedule")])
    pod = make_pod("p", "1")
    default = ClusterSnapshot.from_objects(ClusterObjects(nodes=[node]))
    assert check_predicates(pod, default.get("n1"), default) == "node(s) had untolerated taint {dedicated: gpu}"
    snap = snapshot_of(config(disabled("filter", "TaintToleration")), node)
    assert check_predicates(pod, snap.get("n1"), snap) is None
    assert failing_predicates(pod, snap.get("n1"), snap) == {}
    # Every other filter still runs.
    assert check_predicates(make_pod("big", "5"), snap.get("n1"), snap) == "Insufficient cpu"


def test_ignored_extended_resource_fits_but_cpu_is_still_checked() -> None:
    node = make_node("n1", "2")
    cfg = config({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"ignoredResources": ["example.com/dongle"]}}]})
    snap = snapshot_of(cfg, node)
    ni = snap.get("n1")
    assert check_predicates(make_pod("p", "1", extended={"example.com/dongle": 1}), ni, snap) is None
    assert check_predicates(make_pod("q", "1", extended={"example.com/other": 1}), ni, snap) == "Insufficient example.com/other"
    assert check_predicates(make_pod("r", "3", extended={"example.com/dongle": 1}), ni, snap) == "Insufficient cpu"


def test_disabled_resources_fit_places_pods_beyond_capacity() -> None:
    # The hinting scheduler's skip of full nodes stands for NodeResourcesFit, so it goes too.
    from clusterscaler.simulator import HintingSimulator

    snap = snapshot_of(config(disabled("filter", "NodeResourcesFit")), make_node("n1", "1"))
    result = HintingSimulator().try_schedule_pods(snap, [make_pod(f"p{i}", "1") for i in range(3)])
    assert [p.node_name for p in result.scheduled] == ["n1", "n1", "n1"]


LIST_ZONE = {
    "pluginConfig": [
        {
            "name": "PodTopologySpread",
            "args": {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 3, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"},
                ],
            },
        }
    ]
}


def owned(kind: str, name: str, api_version: str = "apps/v1") -> OwnerRef:
    return OwnerRef(kind, name, uid=f"uid-{name}", controller=True, api_version=api_version)


def test_default_spread_goes_to_pods_a_controller_selects() -> None:
    cfg = config(LIST_ZONE)
    assert cfg.filters_default_spread
    rs = Controller("ReplicaSet", "default", "web", selector=LabelSelector((("app", "web"),)))
    ss = Controller("StatefulSet", "default", "db", selector=LabelSelector((("tier", "db"),)))
    rc = Controller("ReplicationController", "default", "old", selector=LabelSelector((("app", "old"),)))
    web = [make_pod(f"web-{i}", "1", labels={"app": "web"}, owner=owned("ReplicaSet", "web")) for i in range(2)]
    own = make_pod(
        "own", "1", labels={"app": "web"}, owner=owned("ReplicaSet", "web"),
        topology_spread=(spread("kubernetes.io/hostname", {"app": "web"}),),
    )
    # Matching a controller's selector is not enough: the pod's controller owner counts.
    lone = make_pod("lone", "1", labels={"app": "web"})
    other_ns = make_pod("elsewhere", "1", labels={"app": "web"}, namespace="other", owner=owned("ReplicaSet", "web"))
    db = make_pod("db-0", "1", labels={"app": "web", "tier": "db"}, owner=owned("StatefulSet", "db"))
    old = make_pod("old-x", "1", labels={"app": "old"}, owner=owned("ReplicationController", "old", "v1"))
    job = make_pod("job-x", "1", labels={"app": "web"}, owner=owned("Job", "web", "batch/v1"))
    pods = [*web, own, lone, other_ns, db, old, job]
    out = with_default_spread(ClusterObjects(pods=pods, controllers=[rs, ss, rc]), cfg)
    by_name = {p.name: p for p in out.pods}
    constraints = by_name["web-0"].topology_spread
    assert [(c.topology_key, c.when_unsatisfiable, c.max_skew) for c in constraints] == [
        ("topology.kubernetes.io/zone", "DoNotSchedule", 1),
        ("kubernetes.io/hostname", "ScheduleAnyway", 3),
    ]
    assert constraints[0].label_selector == LabelSelector((("app", "web"),))
    # Pods of one workload share the constraints (compared by identity first).
    assert by_name["web-1"].topology_spread is constraints
    # A pod's own constraints win; no controller owner (or none in its namespace), no defaults.
    assert by_name["own"] is own
    assert by_name["lone"] is lone
    assert by_name["elsewhere"] is other_ns
    assert by_name["job-x"] is job
    # Selected by the ReplicaSet too, but owned by the StatefulSet: its selector alone.
    assert by_name["db-0"].topology_spread[0].label_selector == LabelSelector((("tier", "db"),))
    assert by_name["old-x"].topology_spread[0].label_selector == LabelSelector((("app", "old"),))


def test_scoring_only_defaults_leave_pods_alone() -> None:
    objects = ClusterObjects(
        pods=[make_pod("web-0", "1", labels={"app": "web"}, owner=owned("ReplicaSet", "web"))],
        controllers=[Controller("ReplicaSet", "default", "web", selector=LabelSelector((("app", "web"),)))],
    )
    assert with_default_spread(objects, config(LIST_ZONE)) is not objects
    system = config({"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "System"}}]})
    assert with_default_spread(objects, system) is objects
    off = config({**LIST_ZONE, **disabled("filter", "PodTopologySpread")})
    assert with_default_spread(objects, off) is objects


def test_flags_load_the_file_and_warn_about_what_is_not_simulated(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    doc = {
        "apiVersion": V1,
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                **disabled("filter", "TaintToleration", "MyFilter"),
                "pluginConfig": [
                    {"name": "NodeAffinity", "args": {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}
                ],
            }
        ],
    }
    path.write_text(json.dumps(doc))
    host, registry = load_plugins([])
    options, ns = parse_autoscaler_args([f"--scheduler-config-file={path}"], host, registry, warn=False)
    assert options.scheduler_config.disabled_filters == {"TaintToleration"}
    events = dict(ns.startup_warnings)
    assert events == {
        "scheduler_plugins_not_simulated": {
            "file": str(path),
            "plugins": "MyFilter",
            "reason": "not in-tree kube-scheduler plugins; the simulation runs the in-tree filters only",
        }
    }


def test_added_affinity_is_required_of_every_pod() -> None:
    pool = {"key": "pool", "operator": "In", "values": ["general"]}
    cfg = config(
        {
            "pluginConfig": [
                {
                    "name": "NodeAffinity",
                    "args": {
                        "addedAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [pool]}]},
                            "preferredDuringSchedulingIgnoredDuringExecution": [],
                        }
                    },
                }
            ]
        }
    )
    general = make_node("general-1", labels={"pool": "general", "zone": "a"})
    batch = make_node("batch-1", labels={"pool": "batch", "zone": "a"})
    snap = ClusterSnapshot.from_objects(ClusterObjects(nodes=[general, batch]), configured_filters(cfg))
    pod = make_pod("p", "1")
    assert check_predicates(pod, snap.get("general-1"), snap) is None
    assert check_predicates(pod, snap.get("batch-1"), snap) == "node(s) didn't match Pod's node affinity/selector"
    # The pod's own selector still applies on top.
    picky = make_pod("q", "1", node_selector={"zone": "b"})
    assert check_predicates(picky, snap.get("general-1"), snap) == "node(s) didn't match Pod's node affinity/selector"


def test_bad_added_affinity_names_the_field() -> None:
    bad = {"matchExpressions": [{"key": "pool", "operator": "Is", "values": ["x"]}]}
    profile = {
        "pluginConfig": [
            {"name": "NodeAffinity", "args": {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [bad]}}}}
        ]
    }
    with pytest.raises(SchedulerConfigError) as err:
        config(profile)
    assert str(err.value).startswith(
        "--scheduler-config-file sched.yaml: profiles[0].pluginConfig[0].args.addedAffinity"
        ".requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: expected one of"
    )


def test_default_spread_keeps_its_copies_between_loops() -> None:
    from clusterscaler.simulator.profile import DefaultSpread

    spread_of = DefaultSpread(config(LIST_ZONE))
    pod = make_pod("web-0", "1", labels={"app": "web"}, owner=owned("ReplicaSet", "web"))
    rs = Controller("ReplicaSet", "default", "web", selector=LabelSelector((("app", "web"),)))
    first = spread_of(ClusterObjects(pods=[pod], controllers=[rs])).pods[0]
    again = spread_of(ClusterObjects(pods=[pod], controllers=[rs])).pods[0]
    assert again is first
    # Other controllers selecting the pod change nothing.
    ss = Controller("StatefulSet", "default", "db", selector=LabelSelector((("app", "web"),), ()))
    wider = Controller("ReplicationController", "default", "rc", selector=LabelSelector((("app", "web"),)))
    assert spread_of(ClusterObjects(pods=[pod], controllers=[rs, ss, wider])).pods[0] is first
    # Its controller's selector changing: a new copy.
    expr = Controller(
        "ReplicaSet",
        "default",
        "web",
        selector=LabelSelector((("app", "web"),), (LabelSelectorRequirement("app", "In", ("web",)),)),
    )
    narrowed = spread_of(ClusterObjects(pods=[pod], controllers=[expr])).pods[0]
    assert narrowed is not first
    assert narrowed.topology_spread[0].label_selector == expr.selector
