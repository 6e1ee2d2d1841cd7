"""The overprovisioning recipe: the manifests are consistent, the documented replica counts
are what `calc` gives, and the controller applies them end to end."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.proportional.cli import main, parse_controller_args
from clusterscaler.proportional.controller import Controller
from clusterscaler.proportional.params import parse_configmap_data, parse_params_document
from clusterscaler.proportional.targets import Target
from clusterscaler.testing.fakekube import FakeKubeServer

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "overprovisioning"
DOC = ROOT / "docs" / "overprovisioning.md"


def load_manifests() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        objects.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return objects


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    return load_manifests()


@pytest.fixture(scope="module")
def autoscaler_argv(manifests) -> list[str]:
    deployment = find(manifests, "Deployment", "overprovisioning-autoscaler")
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["clusterscaler", "proportional"]
    return list(command[2:])


def test_every_manifest_is_a_kubernetes_object(manifests):
    assert {o["kind"] for o in manifests} == {
        "Namespace",
        "PriorityClass",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
    }
    for obj in manifests:
        assert obj["apiVersion"] and obj["metadata"]["name"]


def test_pause_pods_are_preemptible_but_not_expendable(manifests):
    pause = find(manifests, "Deployment", "overprovisioning")
    pod_spec = pause["spec"]["template"]["spec"]
    priority_class = find(manifests, "PriorityClass", pod_spec["priorityClassName"])
    cutoff = AutoscalingOptions().expendable_pods_priority_cutoff
    # Below every ordinary pod (0), at or above the cutoff so they still trigger scale-up.
    assert cutoff <= priority_class["value"] < 0
    assert priority_class["globalDefault"] is False
    assert pod_spec["containers"][0]["resources"]["requests"]["cpu"] == "200m"


def test_autoscaler_flags_point_at_the_manifests(manifests, autoscaler_argv):
    config = parse_controller_args(autoscaler_argv, {})
    pause = find(manifests, "Deployment", "overprovisioning")
    assert config.targets == (Target("deployments", pause["metadata"]["name"]),)
    assert config.namespace == pause["metadata"]["namespace"]
    configmap = find(manifests, "ConfigMap", config.configmap)
    assert configmap["metadata"]["namespace"] == config.namespace
    # --default-params recreate the very parameters of the ConfigMap manifest.
    assert config.default_params is not None
    assert parse_configmap_data(config.default_params) == parse_configmap_data(configmap["data"])
    # Probes hit the health server's default port.
    container = find(manifests, "Deployment", "overprovisioning-autoscaler")["spec"]["template"][
        "spec"
    ]["containers"][0]
    assert config.address.endswith(":8080")
    assert container["ports"][0]["containerPort"] == 8080
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/last-poll"


def granted(
    manifests, account: str, role_kind: str, binding_kind: str
) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) triples the roles bound to `account` allow."""
    rules = set()
    for binding in (o for o in manifests if o["kind"] == binding_kind):
        if not any(s["name"] == account for s in binding["subjects"]):
            continue
        role = find(manifests, role_kind, binding["roleRef"]["name"])
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    rules.update((group, resource, verb) for verb in rule["verbs"])
    return rules


def service_account(manifests) -> str:
    deployment = find(manifests, "Deployment", "overprovisioning-autoscaler")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    find(manifests, "ServiceAccount", account)
    return str(account)


def test_rbac_grants_the_documented_permissions(manifests, autoscaler_argv):
    config = parse_controller_args(autoscaler_argv, {})
    account = service_account(manifests)
    cluster = granted(manifests, account, "ClusterRole", "ClusterRoleBinding")
    namespaced = granted(manifests, account, "Role", "RoleBinding")
    assert {("", "nodes", "list"), ("", "nodes", "watch")} <= cluster
    assert {("", "configmaps", "get"), ("", "configmaps", "create")} <= namespaced
    for target in config.targets:
        assert ("apps", f"{target.resource}/scale", "get") in namespaced
        assert ("apps", f"{target.resource}/scale", "update") in namespaced


def documented_rows() -> list[tuple[int, int, int, int, int, str]]:
    rows = []
    for line in DOC.read_text().splitlines():
        match = re.match(
            r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([^|]+)\|",
            line,
        )
        if match:
            *numbers, headroom = match.groups()
            rows.append((*(int(n) for n in numbers), headroom.strip()))
    return rows


