"""`simulate --once` keeps the verdicts of the scheduler that took the snapshot."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands import cli
from clusterscaler.commands import simulate as command
from clusterscaler.offline.runner import provision_initial_nodes
from clusterscaler.offline.scenario import parse_scenario
from clusterscaler.offline.setup import (
    build_cluster,
    build_provider,
    merge_options,
    with_cloud_config,
)

ROOT = Path(__file__).resolve().parents[3]
GENERAL = str(ROOT / "examples" / "cloud-configs" / "general.yaml")
_, REGISTRY = cli.load_plugins([])


def snapshot(tmp_path: Path, *, pod_status: dict[str, Any]) -> Path:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "general-1", "labels": {"clusterscaler.io/node-group": "general"}},
        "spec": {"providerID": "sim://general/general-1"},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "waiting", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": pod_status,
    }
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node, pod]}))
    return path


UNSCHEDULABLE = {
    "phase": "Pending",
    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
}


def prepared(path: Path, *extra: str) -> command.Simulation:
    argv = ["--snapshot", str(path), "--cloud-config", GENERAL, "--json", *extra]
    host, registry = cli.load_plugins(argv)
    options, ns = cli.parse_autoscaler_args(argv, host, registry, "simulate", command)
    ctx = cli.CommandContext(host=host, registry=registry, options=options, args=ns)
    sim, _, _ = command.prepare(ctx, command.load_inputs(ns))
    return sim


@pytest.mark.parametrize(
    ("status", "extra", "bound"),
    [
        # The snapshot's scheduler found no room: --once takes it at its word.
        (UNSCHEDULABLE, ("--once",), False),
        # A full simulation lets its own scheduler retry from the start.
        (UNSCHEDULABLE, (), True),
        # A pod no scheduler has judged yet is scheduled either way.
        ({"phase": "Pending"}, ("--once",), True),
        ({"phase": "Pending"}, (), True),
    ],
    ids=["once-unschedulable", "run-unschedulable", "once-unjudged", "run-unjudged"],
)
def test_prepare_keeps_unschedulable_verdicts_only_for_once(
    tmp_path: Path, status: dict[str, Any], extra: tuple[str, ...], bound: bool
) -> None:
    sim = prepared(snapshot(tmp_path, pod_status=status), *extra)
    pod = sim.cluster.pods["default/waiting"]
    assert (pod.node_name == "general-1") is bound
    assert pod.unschedulable is not bound


CLOUD = {
    "nodeGroups": [
        {
            "name": "small",
            "minSize": 0,
            "maxSize": 4,
            "provisionDelay": "30s",
            "template": {"status": {"capacity": {"cpu": "2", "memory": "8Gi"}}},
        }
    ]
}


@pytest.mark.parametrize(
    ("initial", "retry", "bound"),
    [
        # New nodes are room the verdict did not know about: the pods are retried.
        (1, False, 2),
        (1, True, 2),
        # Nothing added: the verdict stands unless retrying is asked for.
        (0, False, 0),
    ],
    ids=["nodes-added-keep", "nodes-added-retry", "nothing-added-keep"],
)
def test_initial_nodes_make_unschedulable_pods_worth_retrying(
    initial: int, retry: bool, bound: int
) -> None:
    doc = {
        "cloudConfig": CLOUD,
        "initialNodes": {"small": initial},
        "workloads": [{"name": "web", "replicas": 2, "cpu": "500m", "memory": "1Gi"}],
    }
    scenario = parse_scenario(doc, "verdicts")
    scenario.objects.pods = [p.with_(unschedulable=True) for p in scenario.objects.pods]
    options = with_cloud_config(merge_options(argparse.Namespace(), {}, "verdicts"), scenario, "")
    cluster, clock = build_cluster(scenario.objects, scenario)
    provider = build_provider(REGISTRY, options, cluster=cluster, clock=clock)
    provision_initial_nodes(cluster, provider, scenario.initial_nodes, retry_unschedulable=retry)
    assert sum(1 for p in cluster.pods.values() if p.node_name) == bound
    assert len(cluster.nodes) == initial
