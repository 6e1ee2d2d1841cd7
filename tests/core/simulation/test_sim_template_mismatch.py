"""A node group whose live node and provider template disagree (allocatable resources or
labels) is named, with the fields, by `explain`, `simulate` and the status ConfigMap: the
loop plans new nodes from the live node while the provider makes them from the template."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from clusterscaler.commands.cli import load_plugins, main
from clusterscaler.commands.explain import evaluate, explain, render
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.loop.grouptemplates import TEMPLATE_MISMATCH, template_mismatch
from clusterscaler.model import ClusterObjects
from clusterscaler.offline.setup import EMBEDDED_CONFIG_KEY
from clusterscaler.report.status import status_from_result
from clusterscaler.simulator.builders import make_node, make_pod

_, REGISTRY = load_plugins([])
NOW = datetime(2024, 6, 1, 12, tzinfo=UTC)
GROUP = "clusterscaler.io/node-group"
LABELS = {GROUP: "general", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
          "topology.kubernetes.io/zone": "zone-a", "disktype": "ssd"}
# The template forgets ephemeral-storage and the disktype label of the live nodes.
CLOUD = {
    "nodeGroups": [
        {"name": "general", "minSize": 1, "maxSize": 5,
         "template": {"metadata": {"labels": {"topology.kubernetes.io/zone": "zone-a"}},
                      "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}},
        {"name": "batch", "minSize": 0, "maxSize": 5,
         "template": {"status": {"capacity": {"cpu": "8", "memory": "32Gi"}}}},
    ]
}


def live(name: str, **kwargs: object):
    return make_node(name, "4", "16Gi", labels={**LABELS, "kubernetes.io/hostname": name},
                     provider_id=f"sim://general/{name}", ephemeral_storage="100Gi", **kwargs)  # type: ignore[arg-type]


def test_the_fields_that_disagree_are_named() -> None:
    options = AutoscalingOptions()
    node = live("n1")
    template = make_node("t", "4", "15.5Gi", labels={"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"})
    problem = template_mismatch("general", node, template, options)
    assert problem is not None
    assert (problem.node_group, problem.reason) == ("general", TEMPLATE_MISMATCH)
    # Memory within --max-allocatable-difference-ratio agrees; hostname, zone and the
    # group's own label differ by design.
    assert problem.message == (
        "node group general: live node n1 and the provider's template disagree on allocatable "
        "ephemeral-storage (node 100Gi, template 0); labels disktype (node 'ssd', template missing): "
        "the loop plans new nodes from the live node, the provider makes them from the template"
    )
    same = make_node("t", "4", "16Gi", labels=dict(LABELS), ephemeral_storage="100Gi")
    assert template_mismatch("general", node, same, options) is None
    # A label told apart by --balancing-ignore-label is not compared either.
    ignoring = AutoscalingOptions(balancing_ignore_label=["disktype"])
    no_disk = same.with_(labels={k: v for k, v in LABELS.items() if k != "disktype"})
    assert template_mismatch("general", node, no_disk, ignoring) is None


def test_deprecated_labels_the_kubelet_sets_agree_with_their_stable_names() -> None:
    """The kubelet labels a node `beta.kubernetes.io/os` and `/arch` beside the stable
    names; a template holding only the stable ones (kwok's, most clouds') agrees, one whose
    deprecated value differs does not."""
    options = AutoscalingOptions()
    node = live("n1").with_(labels={
        **LABELS, "kubernetes.io/hostname": "n1", "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.xlarge",
        "beta.kubernetes.io/instance-type": "m5.xlarge",
    })
    stable = {**LABELS, "node.kubernetes.io/instance-type": "m5.xlarge"}
    template = make_node("t", "4", "16Gi", labels=stable, ephemeral_storage="100Gi")
    assert template_mismatch("general", node, template, options) is None
    # An older template holding the deprecated names only agrees too.
    beta = {**{k: v for k, v in LABELS.items() if k not in ("kubernetes.io/os", "kubernetes.io/arch")},
            "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": "m5.xlarge"}
    assert template_mismatch("general", node, template.with_(labels=beta), options) is None
    odd = template.with_(labels={**stable, "beta.kubernetes.io/arch": "arm64"})
    problem = template_mismatch("general", node, odd, options)
    assert problem is not None
    assert "labels beta.kubernetes.io/arch (node 'amd64', template 'arm64')" in problem.message


def test_thousands_of_disagreeing_labels_make_a_short_message() -> None:
    """A node with 5,000 labels the template lacks: ten are named, the rest counted."""
    many = {f"example.com/label-{i:04}": "x" for i in range(5000)}
    node = live("n1").with_(labels={**LABELS, **many, "kubernetes.io/hostname": "n1"})
    template = make_node("t", "4", "16Gi", labels=dict(LABELS), ephemeral_storage="100Gi")
    problem = template_mismatch("general", node, template, AutoscalingOptions())
    assert problem is not None
    assert len(problem.message) < 1000, len(problem.message)
    assert "example.com/label-0009 (node 'x', template missing) and 4990 more" in problem.message


def loop_result():
    objects = ClusterObjects(
        nodes=[live("n1"), live("n2")],
        pods=[make_pod("web", "3", "1Gi", node_name="n1", phase="Running", creation_time=NOW - timedelta(hours=1))],
    )
    options = replace(AutoscalingOptions(), extra={EMBEDDED_CONFIG_KEY: CLOUD})
    result, provider = evaluate(REGISTRY, options, objects, NOW)
    return result, explain(result, objects, options, NOW, provider)


def test_explain_and_the_status_name_the_group_and_fields() -> None:
    result, report = loop_result()
    mismatches = [p for p in result.problems if p.reason == TEMPLATE_MISMATCH]
    # Only the group with live nodes: batch scales from its template alone.
    assert [p.node_group for p in mismatches] == ["general"]
    assert "ephemeral-storage (node 100Gi, template 0)" in mismatches[0].message
    assert "disktype (node 'ssd', template missing)" in mismatches[0].message
    text = render(report)
    assert "Node group problems" in text
    assert "general     TemplateMismatch  node group general: live node n1" in text
    status = status_from_result(result)
    assert "general: TemplateMismatch: node group general: live node n1" in status.message


def test_simulate_warns_once_per_group(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clusterscaler.plugins.sim.provider import SimNodeGroup

    asked: list[str] = []
    original = SimNodeGroup.template_node_info

    def counting(self: SimNodeGroup):  # type: ignore[no-untyped-def]
        asked.append(self.id)
        return original(self)

    monkeypatch.setattr(SimNodeGroup, "template_node_info", counting)
    snapshot = tmp_path / "cluster.json"
    nodes = []
    for name in ("n1", "n2"):
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {**LABELS, "kubernetes.io/hostname": name},
                         "creationTimestamp": "2024-06-01T10:00:00Z"},
            "spec": {"providerID": f"sim://general/{name}"},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                       "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2024-06-01T10:00:00Z"}]},
        })
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    config = tmp_path / "groups.yaml"
    config.write_text(yaml.safe_dump(CLOUD))
    code = main(["simulate", "--snapshot", str(snapshot), "--cloud-config", str(config), "--duration", "5m"])
    out, err = capsys.readouterr()
    assert code == 0, err
    warnings = [line for line in err.splitlines() if 'reason="TemplateMismatch"' in line]
    assert len(warnings) == 1, err
    assert warnings[0].startswith("W") and 'node_group="general"' in warnings[0]
    assert "ephemeral-storage" in warnings[0] and "disktype" in warnings[0]
    assert "TemplateMismatch" not in out
    # 31 loops, one comparison: the provider is asked again only when the live node changes.
    assert asked.count("general") == 1
