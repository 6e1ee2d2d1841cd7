"""Scale from zero with DRA: the ResourceSlices the templates ConfigMap declares for a
template Node are its group's template devices."""

from __future__ import annotations

from typing import Any

import yaml
from clusterscaler_kwok.devices import template_slices
from clusterscaler_kwok.provider import KwokCloudProvider
from clusterscaler_kwok.templates import build_groups, parse_templates
from kwokkit import FakeNodeStore, make_config
from kwokkit import template as tpl

DRIVER = "gpu.example.com"


def resource_slice(node: Any, devices: int = 2, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": f"{node}", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(devices)], **spec}}


def listing(*items: dict[str, Any]) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)})


def provider_for(text: str) -> KwokCloudProvider:
    config = make_config(read_nodes_from="configmap")
    nodes = parse_templates(text, "templates")
    groups, problems = build_groups(nodes, config)
    slices, slice_problems = template_slices(text, nodes, config)
    return KwokCloudProvider(config, groups, FakeNodeStore(), [*problems, *slice_problems],
                             slices=slices)


def test_a_templates_slices_are_its_groups_template_devices() -> None:
    text = listing(tpl("gpu-template", "gpu"), tpl("cpu-template", "cpu"),
                   resource_slice("gpu-template", 4))
    provider = provider_for(text)
    by_id = {g.id: g for g in provider.node_groups()}
    [gpus] = by_id["gpu"].template_node_info().resource_slices
    assert (gpus.driver, len(gpus.devices)) == (DRIVER, 4)
    assert by_id["cpu"].template_node_info().resource_slices == ()
    assert provider.problems() == []


def test_separate_documents_work_too() -> None:
    text = "---\n".join(yaml.safe_dump(d) for d in (tpl("t", "gpu"), resource_slice("t")))
    [group] = provider_for(text).node_groups()
    assert len(group.template_node_info().resource_slices) == 1


def test_a_slice_that_is_not_node_local_is_a_problem_of_its_group_which_still_scales() -> None:
    bad = resource_slice("gpu-template", allNodes=True)
    provider = provider_for(listing(tpl("gpu-template", "gpu"), bad))
    [group] = provider.node_groups()
    assert group.template_node_info().resource_slices == ()
    [problem] = provider.problems()
    assert problem.node_group == "gpu" and problem.reason == "InvalidTemplate"
    assert "ResourceSlice gpu-template-gpus: spec.allNodes: expected a node-local slice" in (
        problem.message), problem.message


def test_a_malformed_slice_names_its_field() -> None:
    bad = resource_slice("gpu-template")
    bad["spec"]["devices"] = [{"name": "gpu-0", "capacity": {"memory": {"value": "lots"}}}]
    [problem] = provider_for(listing(tpl("gpu-template", "gpu"), bad)).problems()
    assert "spec.devices[0].capacity.memory.value" in problem.message, problem.message


def test_a_slice_naming_no_template_is_left_out() -> None:
    provider = provider_for(listing(tpl("gpu-template", "gpu"), resource_slice("elsewhere"),
                                    resource_slice(None)))
    [group] = provider.node_groups()
    assert group.template_node_info().resource_slices == ()
    assert provider.problems() == []
