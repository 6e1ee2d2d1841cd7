"""The benchmark's generators produce snapshots, cloud-configs and flags that
`clusterscaler simulate` accepts, with the sizes and expectations the issue states."""

from __future__ import annotations

import json

import pytest
from clusterscaler.offline.loader import parse_snapshot_doc
from clusterscaler.plugins.sim.config import parse_cloud_config
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.scenarios import ROWS, Decision, Expected, check, generate, upstream

SMALL = 0.01


@pytest.mark.parametrize("name", list(ROWS), ids=list(ROWS))
def test_snapshot_parses_with_the_declared_sizes(name: str) -> None:
    scenario = generate(name, SMALL)
    objects = parse_snapshot_doc(scenario.snapshot, name)
    assert len(objects.nodes) == scenario.nodes
    assert len(objects.pods) == scenario.pods
    config = parse_cloud_config(scenario.cloud_config, source=name)
    groups = {g.name for g in config.node_groups}
    for node in objects.nodes:
        assert node.provider_id.startswith(f"sim://{node.labels['clusterscaler.io/node-group']}/")
        assert node.labels["clusterscaler.io/node-group"] in groups
    pending = [p for p in objects.pods if not p.node_name]
    # Pending pods carry the scheduler's verdict, as `simulate --once` takes it at its word.
    assert all(p.unschedulable for p in pending)


# The issue's decisions at a tenth of its sizes (every size scales with --scale): +1,000
# nodes, 1,200 nodes marked for removal, +1,000 nodes, 300 empty nodes removed.
@pytest.mark.parametrize(
    ("name", "pods", "expected"),
    [
        ("scale-up-50k", 5_000, Expected(scale_up_nodes=100)),
        ("scale-down-2k", 8_000, Expected(deleted_nodes=120)),
        ("burst-30k", 6_000, Expected(scale_up_nodes=100)),
        ("empty-300", 3_000, Expected(deleted_nodes=30)),
        ("mixed-5k", 500, Expected(min_scale_up_nodes=1, all_pods_fit=True)),
    ],
    ids=["scale-up", "scale-down", "burst", "empty", "mixed"],
)
def test_expected_decisions_are_the_issues_scaled(name: str, pods: int, expected: Expected) -> None:
    scenario = generate(name, 0.1)
    assert scenario.pods == pods
    assert scenario.expected == expected


def test_upstream_scale_up_sizes_pods_to_fill_fifty_per_node() -> None:
    scenario = upstream.scale_up(100)
    objects = parse_snapshot_doc(scenario.snapshot, "scale-up")
    config = parse_cloud_config(scenario.cloud_config)
    template = config.node_groups[0].template
    pod = objects.pods[0]
    assert template.allocatable.cpu // pod.requests.cpu == 50
    assert template.allocatable.memory // pod.requests.memory == 50
    assert all(p.owner is None for p in objects.pods)


def test_upstream_scale_down_pods_are_safe_to_evict_at_forty_percent() -> None:
    scenario = upstream.scale_down(10)
    objects = parse_snapshot_doc(scenario.snapshot, "scale-down")
    per_node: dict[str, int] = {}
    for pod in objects.pods:
        assert pod.annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "true"
        per_node[pod.node_name] = per_node.get(pod.node_name, 0) + 1
    assert sorted(per_node.values()) == [40] * 10


def test_mixed_workload_mixes_every_constraint_and_fits_the_smallest_shape() -> None:
    scenario = generate("mixed-5k", 0.2)
    objects = parse_snapshot_doc(scenario.snapshot, "mixed")
    kinds = {p.labels["kind"] for p in objects.pods}
    assert kinds == {
        "plain",
        "zone-spread",
        "hostname-spread",
        "zone-affinity",
        "hostname-anti-affinity",
    }
    config = parse_cloud_config(scenario.cloud_config)
    assert len(config.node_groups) == 20
    zones = {g.template.labels["topology.kubernetes.io/zone"] for g in config.node_groups}
    assert zones == {"zone-a", "zone-b", "zone-c"}
    smallest = min(config.node_groups, key=lambda g: (g.template.allocatable.cpu, g.template.allocatable.memory))
    for pod in objects.pods:
        assert pod.requests.fits(smallest.template.allocatable)


