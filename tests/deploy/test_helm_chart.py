"""deploy/helm/clusterscaler: the chart renders, for every provider, objects that Kubernetes'
schemas accept, with exactly the RBAC of deploy/<provider>/ for the chosen provider and flags
the binary parses. Rendered with tests/deploy/gotemplate.py (no helm binary in CI)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from clusterscaler.commands.cli import load_plugins, parse_autoscaler_args
from gotemplate import Chart, TemplateError, parse

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = Chart(DEPLOY / "helm" / "clusterscaler")

PROVIDERS: dict[str, dict[str, Any]] = {
    "aws": {
        "autoDiscovery": {"clusterName": "prod"},
        "autoscalingGroups": [{"name": "gpu", "minSize": 0, "maxSize": 4}],
        "rbac": {
            "serviceAccount": {
                "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/ca"}
            }
        },
    },
    "gce": {
        "autoscalingGroupsnamePrefix": [{"name": "gke-prod-", "minSize": 0, "maxSize": 10}],
        "gce": {"projectId": "my-project", "localZone": "us-central1-b", "regional": True},
    },
    "azure": {
        "autoDiscovery": {"clusterName": "prod"},
        "autoscalingGroups": [{"name": "aks-pool1-vmss", "minSize": 1, "maxSize": 5}],
    },
    "clusterapi": {
        "autoDiscovery": {
            "labels": [{"namespace": "team-a"}, {"clusterName": "prod", "pool": "gpu"}]
        },
        "clusterapi": {"group": "cluster.x-k8s.io"},
    },
    "machineapi": {},
    "sim": {"sim": {"cloudConfig": {"nodeGroups": [{"name": "g", "minSize": 0, "maxSize": 3}]}}},
}
# The provider manifests of deploy/ holding each provider's own ClusterRole, beside the rules
# every provider needs (deploy/<provider>/rbac.yaml, the same for all).
EXTRA_RBAC = {
    "clusterapi": "machineapi/rbac-machineapi.yaml",
    "machineapi": "machineapi/rbac-machineapi.yaml",
    "sim": "sim/rbac-sim.yaml",
}
MONITORING = {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}


def render(provider: str, **extra: Any) -> list[dict[str, Any]]:
    return CHART.manifests({"cloudProvider": provider, **PROVIDERS[provider], **extra})


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, (kind, [d["kind"] for d in docs])
    return found[0]


def args_of(docs: list[dict[str, Any]]) -> list[str]:
    return list(one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])


# --------------------------------------------------------------------------- schemas


def _model(type_name: str) -> Any:
    return getattr(kubernetes.client, type_name)


def validate(value: Any, type_name: str, path: str) -> list[str]:
    """Where `value` does not fit the Kubernetes OpenAPI type `type_name` (the client's models):
    unknown fields, wrong scalar types, required fields missing."""
    if value is None:
        return []
    if m := re.fullmatch(r"list\[(.+)\]", type_name):
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {value!r}"]
        return [e for i, v in enumerate(value) for e in validate(v, m.group(1), f"{path}[{i}]")]
    if m := re.fullmatch(r"dict\((?:str), (.+)\)|dict\[str, (.+)\]", type_name):
        if not isinstance(value, dict):
            return [f"{path}: expected a map, got {value!r}"]
        inner = m.group(1) or m.group(2)
        return [e for k, v in value.items() for e in validate(v, inner, f"{path}.{k}")]
    scalars: dict[str, tuple[type, ...]] = {
        "str": (str,),
        "int": (int,),
        "bool": (bool,),
        "float": (int, float),
    }
    if type_name in scalars:
        ok = isinstance(value, scalars[type_name]) and not (
            type_name == "int" and isinstance(value, bool)
        )
        return [] if ok else [f"{path}: expected {type_name}, got {value!r}"]
    if type_name == "object":  # int-or-string, quantities
        return (
            []
            if isinstance(value, (str, int))
            else [f"{path}: expected int or string, got {value!r}"]
        )
    model = _model(type_name)
    if not isinstance(value, dict):
        return [f"{path}: expected a {type_name} object, got {value!r}"]
    json_to_attr = {v: k for k, v in model.attribute_map.items()}
    errors = [
        f"{path}.{key}: not a field of {type_name}" for key in value if key not in json_to_attr
    ]
    for key, v in value.items():
        if key in json_to_attr:
            errors += validate(v, model.openapi_types[json_to_attr[key]], f"{path}.{key}")
    # The models refuse a missing required field in their constructor.
    known = {json_to_attr[k]: v for k, v in value.items() if k in json_to_attr}
    try:
        model(**known)
    except ValueError as e:
        errors.append(f"{path}: {e}")
    return errors


KINDS = {
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "Service"): "V1Service",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
}


def validate_crd(doc: dict[str, Any]) -> list[str]:
    """The Prometheus Operator kinds, checked for the fields the operator reads."""
    errors = validate(doc["metadata"], "V1ObjectMeta", "metadata")
    spec = doc["spec"]
    if doc["kind"] == "ServiceMonitor":
        if set(spec) - {"selector", "namespaceSelector", "endpoints"}:
            errors.append(f"ServiceMonitor spec: unknown fields {set(spec)}")
        errors += validate(spec["selector"], "V1LabelSelector", "spec.selector")
        for ep in spec["endpoints"]:
            if set(ep) - {"port", "path", "interval", "metricRelabelings"} or not ep.get("port"):
                errors.append(f"ServiceMonitor endpoint {ep}")
    else:
        for group in spec["groups"]:
            if not isinstance(group.get("name"), str) or not isinstance(group.get("rules"), list):
                errors.append(f"PrometheusRule group {group}")
    return errors


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_every_object_fits_the_kubernetes_schema_of_its_kind(provider: str) -> None:
    docs = render(provider, **MONITORING)
    errors: list[str] = []
    for doc in docs:
        if doc["apiVersion"] == "monitoring.coreos.com/v1":
            errors += validate_crd(doc)
            continue
        errors += validate(doc, KINDS[(doc["apiVersion"], doc["kind"])], doc["kind"])
    assert errors == []
    assert {d["kind"] for d in docs} >= {"ServiceMonitor", "PrometheusRule", "PodDisruptionBudget"}


def test_the_schema_check_catches_misplaced_and_mistyped_fields() -> None:
    deployment = one(render("aws"), "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    deployment["spec"]["replicas"] = "1"
    del deployment["spec"]["selector"]
    errors = validate(deployment, "V1Deployment", "Deployment")
    assert any("resource: not a field of V1Container" in e for e in errors), errors
    assert any("replicas: expected int" in e for e in errors), errors
    assert any("selector" in e and "None" in e for e in errors), errors


def test_default_values_render_what_deploy_holds() -> None:
    docs = CHART.manifests()
    assert sorted(d["kind"] for d in docs) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    plain = [
        d
        for name in ("aws/rbac.yaml", "aws/deployment.yaml")
        for d in yaml.safe_load_all((DEPLOY / name).read_text())
        if d
    ]
    plain_pod = one(plain, "Deployment")["spec"]["template"]["spec"]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    for key in (
        "securityContext",
        "priorityClassName",
        "serviceAccountName",
        "terminationGracePeriodSeconds",
    ):
        assert pod[key] == plain_pod[key], key
    container, plain_container = pod["containers"][0], plain_pod["containers"][0]
    for key in (
        "command",
        "ports",
        "livenessProbe",
        "readinessProbe",
        "resources",
        "securityContext",
    ):
        assert container[key] == plain_container[key], key
    assert container["image"] == plain_container["image"]


# --------------------------------------------------------------------------- RBAC


def grants(role: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {
        (group, resource, verb, name)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames", [""])
    }


def plain_grants(name: str, kind: str) -> set[tuple[str, str, str, str]]:
    docs = [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d and d["kind"] == kind]
    return set().union(*(grants(d) for d in docs))


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_rbac_is_that_of_deploy_for_the_chosen_provider_only(provider: str) -> None:
    docs = render(provider)
    common, *own = sorted(
        (d for d in docs if d["kind"] == "ClusterRole"), key=lambda d: d["metadata"]["name"]
    )
    assert common["metadata"]["name"] == "clusterscaler"
    assert grants(common) == plain_grants("aws/rbac.yaml", "ClusterRole")
    if provider in EXTRA_RBAC:
        assert [d["metadata"]["name"] for d in own] == [f"clusterscaler-{provider}"]
        assert grants(own[0]) == plain_grants(EXTRA_RBAC[provider], "ClusterRole")
        binding = next(
            d
            for d in docs
            if d["kind"] == "ClusterRoleBinding"
            and d["roleRef"]["name"] == own[0]["metadata"]["name"]
        )
        assert binding["subjects"][0]["name"] == one(docs, "ServiceAccount")["metadata"]["name"]
    else:
        assert own == []
    assert grants(one(docs, "Role")) == plain_grants("aws/rbac.yaml", "Role")


def test_bindings_tie_the_service_account_to_the_roles_in_the_release_namespace() -> None:
    docs = CHART.manifests(
        {"rbac": {"serviceAccount": {"name": "ca"}}}, release="ca", namespace="autoscaling"
    )
    account = one(docs, "ServiceAccount")["metadata"]
    assert (account["name"], account["namespace"]) == ("ca", "autoscaling")
    for binding, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        doc = one(docs, binding)
        assert doc["roleRef"]["name"] == one(docs, role)["metadata"]["name"]
        assert doc["subjects"] == [
            {"kind": "ServiceAccount", "name": "ca", "namespace": "autoscaling"}
        ]
    assert one(docs, "Role")["metadata"]["namespace"] == "autoscaling"
    assert "--namespace=autoscaling" in args_of(docs)
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "ca"


def test_role_names_the_lease_and_status_config_map_the_flags_name() -> None:
    docs = CHART.manifests(
        {
            "extraArgs": {
                "leader-elect-resource-name": "ca-lease",
                "status-config-map-name": "ca-status",
            }
        }
    )
    names = {g[3] for g in grants(one(docs, "Role")) if g[3]}
    assert names == {"ca-lease", "ca-status"}


def test_rbac_create_false_renders_no_rbac() -> None:
    kinds = {
        d["kind"]
        for d in CHART.manifests({"rbac": {"create": False, "serviceAccount": {"create": False}}})
    }
    assert kinds.isdisjoint(
        {"ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding", "ServiceAccount"}
    )


# --------------------------------------------------------------------------- flags


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_the_binary_parses_the_rendered_flags(provider: str) -> None:
    args = args_of(render(provider))
    host, registry = load_plugins(args)
    options, _ = parse_autoscaler_args(args, host, registry)
    assert options.cloud_provider == provider
    assert options.namespace == "kube-system"


def test_provider_values_become_the_flags_ca_users_expect() -> None:
    aws = render("aws")
    assert (
        "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod"
        in args_of(aws)
    )
    assert "--nodes=0:4:gpu" in args_of(aws)
    account = one(aws, "ServiceAccount")["metadata"]
    assert account["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/ca"}
    env = one(aws, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "AWS_REGION", "value": "us-east-1"} in env

    azure = args_of(render("azure"))
    assert (
        "--node-group-auto-discovery=label:cluster-autoscaler-enabled=true,cluster-autoscaler-name=prod"
        in azure
    )
    assert (
        "--nodes=1:5:aks-pool1-vmss" in azure
        and "--cloud-config=/etc/clusterscaler/azure/azure.json" in azure
    )

    capi = args_of(render("clusterapi"))
    assert [a for a in capi if a.startswith("--node-group-auto-discovery")] == [
        "--node-group-auto-discovery=clusterapi:namespace=team-a",
        "--node-group-auto-discovery=clusterapi:clusterName=prod,pool=gpu",
    ]
    assert not [
        a
        for a in args_of(render("sim"))
        if a.startswith(("--nodes", "--node-group-auto-discovery"))
    ]


def test_gce_conf_in_the_config_map_parses_and_is_mounted_where_the_flag_points() -> None:
    from clusterscaler_gce.cloud_config import parse_cloud_config

    docs = render("gce")
    conf = parse_cloud_config(one(docs, "ConfigMap")["data"]["gce.conf"], source="chart")
    assert conf.local_zone == "us-central1-b"
    args = args_of(docs)
    assert "--node-group-auto-discovery=mig:namePrefix=gke-prod-,min=0,max=10" in args
    assert "--cloud-config=/etc/clusterscaler/gce/gce.conf" in args
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    mount = pod["containers"][0]["volumeMounts"][0]
    assert mount["mountPath"] == "/etc/clusterscaler/gce"
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == one(docs, "ConfigMap")["metadata"]["name"]


def test_image_resources_priority_and_pdb_follow_the_values() -> None:
    docs = CHART.manifests(
        {
            "image": {"repository": "registry.example/cs", "tag": "v9"},
            "resources": {"requests": {"cpu": "1"}},
            "priorityClassName": "",
        }
    )
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "registry.example/cs:v9"
    # Maps merge over the defaults, as with helm --set.
    assert pod["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "300Mi"},
        "limits": {"memory": "1Gi"},
    }
    assert "priorityClassName" not in pod
    # Values merge, so minAvailable alone needs the default maxUnavailable set to null (which
    # deletes a key in Helm); Kubernetes refuses a PDB with both.
    pdb = one(
        CHART.manifests({"podDisruptionBudget": {"minAvailable": 1, "maxUnavailable": None}}),
        "PodDisruptionBudget",
    )
    assert pdb["spec"]["minAvailable"] == 1 and "maxUnavailable" not in pdb["spec"]
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert (
        selector.items()
        <= one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"].items()
    )


def test_service_monitor_scrapes_the_service_port() -> None:
    docs = CHART.manifests(
        {
            **MONITORING,
            "prometheusRule": {"enabled": True, "rules": [{"alert": "A", "expr": "up == 0"}]},
        }
    )
    monitor = one(docs, "ServiceMonitor")
    service = one(docs, "Service")
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert one(docs, "PrometheusRule")["spec"]["groups"][0]["rules"] == [
        {"alert": "A", "expr": "up == 0"}
    ]


# --------------------------------------------------------------------------- the renderer


def test_renderer_trims_whitespace_and_chains_else_if() -> None:
    _, defines = parse('{{- define "x" -}}[{{ . }}]{{- end -}}', "t")
    chart_like = Chart(CHART.path)
    chart_like.defines.update(defines)
    from gotemplate import _Renderer

    source = 'a\n  {{- if eq .v 1 }} one {{- else if eq .v 2 }} two {{- else }} other {{- end }}\n{{ include "x" .v }}'
    tree, _ = parse(source, "t")
    out = [_Renderer(chart_like, "t").run(tree, {"v": v}) for v in (1, 2, 3)]
    assert out == ["a one\n[1]", "a two\n[2]", "a other\n[3]"]


def test_renderer_refuses_what_it_does_not_implement() -> None:
    from gotemplate import _Renderer

    for source, message in (
        ('{{ lookup "v1" "Secret" "" "" }}', "unsupported function"),
        ("{{ .a.b }}", "nil pointer"),
        ("{{ if .a }}", "without end"),
    ):
        with pytest.raises(TemplateError, match=message):
            tree, _ = parse(source, "t")
            _Renderer(CHART, "t").run(tree, {})