def documented_params() -> str:
    match = re.search(r"```json\n(\{\"coresPerReplica\".*?\})\n```", DOC.read_text())
    assert match, "the sizing parameters block is missing from docs/overprovisioning.md"
    return json.dumps({"linear": json.loads(match.group(1))})


def test_documented_params_are_the_configmap(manifests):
    configmap = find(manifests, "ConfigMap", "overprovisioning-autoscaler")
    assert parse_params_document(documented_params()) == parse_configmap_data(configmap["data"])


ROWS = documented_rows()


def test_the_table_is_there():
    assert len(ROWS) >= 6


def headroom_millis(text: str) -> int:
    amount = text.split()[0]
    if amount.endswith("m"):
        return int(amount[:-1])
    return round(float(amount) * 1000)


@pytest.mark.parametrize(
    ("nodes", "cores", "sched_nodes", "sched_cores", "expected", "headroom"),
    ROWS,
    ids=[f"{r[0]}n-{r[1]}c-{r[2]}sn-{r[3]}sc" for r in ROWS],
)
def test_calc_gives_the_documented_replicas(
    capsys, nodes, cores, sched_nodes, sched_cores, expected, headroom
):
    code = main(
        [
            "calc",
            "--params",
            documented_params(),
            "--nodes",
            str(nodes),
            "--cores",
            str(cores),
            "--schedulable-nodes",
            str(sched_nodes),
            "--schedulable-cores",
            str(sched_cores),
        ]
    )
    assert code == 0
    assert json.loads(capsys.readouterr().out) == {"replicas": expected}
    assert headroom_millis(headroom) == expected * 200


def test_documented_ladder_alternative_is_valid():
    match = re.search(r"(\{\"ladder\".*\})", DOC.read_text())
    assert match
    parse_params_document(match.group(1))


def node(name: str, cpu: str = "4", *, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"unschedulable": unschedulable},
        "status": {
            "allocatable": {"cpu": cpu},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


@pytest.mark.parametrize("apply_configmap", [True, False], ids=["configmap", "default-params"])
def test_recipe_end_to_end(manifests, autoscaler_argv, apply_configmap):
    config = parse_controller_args(autoscaler_argv, {})
    with FakeKubeServer() as kube:
        for obj in manifests:
            if obj["kind"] == "ConfigMap" and not apply_configmap:
                continue
            kube.create(obj)
        for i in range(3):
            kube.create(node(f"n{i}"))
        # As the real process runs it: nodes from a list+watch cache.
        controller = Controller(
            kube.api_client(),
            namespace=config.namespace,
            configmap=config.configmap,
            targets=config.targets,
            default_params=config.default_params,
            node_labels=config.node_labels,
            request_timeout=5.0,
            watch_nodes=True,
        )

        def pause_replicas() -> int:
            obj = kube.get("deployments", "overprovisioning", config.namespace)
            assert obj is not None
            return int(obj["spec"]["replicas"])

        def poll_until(expected: int) -> None:
            deadline = time.monotonic() + 10
            while controller.poll().decision.replicas != expected:
                assert time.monotonic() < deadline, f"never reached {expected}"
                time.sleep(0.05)
            assert pause_replicas() == expected

        try:
            # 3 nodes, 12 cores: 12 pause pods (table row).
            result = controller.poll()
            assert result.configmap_created is not apply_configmap
            assert pause_replicas() == 12

            # The cluster grows to 10 nodes, 2 of them cordoned: 32 (table row).
            for i in range(3, 8):
                kube.create(node(f"n{i}"))
            kube.create(node("cordoned-0", unschedulable=True))
            kube.create(node("cordoned-1", unschedulable=True))
            poll_until(32)

            # And far beyond: capped at max.
            for i in range(8, 40):
                kube.create(node(f"n{i}"))
            poll_until(100)
        finally:
            controller.close()

        # Every call the controller made is allowed by the recipe's RBAC.
        account = service_account(manifests)
        allowed = granted(manifests, account, "ClusterRole", "ClusterRoleBinding") | granted(
            manifests, account, "Role", "RoleBinding"
        )
        for request in kube.requests:
            if request.method == "GET" and not request.resource:
                continue  # discovery: granted to every authenticated user
            resource = request.resource
            if request.subresource:
                resource = f"{resource}/{request.subresource}"
            assert (request.group, resource, request.verb) in allowed, request