def test_generators_are_deterministic_for_a_seed() -> None:
    first = json.dumps(generate("mixed-5k", SMALL, seed=3).snapshot, sort_keys=True)
    again = json.dumps(generate("mixed-5k", SMALL, seed=3).snapshot, sort_keys=True)
    other = json.dumps(generate("mixed-5k", SMALL, seed=4).snapshot, sort_keys=True)
    assert first == again
    assert first != other


def test_unknown_scenario_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="scale-up-50k"):
        generate("nope")


@settings(max_examples=50)
@given(st.integers(0, 3000), st.integers(0, 3000))
def test_check_accepts_exactly_the_expected_scale_up(expected: int, got: int) -> None:
    problems = check(Expected(scale_up_nodes=expected), Decision(scale_up_nodes=got))
    assert (problems == []) == (expected == got)


@settings(max_examples=50)
@given(st.integers(0, 3000), st.integers(0, 3000), st.integers(0, 50))
def test_check_accepts_exactly_the_expected_removals(expected: int, got: int, unfit: int) -> None:
    problems = check(
        Expected(deleted_nodes=expected, all_pods_fit=True),
        Decision(deleted_nodes=got, unfit_pods=unfit),
    )
    assert (problems == []) == (expected == got and unfit == 0)


def test_real_pods_are_shaped_as_kubectl_returns_the_pods_of_a_deployment() -> None:
    scenario = generate("real-scale-up-10k", SMALL)
    raw = [i for i in scenario.snapshot["items"] if i["kind"] == "Pod"]
    replica_sets = {i["metadata"]["name"]: i for i in scenario.snapshot["items"] if i["kind"] == "ReplicaSet"}
    assert len(raw) == scenario.pods == 100
    tokens = set()
    for pod in raw:
        meta, spec, status = pod["metadata"], pod["spec"], pod["status"]
        (owner,) = meta["ownerReferences"]
        rs = replica_sets[owner["name"]]
        assert owner["uid"] == rs["metadata"]["uid"]
        assert meta["generateName"] == f"{owner['name']}-"
        assert meta["name"].startswith(meta["generateName"])
        assert len(meta["name"]) == len(meta["generateName"]) + 5
        assert meta["labels"]["pod-template-hash"] == owner["name"].rsplit("-", 1)[1]
        assert meta["uid"] and meta["resourceVersion"] and meta["managedFields"]
        (token,) = [v for v in spec["volumes"] if v["name"].startswith("kube-api-access-")]
        tokens.add(token["name"])
        sources = [next(iter(s)) for s in token["projected"]["sources"]]
        assert sources == ["serviceAccountToken", "configMap", "downwardAPI"]
        assert {next(k for k in v if k != "name") for v in spec["volumes"]} == {
            "configMap",
            "secret",
            "emptyDir",
            "projected",
        }
        for container in spec["containers"]:
            assert container["resources"]["requests"] and container["resources"]["limits"]
            assert token["name"] in {m["name"] for m in container["volumeMounts"]}
        assert [t["key"] for t in spec["tolerations"]] == [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
        ]
        assert set(spec["affinity"]) == {"nodeAffinity", "podAntiAffinity"}
        assert spec["schedulerName"] == "default-scheduler"
        assert spec["preemptionPolicy"] == "PreemptLowerPriority"
        assert status["phase"] == "Pending" and status["qosClass"] == "Burstable"
        assert status["conditions"][0]["reason"] == "Unschedulable"
    # Every pod has its own token volume, as the ServiceAccount admission plugin names them.
    assert len(tokens) == len(raw)
    assert len({p["metadata"]["name"] for p in raw}) == len(raw)


def test_real_scale_down_runs_bound_pods_some_under_a_pdb() -> None:
    scenario = generate("scale-down-2k-real", SMALL)
    objects = parse_snapshot_doc(scenario.snapshot, "scale-down-real")
    assert len(objects.nodes) == 20
    assert len(objects.pods) == 800
    assert all(p.node_name and p.owner is not None for p in objects.pods)
    assert objects.pdbs
    assert scenario.flags == ()
    assert scenario.expected == Expected(deleted_nodes=0, min_unneeded_nodes=1)
