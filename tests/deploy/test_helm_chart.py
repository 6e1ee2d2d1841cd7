"""deploy/helm/clusterscaler, rendered, linted and checked with real Helm (built from its Go
module by scripts/controlplane.sh): for every provider, objects that Kubernetes' schemas
accept, flags the binary parses, the RBAC of deploy/<provider>/; and for the values files CA
users bring, the objects, names, arguments and RBAC of Cluster Autoscaler's own chart
(recorded in upstream_chart.json, see upstream_chart.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import upstream_chart
import yaml
from clusterscaler.commands.cli import load_plugins, parse_autoscaler_args
from clusterscaler.testing import helm

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

PROVIDERS: dict[str, dict[str, Any]] = {
    "aws": {
        "autoDiscovery": {"clusterName": "prod"},
        "autoscalingGroups": [{"name": "gpu", "minSize": 0, "maxSize": 4}],
        "awsRegion": "us-east-1",
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
        "azure": {"cloudConfigHostPath": "/etc/kubernetes/azure.json"},
    },
    "clusterapi": {
        "autoDiscovery": {"namespace": "team-a", "labels": [{"pool": "gpu"}]},
        "clusterapi": {"group": "cluster.x-k8s.io"},
    },
    "machineapi": {},
    "externalgrpc": {
        "cloudConfigPath": "/etc/externalgrpc/cloud-config.yaml",
        "extraVolumeSecrets": {"cloud-config": {"name": "externalgrpc", "mountPath": "/etc/externalgrpc"}},
    },
    "kwok": {},
    "sim": {"sim": {"cloudConfig": {"nodeGroups": [{"name": "g", "minSize": 0, "maxSize": 3}]}}},
}
MONITORING = {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}


def values_of(provider: str, **extra: Any) -> dict[str, Any]:
    return {"cloudProvider": provider, **PROVIDERS[provider], **extra}


def render(provider: str, **extra: Any) -> list[dict[str, Any]]:
    return helm.template(values_of(provider, **extra))


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, (kind, [d["kind"] for d in docs])
    return found[0]


def container_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0])


def args_of(docs: list[dict[str, Any]]) -> list[str]:
    """The container's arguments after the binary (the chart writes them all in `command`)."""
    container = container_of(docs)
    command = [*container.get("command", []), *container.get("args", [])]
    assert command[0] == "clusterscaler"
    return command[1:]


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
    ("v1", "Secret"): "V1Secret",
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
            if set(ep) - {"port", "path", "interval", "relabelings", "metricRelabelings"} or not ep.get("port"):
                errors.append(f"ServiceMonitor endpoint {ep}")
    else:
        for group in spec["groups"]:
            if not isinstance(group.get("name"), str) or not isinstance(group.get("rules"), list):
                errors.append(f"PrometheusRule group {group}")
    return errors


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_helm_lint_passes_and_every_object_fits_its_kubernetes_schema(provider: str) -> None:
    helm.lint(values_of(provider, **MONITORING))
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


# --------------------------------------------------------------------------- values refused


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"cloudProvider": "civo"}, "at '/cloudProvider': value must be one of 'aws'"),
        ({"autoDiscovery": {"clusterName": "x"}, "sslCertPath": "/x"},
         "additional properties 'sslCertPath' not allowed"),
        ({"autoDiscovery": {"clusterName": "x"}, "rbac": {"pspEnabled": True}},
         "at '/rbac/pspEnabled'"),
        ({"autoDiscovery": {"clusterName": "x"}, "extraArgs": {"--v": 4}},
         "'--v' does not match pattern"),
        ({"autoDiscovery": {"clusterName": "x"}, "extraArgs": {"ignore-taint": ["a", "b"]}},
         "at '/extraArgs/ignore-taint'"),
        ({}, "cloudProvider aws: set autoDiscovery.clusterName"),
        ({"cloudProvider": "gce"}, "cloudProvider gce: set autoscalingGroupsnamePrefix"),
        ({"cloudProvider": "externalgrpc"}, "cloudProvider externalgrpc: set cloudConfigPath"),
        ({"autoDiscovery": {"clusterName": "x"},
          "podDisruptionBudget": {"minAvailable": 1, "maxUnavailable": 1}},
         "set minAvailable or maxUnavailable, not both"),
        ({"autoDiscovery": {"clusterName": "x"}, "extraEnvSecrets": {"TOKEN": {"name": "s"}}},
         "missing property 'key'"),
    ],
)
def test_values_that_cannot_apply_are_refused_with_a_message(values: dict[str, Any],
                                                              message: str) -> None:
    with pytest.raises(helm.HelmError, match=re.escape(message)):
        helm.template(values)


