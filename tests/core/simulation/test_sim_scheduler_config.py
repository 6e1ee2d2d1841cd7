"""`--scheduler-config-file` in `simulate` and `explain`: the profile's disabled filters,
NodeResourcesFit's ignored resources and PodTopologySpread's List default constraints change
what scales up, as they change where kube-scheduler places pods; bad files exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.commands.cli import main

TEMPLATE_STATUS = {
    "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
    "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"},
}


def group(name: str, **spec: Any) -> dict[str, Any]:
    template: dict[str, Any] = {"metadata": {"labels": {"topology.kubernetes.io/zone": "zone-a"}}}
    template.update(spec)
    template["status"] = TEMPLATE_STATUS
    return {
        "name": name,
        "minSize": 0,
        "maxSize": 20,
        "price": 0.19,
        "provisionDelay": "60s",
        "template": template,
    }


def write_scenario(tmp: Path, groups: list[dict[str, Any]], body: dict[str, Any]) -> Path:
    (tmp / "cloud.yaml").write_text(yaml.safe_dump({"nodeGroups": groups}))
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "duration": "5m", "cloudConfig": "cloud.yaml", **body}))
    return path


def write_config(tmp: Path, profile: dict[str, Any], name: str = "scheduler.yaml") -> Path:
    path = tmp / name
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [profile],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def simulate(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = main(["simulate", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert lines[-1]["type"] == "summary"
    return lines[-1]


def test_disabled_taint_toleration_lands_pods_on_a_tainted_group(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tainted = group("tainted", spec={"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]})
    scenario = write_scenario(
        tmp_path,
        [tainted],
        {"initialNodes": {"tainted": 0}, "workloads": [{"name": "web", "replicas": 3, "cpu": "1", "memory": "512Mi"}]},
    )
    # kube-scheduler's defaults: the pods do not tolerate the taint, nothing helps them.
    before = simulate(capsys, str(scenario))
    assert before["scaleUps"] == 0
    assert before["stillPending"] == 3
    config = write_config(tmp_path, {"plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}}})
    after = simulate(capsys, str(scenario), "--scheduler-config-file", str(config))
    assert after["nodesProvisioned"] == 1
    assert after["stillPending"] == 0
    assert after["finalNodes"] == {"tainted": 1}


def test_ignored_resources_let_an_extended_resource_request_fit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = write_scenario(
        tmp_path,
        [group("general")],
        {
            "initialNodes": {"general": 0},
            "workloads": [{"name": "trainer", "replicas": 3, "cpu": "1", "memory": "512Mi", "gpu": 1}],
        },
    )
    before = simulate(capsys, str(scenario))
    assert before["scaleUps"] == 0
    assert before["stillPending"] == 3
    config = write_config(
        tmp_path,
        {"pluginConfig": [{"name": "NodeResourcesFit", "args": {"ignoredResources": ["nvidia.com/gpu"]}}]},
    )
    after = simulate(capsys, str(scenario), "--scheduler-config-file", str(config))
    # Three pods of 1 cpu share one 3920m node once the GPU request is not checked.
    assert after["nodesProvisioned"] == 1
    assert after["stillPending"] == 0
    # The same through the group of the resource's domain.
    groups = write_config(
        tmp_path,
        {"pluginConfig": [{"name": "NodeResourcesFit", "args": {"ignoredResourceGroups": ["nvidia.com"]}}]},
        "groups.yaml",
    )
    assert simulate(capsys, str(scenario), "--scheduler-config-file", str(groups))["nodesProvisioned"] == 1


def test_list_default_spread_constraint_changes_the_scale_up(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = write_scenario(
        tmp_path,
        [group("general")],
        {
            "initialNodes": {"general": 2},
            "workloads": [
                # Fills one node: it takes no web pod.
                {"name": "filler", "replicas": 1, "cpu": "3800m", "memory": "256Mi"},
                {"name": "web", "replicas": 0, "cpu": "250m", "memory": "256Mi"},
            ],
            "events": [{"at": "30s", "scale": {"workload": "default/web", "replicas": 4}}],
        },
    )
    # Without default constraints the four web pods share the empty node.
    assert simulate(capsys, str(scenario))["nodesRequested"] == 0
    config = write_config(
        tmp_path,
        {
            "pluginConfig": [
                {
                    "name": "PodTopologySpread",
                    "args": {
                        "defaultingType": "List",
                        "defaultConstraints": [
                            {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}
                        ],
                    },
                }
            ]
        },
    )
    # The ReplicaSet's pods spread one per node (the full node counts 0 of them): one web
    # pod on the empty node, one new node for each of the other three.
    after = simulate(capsys, str(scenario), "--scheduler-config-file", str(config))
    assert after["nodesRequested"] == 3
    assert after["stillPending"] == 0
    assert after["finalNodes"] == {"general": 5}
    # The System defaults only score: nothing changes.
    system = write_config(
        tmp_path,
        {"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "System"}}]},
        "system.yaml",
    )
    assert simulate(capsys, str(scenario), "--scheduler-config-file", str(system))["nodesRequested"] == 0


def test_scenario_names_the_file_relative_to_itself(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tainted = group("tainted", spec={"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]})
    write_config(tmp_path, {"plugins": {"multiPoint": {"disabled": [{"name": "TaintToleration"}]}}})
    scenario = write_scenario(
        tmp_path,
        [tainted],
        {
            "initialNodes": {"tainted": 0},
            "flags": {"scheduler-config-file": "scheduler.yaml"},
            "workloads": [{"name": "web", "replicas": 2, "cpu": "1", "memory": "512Mi"}],
        },
    )
    assert simulate(capsys, str(scenario))["finalNodes"] == {"tainted": 1}


def test_explain_follows_the_profile(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    tainted = group("tainted", spec={"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]})
    (tmp_path / "cloud.yaml").write_text(yaml.safe_dump({"nodeGroups": [tainted]}))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }
    (tmp_path / "snap.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [pod]}))
    config = write_config(tmp_path, {"plugins": {"filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit"}]}}})
    argv = ["explain", "--snapshot", str(tmp_path / "snap.yaml"), "--cloud-config", str(tmp_path / "cloud.yaml")]
    assert main(argv) == 0
    before = capsys.readouterr().out
    assert main([*argv, "--scheduler-config-file", str(config)]) == 0
    after = capsys.readouterr().out
    assert "scale-up 0 -> 1" not in before
    assert "scale-up 0 -> 1" in after


BAD_FILES = [
    ("apiVersion: v1\nkind: KubeSchedulerConfiguration\n", "apiVersion: expected kubescheduler.config.k8s.io/v1 or kubescheduler.config.k8s.io/v1beta3, got 'v1'"),
    ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Pod\n", "kind: expected KubeSchedulerConfiguration, got 'Pod'"),
    ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: {}\n", "profiles: expected a list"),
    (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {ignoredResource: [a/b]}\n",
        "profiles[0].pluginConfig[0].args.ignoredResource: expected one of the known fields",
    ),
    (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- pluginConfig:\n  - name: PodTopologySpread\n    args:\n      defaultingType: List\n      defaultConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]\n",
        "profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew: expected an integer >= 1, got 0",
    ),
    (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    filter:\n      disabled: [TaintToleration]\n",
        "profiles[0].plugins.filter.disabled[0]: expected a mapping, got 'TaintToleration'",
    ),
    ("profiles: [\n", "expected a KubeSchedulerConfiguration, got text that is not valid YAML or JSON"),
    (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: a\n- schedulerName: b\n",
        "profiles: expected one scheduler profile only (found 2 profiles)",
    ),
    (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    preFilter:\n      disabled: [{name: NodePorts}]\n",
        "profiles[0].plugins.preFilter.disabled: NodePorts's Filter needs its PreFilter",
    ),
]


@pytest.mark.parametrize(
    ("text", "message"),
    BAD_FILES,
    ids=["api-version", "kind", "profiles", "unknown-arg", "max-skew", "plugin-form", "yaml", "two-profiles", "prefilter"],
)
def test_bad_file_exits_2_naming_file_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(text)
    assert exit_code(["simulate", "--scheduler-config-file", str(path)]) == 2
    assert f"--scheduler-config-file {path}: {message}" in capsys.readouterr().err


def test_file_not_utf8_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_bytes(b"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n# caf\xe9\n")
    assert exit_code(["simulate", "--scheduler-config-file", str(path)]) == 2
    assert f"--scheduler-config-file {path}: expected UTF-8 text, got byte 0xe9 at offset" in capsys.readouterr().err


def test_empty_profile_entry_is_the_default_profile(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n-\n")
    scenario = write_scenario(tmp_path, [group("general")], {})
    assert simulate(capsys, str(scenario), "--scheduler-config-file", str(path))["nodesRequested"] == 0


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert exit_code(["run", "--scheduler-config-file", str(tmp_path / "none.yaml")]) == 2
    err = capsys.readouterr().err
    assert f"--scheduler-config-file {tmp_path / 'none.yaml'}: cannot read the file" in err


def test_bad_file_in_a_scenario_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "scheduler.yaml").write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Pod\n")
    scenario = write_scenario(
        tmp_path, [group("general")], {"flags": {"scheduler-config-file": "scheduler.yaml"}}
    )
    assert exit_code(["simulate", str(scenario)]) == 2
    err = capsys.readouterr().err
    assert f"--scheduler-config-file {tmp_path / 'scheduler.yaml'}: kind: expected" in err


def exit_code(argv: list[str]) -> int:
    """The exit status of the command line, whether `main` returns it or exits."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
