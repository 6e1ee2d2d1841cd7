"""The examples in docs/providers/machineapi.md work as the page says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from clusterscaler.interfaces.cloudprovider import NodeGroupOptions
from clusterscaler.model import Resources, Taint
from clusterscaler.testing.fakekube import FakeKubeServer

DOC = Path(__file__).resolve().parents[3] / "docs" / "providers" / "machineapi.md"


def yaml_examples() -> list[dict[str, Any]]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)
    docs = [yaml.safe_load(b) for b in blocks]
    return [d for d in docs if isinstance(d, dict) and d.get("kind") in ("MachineSet", "MachineDeployment")]


def test_the_page_has_both_examples() -> None:
    assert [d["kind"] for d in yaml_examples()] == ["MachineSet", "MachineDeployment"]


def test_documented_machineset_and_machinedeployment_are_node_groups(
    kube: FakeKubeServer, make_provider: Any
) -> None:
    for obj in yaml_examples():
        kube.create(obj)
    provider = make_provider()
    groups = {g.id: g for g in provider.node_groups()}
    assert sorted(groups) == [
        "MachineDeployment/team-a/md-0",
        "MachineSet/openshift-machine-api/workers-us-east-1a",
    ]
    assert provider.problems() == []

    ms = groups["MachineSet/openshift-machine-api/workers-us-east-1a"]
    assert (ms.min_size, ms.max_size) == (0, 6)
    node = ms.template_node_info().node
    assert node.capacity == Resources(cpu=4000, memory=16 * 1024**3, pods=250)
    assert node.labels["node-role.kubernetes.io/worker"] == ""
    assert node.labels["node.kubernetes.io/instance-type"] == "m6i.xlarge"
    assert node.labels["topology.kubernetes.io/zone"] == "us-east-1a"
    assert node.taints == (Taint("dedicated", "batch", "NoSchedule"),)
    options = ms.get_options(NodeGroupOptions())
    assert options is not None and options.scale_down_unneeded_time is not None
    assert options.scale_down_unneeded_time.total_seconds() == 20 * 60

    md = groups["MachineDeployment/team-a/md-0"]
    assert (md.min_size, md.max_size) == (1, 10)
    gpu = md.template_node_info().node
    assert gpu.capacity == Resources(cpu=8000, memory=32 * 1024**3, pods=110, extended={"nvidia.com/gpu": 1})
    assert gpu.labels["accelerator"] == "t4"
    assert gpu.labels["topology.kubernetes.io/zone"] == "zone-a"
    assert gpu.taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),)

    only_prod = make_provider(["clusterapi:clusterName=prod"])
    assert [g.id for g in only_prod.node_groups()] == ["MachineDeployment/team-a/md-0"]