# --------------------------------------------------------------------------- names


def test_objects_are_named_from_the_release_as_cluster_autoscalers_chart_names_them() -> None:
    docs = helm.template({"autoDiscovery": {"clusterName": "x"}}, release="ca",
                         namespace="autoscaling")
    assert {d["metadata"]["name"] for d in docs} == {"ca-aws-cluster-autoscaler"}
    account = one(docs, "ServiceAccount")["metadata"]
    assert (account["name"], account["namespace"]) == ("ca-aws-cluster-autoscaler", "autoscaling")
    for binding, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        doc = one(docs, binding)
        assert doc["roleRef"]["name"] == one(docs, role)["metadata"]["name"]
        assert doc["subjects"] == [{"kind": "ServiceAccount", "name": account["name"],
                                    "namespace": "autoscaling"}]
    assert "--namespace=autoscaling" in args_of(docs)
    # A release named like the chart's name is not doubled; overrides win.
    same = helm.template({"autoDiscovery": {"clusterName": "x"}},
                         release="aws-cluster-autoscaler")
    assert one(same, "Deployment")["metadata"]["name"] == "aws-cluster-autoscaler"
    named = helm.template({"autoDiscovery": {"clusterName": "x"}, "fullnameOverride": "ca",
                           "rbac": {"serviceAccount": {"name": "autoscaler"}}})
    assert one(named, "Deployment")["metadata"]["name"] == "ca"
    assert one(named, "ServiceAccount")["metadata"]["name"] == "autoscaler"
    # Without a ServiceAccount of the chart's, the pod runs as `default` unless named.
    borrowed = helm.template({"autoDiscovery": {"clusterName": "x"},
                              "rbac": {"serviceAccount": {"create": False}}})
    assert one(borrowed, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "default"


# --------------------------------------------------------------------------- RBAC


def grants(role: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {(g[1], g[2], g[3], g[4]) for g in upstream_chart.grants(role)}


def plain_grants(name: str, kind: str) -> set[tuple[str, str, str, str]]:
    docs = [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d and d["kind"] == kind]
    return set().union(*(grants(d) for d in docs))


NODE_OBJECTS = {("", "nodes", "create", ""), ("", "nodes", "delete", "")}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_rbac_grants_what_the_chosen_provider_needs_and_nothing_else(provider: str) -> None:
    docs = render(provider)
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    name = f"cluster-autoscaler-{provider}-cluster-autoscaler"
    common = plain_grants("aws/rbac.yaml", "ClusterRole")
    assert grants(roles.pop(name)) == (common | NODE_OBJECTS
                                       if provider in ("kwok", "sim") else common)
    if provider in ("clusterapi", "machineapi"):
        own = roles.pop(f"{name}-clusterapi")
        assert grants(own) == plain_grants("machineapi/rbac-machineapi.yaml", "ClusterRole")
        binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding"
                       and d["roleRef"]["name"] == own["metadata"]["name"])
        assert binding["subjects"][0]["name"] == one(docs, "ServiceAccount")["metadata"]["name"]
    assert roles == {}
    assert grants(one(docs, "Role")) == plain_grants("aws/rbac.yaml", "Role")


def test_clusterapi_rbac_follows_the_mode_scope_and_group() -> None:
    # The objects in another cluster: nothing of theirs is granted here.
    remote = render("clusterapi", clusterAPIMode="incluster-kubeconfig")
    assert [d["metadata"]["name"] for d in remote if d["kind"] == "ClusterRole"] == [
        "cluster-autoscaler-clusterapi-cluster-autoscaler"]
    # Namespaced: no ClusterRole; the Role holds the Cluster API rules.
    scoped = render("clusterapi", rbac={"clusterScoped": False})
    assert {d["kind"] for d in scoped}.isdisjoint({"ClusterRole", "ClusterRoleBinding"})
    assert ("cluster.x-k8s.io", "machinedeployments/scale", "patch", "") in grants(
        one(scoped, "Role"))
    moved = render("clusterapi", clusterapi={"group": "cluster.example.com"})
    own = next(d for d in moved if d["metadata"]["name"].endswith("-clusterapi")
               and d["kind"] == "ClusterRole")
    assert {g[0] for g in grants(own)} == {"cluster.example.com",
                                          "infrastructure.cluster.x-k8s.io",
                                          "machine.openshift.io"}


def test_role_names_the_lease_and_status_config_map_the_flags_name() -> None:
    docs = render("kwok", extraArgs={"leader-elect-resource-name": "ca-lease",
                                     "status-config-map-name": "ca-status"})
    assert {g[3] for g in grants(one(docs, "Role")) if g[3]} == {"ca-lease", "ca-status"}


def test_rbac_create_false_renders_no_rbac_and_additional_rules_are_added() -> None:
    kinds = {d["kind"] for d in render("kwok", rbac={"create": False})}
    assert kinds.isdisjoint(
        {"ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding", "ServiceAccount"})
    rule = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}
    docs = render("kwok", rbac={"additionalRules": [rule],
                                "annotations": {"owner": "{{ .Release.Name }}"}})
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    assert rule in role["rules"]
    assert role["metadata"]["annotations"] == {"owner": "cluster-autoscaler"}


