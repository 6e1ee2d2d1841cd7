"""The sim provider's cloud-config: valid groups parse; invalid ones name group and field."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.interfaces.cloudprovider import ConfigurationError
from clusterscaler.plugins.sim import NODE_GROUP_LABEL, load_cloud_config, parse_cloud_config


def group(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "general",
        "minSize": 1,
        "maxSize": 5,
        "template": {
            "metadata": {"labels": {"topology.kubernetes.io/zone": "zone-a"}},
            "spec": {"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"},
            },
        },
    }
    base.update(overrides)
    return base


def test_valid_group_parses_with_defaults() -> None:
    config = parse_cloud_config({"nodeGroups": [group(price=0.19)]})
    (spec,) = config.node_groups
    assert spec.name == "general"
    assert (spec.min_size, spec.max_size) == (1, 5)
    assert spec.price == pytest.approx(0.19)
    assert spec.provision_delay == timedelta(seconds=60)
    template = spec.template
    assert template.labels[NODE_GROUP_LABEL] == "general"
    assert template.labels["topology.kubernetes.io/zone"] == "zone-a"
    assert template.allocatable.cpu == 3920
    assert template.capacity.memory == 16 * 1024**3
    assert [t.key for t in template.taints] == ["dedicated"]


def test_provision_delay_and_default_pods() -> None:
    raw = group(provisionDelay="2m30s")
    raw["template"]["status"] = {"capacity": {"cpu": "2", "memory": "8Gi"}}
    (spec,) = parse_cloud_config({"nodeGroups": [raw]}).node_groups
    assert spec.provision_delay == timedelta(minutes=2, seconds=30)
    # kubelet's default --max-pods, and allocatable falls back to capacity.
    assert spec.template.capacity.pods == 110
    assert spec.template.allocatable == spec.template.capacity


BAD = [
    ({"nodeGroups": "x"}, "nodeGroups: expected a list"),
    ({"nodeGroups": [group(name="")]}, "nodeGroups[0]: name: expected a non-empty name"),
    ({"nodeGroups": [group(name="a b")]}, "nodeGroups[0]: name: expected"),
    (
        {"nodeGroups": [group(minSize=-1)]},
        "nodeGroups[0] (general): minSize: expected a non-negative integer",
    ),
    (
        {"nodeGroups": [group(maxSize="3")]},
        "nodeGroups[0] (general): maxSize: expected a non-negative integer",
    ),
    (
        {"nodeGroups": [group(minSize=4, maxSize=2)]},
        "(general): maxSize: expected an integer >= minSize (4), got 2",
    ),
    ({"nodeGroups": [group(price=-1)]}, "(general): price: expected a non-negative number"),
    ({"nodeGroups": [group(price="cheap")]}, "(general): price: expected a non-negative number"),
    (
        {"nodeGroups": [group(provisionDelay="soon")]},
        "(general): provisionDelay: expected a Go duration",
    ),
    ({"nodeGroups": [group(template=None)]}, "(general): template: expected a Node object"),
    (
        {"nodeGroups": [group(template={"status": {}})]},
        "(general): template.status.capacity: expected a resource list",
    ),
    (
        {
            "nodeGroups": [
                group(template={"status": {"capacity": {"cpu": "lots", "memory": "1Gi"}}})
            ]
        },
        "(general): template.status.capacity.cpu: expected",
    ),
    (
        {
            "nodeGroups": [
                group(
                    template={
                        "status": {
                            "capacity": {"cpu": "1", "memory": "1Gi"},
                            "allocatable": {"cpu": "2", "memory": "1Gi"},
                        }
                    }
                )
            ]
        },
        "(general): template.status.allocatable: expected at most the capacity",
    ),
    (
        {
            "nodeGroups": [
                group(
                    template={
                        "metadata": {"labels": {NODE_GROUP_LABEL: "other"}},
                        "status": {"capacity": {"cpu": "1", "memory": "1Gi"}},
                    }
                )
            ]
        },
        f"(general): template.metadata.labels.{NODE_GROUP_LABEL}: expected 'general'",
    ),
    ({"nodeGroups": [group(), group()]}, "nodeGroups[1] (general): name: expected a unique name"),
    ({"nodeGroups": [group(maxsize=3)]}, "(general): maxsize: unknown field"),
    (
        {"nodeGroups": [{"name": "g", "minSize": 0, "template": group()["template"]}]},
        "(g): maxSize: required field is missing",
    ),
    ({"groups": []}, "groups: unknown field"),
]


@pytest.mark.parametrize(
    ("doc", "message"),
    BAD,
    ids=[
        "not-a-list",
        "empty-name",
        "bad-name",
        "negative-min",
        "string-max",
        "max-below-min",
        "negative-price",
        "string-price",
        "bad-delay",
        "no-template",
        "no-capacity",
        "bad-cpu",
        "allocatable-above-capacity",
        "foreign-group-label",
        "duplicate",
        "unknown-field",
        "missing-max",
        "unknown-top-level",
    ],
)
def test_invalid_config_names_group_and_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_cloud_config(doc, source="cc.yaml")
    assert str(info.value).startswith("cc.yaml: ")
    assert message in str(info.value)


def test_load_from_file(tmp_path: Any) -> None:
    path = tmp_path / "cc.yaml"
    path.write_text(
        "nodeGroups:\n  - name: g\n    minSize: 0\n    maxSize: 3\n"
        "    template: {status: {capacity: {cpu: '2', memory: 4Gi}}}\n"
    )
    assert [g.name for g in load_cloud_config(path).node_groups] == ["g"]
    with pytest.raises(ConfigurationError, match="cannot read the file"):
        load_cloud_config(tmp_path / "missing.yaml")
    path.write_text("nodeGroups: [\n")
    with pytest.raises(ConfigurationError, match="expected YAML"):
        load_cloud_config(path)
