"""deploy/<provider>/: one directory per provider, each a complete set that `kubectl apply -f`
installs, rendered from the Helm chart (tests/deploy/plain_manifests.py) and kept equal to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.commands.cli import load_plugins, parse_autoscaler_args
from plain_manifests import DEPLOY, PLAIN, render

# What `kubectl apply -f <dir>` reads (without -R it does not descend into folders).
APPLIED = (".yaml", ".yml", ".json")


def documents(provider: str) -> list[dict[str, Any]]:
    return [
        d
        for path in sorted((DEPLOY / provider).iterdir())
        for d in yaml.safe_load_all(path.read_text())
        if d
    ]


def command_args(pod: dict[str, Any]) -> list[str]:
    container = pod["containers"][0]
    command = [*container["command"], *container.get("args", [])]
    assert command[0] == "clusterscaler"
    return list(command[1:])


def kinds(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((d["kind"], d["metadata"]["name"]) for d in docs)


@pytest.mark.parametrize("provider", sorted(PLAIN))
def test_the_checked_in_manifests_are_the_chart_rendered(provider: str) -> None:
    folder = DEPLOY / provider
    rendered = render(provider)
    assert sorted(p.name for p in folder.iterdir()) == sorted(rendered), (
        "run .venv/bin/python tests/deploy/plain_manifests.py"
    )
    for name, text in rendered.items():
        assert (folder / name).read_text() == text, (
            f"deploy/{provider}/{name} differs from the chart: "
            "run .venv/bin/python tests/deploy/plain_manifests.py"
        )


def test_applying_deploy_itself_applies_nothing() -> None:
    assert [p.name for p in DEPLOY.iterdir() if p.is_file() and p.suffix in APPLIED] == []
    providers = {p.name for p in DEPLOY.iterdir() if p.is_dir()} - {"helm"}
    assert providers == set(PLAIN)


@pytest.mark.parametrize("provider", sorted(PLAIN))
def test_each_directory_is_a_complete_set_for_its_provider_only(provider: str) -> None:
    docs = documents(provider)
    account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["name"]
    for doc in docs:
        if doc["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            role = next(
                d
                for d in docs
                if d["kind"] == doc["roleRef"]["kind"]
                and d["metadata"]["name"] == doc["roleRef"]["name"]
            )
            assert role["metadata"].get("namespace") == doc["metadata"].get("namespace")
            assert doc["subjects"] == [
                {
                    "kind": "ServiceAccount",
                    "name": account["name"],
                    "namespace": account["namespace"],
                }
            ]
    # Only the Cluster API provider has a ClusterRole of its own (for a management cluster).
    extra = {name for kind, name in kinds(docs) if kind == "ClusterRole"} - {"cluster-autoscaler"}
    assert extra == ({"cluster-autoscaler-clusterapi"} if provider == "machineapi" else set())
    # Every volume the pod mounts is in the directory.
    config_maps = {d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"}
    for volume in pod.get("volumes", []):
        if "configMap" in volume:
            assert volume["configMap"]["name"] in config_maps

    args = command_args(pod)
    host, registry = load_plugins(args)
    options, _ = parse_autoscaler_args(args, host, registry)
    assert options.cloud_provider == provider


def test_every_provider_holds_the_same_common_rbac() -> None:
    """deploy/aws/rbac.yaml is the one tests/core/kube/test_deploy_manifests.py checks against
    the calls of the Kubernetes integration; the others grant the same, and kwok and sim, whose
    node groups are Node objects, also create and delete Nodes."""

    def rbac(provider: str) -> list[dict[str, Any]]:
        docs = yaml.safe_load_all((DEPLOY / provider / "rbac.yaml").read_text())
        return [d for d in docs if d and d["kind"] != "ServiceAccount"]

    def without_labels(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**d, "metadata": {**d["metadata"], "labels": {}}} for d in docs]

    node_objects = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["create", "delete"]}
    for provider in PLAIN:
        docs = without_labels(rbac(provider))
        if provider in ("kwok", "sim"):
            role = next(d for d in docs if d["kind"] == "ClusterRole")
            assert role["rules"][-1] == node_objects, provider
            role["rules"] = role["rules"][:-1]
        assert docs == without_labels(rbac("aws")), provider


def test_the_sim_cloud_config_loads(tmp_path: Path) -> None:
    from clusterscaler.plugins.sim import load_cloud_config

    config_map = next(d for d in documents("sim") if d["kind"] == "ConfigMap")
    path = tmp_path / "cloud-config.yaml"
    path.write_text(config_map["data"]["cloud-config.yaml"])
    config = load_cloud_config(str(path))
    assert [g.name for g in config.node_groups] == ["general"]
    args = command_args(
        next(d for d in documents("sim") if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    )
    assert "--cloud-config=/etc/clusterscaler/sim/cloud-config.yaml" in args