# --------------------------------------------------------------------------- flags


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_the_binary_parses_the_rendered_flags(provider: str) -> None:
    args = args_of(render(provider))
    host, registry = load_plugins(args)
    options, _ = parse_autoscaler_args(args, host, registry)
    assert options.cloud_provider == provider
    assert options.namespace == "kube-system"


def test_extra_args_repeat_with_a_suffix_and_numbers_print_whole() -> None:
    args = args_of(render("kwok", extraArgs={
        "ignore-taint_1": "dedicated", "ignore-taint_2": "gpu", "max-nodes-total": 1000000,
        "scale-down-utilization-threshold": 0.65, "scale-down-enabled": False,
        "balance-similar-node-groups": None,
    }))
    assert args[args.index("--namespace=kube-system") + 1:] == [
        "--balance-similar-node-groups", "--ignore-taint=dedicated", "--ignore-taint=gpu",
        "--logtostderr=true", "--max-nodes-total=1000000",
        "--scale-down-enabled=false", "--scale-down-utilization-threshold=0.65",
        "--stderrthreshold=info", "--v=4",
    ]
    host, registry = load_plugins(args)
    options, _ = parse_autoscaler_args(args, host, registry)
    assert options.max_nodes_total == 1000000
    assert options.ignore_taint == ["dedicated", "gpu"]


def test_default_extra_args_are_cluster_autoscalers_logging_flags_only() -> None:
    chart_values = yaml.safe_load((DEPLOY / "helm" / "clusterscaler" / "values.yaml").read_text())
    assert chart_values["extraArgs"] == {"logtostderr": True, "stderrthreshold": "info", "v": 4}
    assert args_of(render("kwok", customArgs=["--scale-down-enabled=false"]))[-1] == (
        "--scale-down-enabled=false")


def test_provider_values_become_the_flags_and_environment_ca_users_expect() -> None:
    aws = render("aws")
    assert ("--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,"
            "k8s.io/cluster-autoscaler/prod") in args_of(aws)
    assert "--nodes=0:4:gpu" in args_of(aws)
    account = one(aws, "ServiceAccount")["metadata"]
    assert account["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/ca"}
    assert {"name": "AWS_REGION", "value": "us-east-1"} in container_of(aws)["env"]

    keys = render("aws", awsAccessKeyID="AKIA", awsSecretAccessKey="s3cret")
    secret = one(keys, "Secret")
    assert set(secret["data"]) == {"AwsAccessKeyId", "AwsSecretAccessKey"}
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container_of(keys)["env"]
            if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]}
    assert refs["AWS_ACCESS_KEY_ID"] == {"key": "AwsAccessKeyId",
                                         "name": secret["metadata"]["name"]}

    azure = args_of(render("azure"))
    assert ("--node-group-auto-discovery=label:cluster-autoscaler-enabled=true,"
            "cluster-autoscaler-name=prod") in azure
    assert "--nodes=1:5:aks-pool1-vmss" in azure
    assert "--cloud-config=/etc/clusterscaler/azure/azure.json" in azure

    capi = args_of(render("clusterapi"))
    assert [a for a in capi if a.startswith("--node-group-auto-discovery")] == [
        "--node-group-auto-discovery=clusterapi:namespace=team-a,pool=gpu"]
    assert not [a for a in args_of(render("sim"))
                if a.startswith(("--nodes", "--node-group-auto-discovery"))]


def test_the_kwok_configmaps_are_upstreams_schema_and_parse() -> None:
    from clusterscaler_kwok.config import parse_config
    from clusterscaler_kwok.templates import group_name, parse_templates

    docs = render("kwok")
    maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    config = parse_config(maps["kwok-provider-config"]["config"], "chart")
    assert config.templates_configmap == "kwok-provider-templates"
    templates = parse_templates(maps["kwok-provider-templates"]["templates"], "chart")
    assert [group_name(t, config) for t in templates] == ["general"]
    assert {"name": "KWOK_PROVIDER_CONFIGMAP", "value": "kwok-provider-config"} in (
        container_of(docs)["env"])
    assert not [d for d in render("kwok", kwok={"createConfigMaps": False})
                if d["kind"] == "ConfigMap"]


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


