"""`simulate --once` keeps the verdicts of the scheduler that took the snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler import cli
from clusterscaler.simulation import command

ROOT = Path(__file__).resolve().parents[3]
GENERAL = str(ROOT / "examples" / "cloud-configs" / "general.yaml")


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
    sim, _ = command.prepare(ctx, command.load_inputs(ns))
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