def test_pod_values_follow_cluster_autoscalers_chart() -> None:
    docs = render("kwok", **{
        "image": {"repository": "registry.example/cs", "tag": "v9"},
        "resources": {"requests": {"cpu": "1"}},
        "priorityClassName": "",
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                       "whenUnsatisfiable": "ScheduleAnyway"}],
        "updateStrategy": {"type": "Recreate"},
        "revisionHistoryLimit": 3,
        "dnsPolicy": "Default",
        "envFromSecret": "creds",
        "extraEnvSecrets": {"TOKEN": {"name": "tokens", "key": "t"}},
        "extraEnvConfigMaps": {"MODE": {"key": "mode"}},
        "extraVolumeSecrets": {"certs": {"name": "certs", "mountPath": "/certs"}},
        "podLabels": {"team": "infra"},
    })
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "registry.example/cs:v9"
    # Maps merge over the defaults, as with helm --set.
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "300Mi"},
                                      "limits": {"memory": "1Gi"}}
    assert "priorityClassName" not in pod
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "zone"
    assert pod["dnsPolicy"] == "Default"
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert deployment["spec"]["revisionHistoryLimit"] == 3
    assert deployment["spec"]["selector"]["matchLabels"]["team"] == "infra"
    assert container["envFrom"] == [{"secretRef": {"name": "creds"}}]
    env = {e["name"]: e.get("valueFrom") for e in container["env"]}
    assert env["TOKEN"] == {"secretKeyRef": {"name": "tokens", "key": "t"}}
    assert env["MODE"] == {"configMapKeyRef": {"name": "cluster-autoscaler-kwok-cluster-autoscaler",
                                               "key": "mode"}}
    assert {"name": "certs", "mountPath": "/certs", "readOnly": True} in container["volumeMounts"]
    assert {"name": "certs", "secret": {"secretName": "certs"}} in pod["volumes"]
    # Values merge, so minAvailable alone needs the default maxUnavailable set to null (which
    # deletes a key in Helm); Kubernetes refuses a PDB with both.
    pdb = one(render("kwok", podDisruptionBudget={"minAvailable": 1, "maxUnavailable": None}),
              "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1 and "maxUnavailable" not in pdb["spec"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items())


def test_extra_objects_vpa_and_priorities_render() -> None:
    docs = render("kwok", **{
        "extraObjects": [{"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "{{ .Release.Name }}-extra"}}],
        "vpa": {"enabled": True},
        "extraArgs": {"expander": "priority,least-waste"},
        "expanderPriorities": {10: [".*"], 50: [".*gpu.*"]},
    })
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("ConfigMap", "cluster-autoscaler-extra") in names
    assert ("VerticalPodAutoscaler", "cluster-autoscaler-kwok-cluster-autoscaler") in names
    priorities = next(d for d in docs if d["metadata"]["name"]
                      == "cluster-autoscaler-priority-expander")
    assert yaml.safe_load(priorities["data"]["priorities"]) == {10: [".*"], 50: [".*gpu.*"]}
    from clusterscaler.plugins.expanders.priority import parse_priorities

    assert parse_priorities(priorities["data"]["priorities"])


def test_service_monitor_scrapes_the_service_port() -> None:
    docs = render("kwok", serviceMonitor={"enabled": True}, prometheusRule={
        "enabled": True, "rules": [{"alert": "A", "expr": "up == 0"}]})
    monitor = one(docs, "ServiceMonitor")
    service = one(docs, "Service")
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items())
    assert monitor["metadata"]["labels"] == {"release": "prometheus-operator"}
    assert one(docs, "PrometheusRule")["spec"]["groups"][0]["rules"] == [
        {"alert": "A", "expr": "up == 0"}]


# --------------------------------------------------------------------------- upstream's chart

UPSTREAM = json.loads(upstream_chart.RECORD.read_text())

# Where this chart renders differently from Cluster Autoscaler's for the same values, on
# purpose (docs/migrating-from-cluster-autoscaler.md says why):
# - a Deployment for GCE with only autoscalingGroupsnamePrefix (upstream renders none);
# - the Cluster API provider's rules in a ClusterRole of their own, `<fullname>-clusterapi`,
#   the one object to apply in a separate management cluster;
# - whole numbers printed whole: --max-nodes-total=1000000, not 1e+06 (refused by CA too).
EXTRA_OBJECTS = {
    "gke": {("Deployment", "cluster-autoscaler-gce-cluster-autoscaler")},
    "clusterapi": {("ClusterRole", "cluster-autoscaler-clusterapi-cluster-autoscaler-clusterapi"),
                   ("ClusterRoleBinding",
                    "cluster-autoscaler-clusterapi-cluster-autoscaler-clusterapi")},
}
EXTRA_OBJECTS["clusterapi-kubeconfig"] = EXTRA_OBJECTS["clusterapi"]
# Grants beyond upstream's: claims made from templates are read to simulate DRA pods whose
# claim does not exist yet; the Machine API and Cluster API calls of the machineapi provider
# (OpenShift's MachineSets, the Clusters' pause, infrastructure templates for scale from
# zero, Machines marked for deletion by patch); patch on nodes, so that a taint or a cordon
# is one request of --kube-client-qps (upstream's Role, without it, still works: two).
EXTRA_GRANTS = {("resource.k8s.io", "resourceclaimtemplates", verb, "") for verb in ("list",
                                                                                      "watch")}
EXTRA_GRANTS.add(("", "nodes", "patch", ""))


def whole_numbers(args: list[str]) -> list[str]:
    def fix(arg: str) -> str:
        flag, _, value = arg.partition("=")
        if re.fullmatch(r"\d(\.\d+)?e\+\d+", value):
            return f"{flag}={int(float(value))}"
        return arg
    return [fix(a) for a in args]


def covered(grant: tuple[str, str, str, str, str], theirs: set[tuple[str, ...]]) -> bool:
    """Upstream grants this call: a Role's grant by a Role or ClusterRole rule, a named
    object's by a rule naming it or naming none."""
    kind, group, resource, verb, name = grant
    kinds = ("Role", "ClusterRole") if kind == "Role" else ("ClusterRole",)
    return any((k, group, resource, verb, n) in theirs for k in kinds for n in {name, ""})


@pytest.mark.parametrize("example", sorted(upstream_chart.EXAMPLES))
def test_upstream_values_files_render_upstreams_objects_names_args_and_rbac(example: str) -> None:
    values = upstream_chart.EXAMPLES[example]
    helm.lint(values)
    ours = upstream_chart.facts(helm.template(values))
    theirs = UPSTREAM["examples"][example]
    objects = {tuple(o) for o in ours["objects"]}
    assert objects - {tuple(o) for o in theirs["objects"]} == EXTRA_OBJECTS.get(example, set())
    assert {tuple(o) for o in theirs["objects"]} <= objects
    if theirs["args"] is not None:
        assert ours["args"] == whole_numbers(theirs["args"])
        assert ours["serviceAccountName"] == theirs["serviceAccountName"]
        assert set(theirs["env"]) <= set(ours["env"])
    their_grants = {tuple(g) for g in theirs["grants"]}
    beyond = {g for g in map(tuple, ours["grants"]) if not covered(g, their_grants)}
    beyond = {g[1:] for g in beyond} - EXTRA_GRANTS
    if values["cloudProvider"] == "clusterapi":
        beyond = {g for g in beyond if g[0] not in ("cluster.x-k8s.io", "machine.openshift.io",
                                                    "infrastructure.cluster.x-k8s.io")}
    assert beyond == set()
    host, registry = load_plugins(ours["args"])
    parse_autoscaler_args(ours["args"], host, registry)


@pytest.mark.skipif(not os.environ.get("CLUSTERSCALER_UPSTREAM_CHART"),
                    reason="set CLUSTERSCALER_UPSTREAM_CHART to upstream's chart directory")
def test_the_record_is_what_upstreams_chart_renders() -> None:
    chart = Path(os.environ["CLUSTERSCALER_UPSTREAM_CHART"])
    assert upstream_chart.record(chart)["examples"] == UPSTREAM["examples"]


def test_externalgrpc_takes_its_cloud_config_from_cloud_config_path_or_extra_args() -> None:
    docs = render("externalgrpc")
    assert "--cloud-config=/etc/externalgrpc/cloud-config.yaml" in args_of(docs)
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "cloud-config", "mountPath": "/etc/externalgrpc", "readOnly": True} in (
        spec["containers"][0]["volumeMounts"])
    assert {"name": "cloud-config", "secret": {"secretName": "externalgrpc"}} in spec["volumes"]
    # Upstream's chart passes it through extraArgs: that works too, once.
    upstream = args_of(helm.template({"cloudProvider": "externalgrpc",
                                      "extraArgs": {"cloud-config": "/etc/cc.yaml"}}))
    assert [a for a in upstream if a.startswith("--cloud-config")] == ["--cloud-config=/etc/cc.yaml"]
