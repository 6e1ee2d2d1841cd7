"""The objects `python -m bench peer` applies: the kwok provider's ConfigMaps and the
Deployments of a scenario, as a user writes them.

The templates ConfigMap and the config ConfigMap are the ones clusterscaler's kwok tests
use (upstream's chart's config, unchanged). Each Deployment's pod template has the shape of
`bench/scenarios/realpods.py`'s pods: an app container with requests, limits, ports, env
(values, field and resource references), envFrom, liveness and readiness probes, a
security context and volume mounts; a log sidecar; a ConfigMap, a Secret and an emptyDir
volume; a required node affinity on the OS and a preferred pod anti-affinity on the
hostname, plus the required pod (anti-)affinity and topology spread a Workload asks for.
The API server adds the rest a real pod carries (the ServiceAccount's projected token
volume, the default tolerations, the scheduling defaults).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from clusterscaler.testing.kwokenv import KWOK_TOLERATION, provider_configmaps, template_node

from bench.peer.scenarios import (
    HOSTNAME_LABEL,
    POOL_LABEL,
    SIDECAR_CPU_M,
    SIDECAR_MEMORY_MI,
    ZONE_LABEL,
    NodeGroup,
    PeerScenario,
    Workload,
)

OS_LABEL = "kubernetes.io/os"


def _template(group: NodeGroup) -> dict[str, Any]:
    labels = {POOL_LABEL: group.name}
    if group.zone is not None:
        labels[ZONE_LABEL] = group.zone
    return template_node(
        group.name, cpu=str(group.cpu), memory=f"{group.memory_gi}Gi", pods=str(group.pods),
        min_count=0, max_count=group.max_count, labels=labels,
    )


def provider_objects(scenario: PeerScenario) -> list[dict[str, Any]]:
    """The kwok provider's config and templates ConfigMaps for the scenario's node groups."""
    return provider_configmaps([_template(group) for group in scenario.groups])


KWOK_MANAGED = "kwok.x-k8s.io/node"
# The alphabet Kubernetes draws generated name suffixes from (apimachinery's rand.String).
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _suffix(i: int) -> str:
    chars = []
    for _ in range(5):
        i, digit = divmod(i, len(SUFFIX_ALPHABET))
        chars.append(SUFFIX_ALPHABET[digit])
    return "".join(chars)


def existing_nodes(scenario: PeerScenario) -> list[dict[str, Any]]:
    """The nodes a `steady` scenario starts with, as the kwok provider creates them when it
    grows a group: the template node renamed `<group>-<5 characters>`, provider ID
    `kwok:<name>`, managed by the kwok controller, with the provider's taint."""
    nodes: list[dict[str, Any]] = []
    for group_name, count in scenario.existing:
        group = scenario.group(group_name)
        for i in range(count):
            node = _template(group)
            name = f"{group.name}-{_suffix(i)}"
            node["metadata"]["name"] = name
            node["metadata"]["labels"][HOSTNAME_LABEL] = name
            node["metadata"]["annotations"][KWOK_MANAGED] = "fake"
            node["spec"] = {
                "providerID": f"kwok:{name}",
                "taints": [{"key": "kwok-provider", "value": "true", "effect": "NoSchedule"}],
            }
            nodes.append(node)
    return nodes


def _probe(path: str) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": 8080, "scheme": "HTTP"},
        "initialDelaySeconds": 5, "periodSeconds": 10, "timeoutSeconds": 1,
        "successThreshold": 1, "failureThreshold": 3,
    }


def _term(app: str, topology_key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology_key}


def _affinity(workload: Workload) -> dict[str, Any]:
    """The OS node affinity and the preferred anti-affinity on the hostname every pod has,
    and the Workload's required pod affinity and anti-affinity."""
    anti: dict[str, Any] = {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100, "podAffinityTerm": _term(workload.name, HOSTNAME_LABEL)}]}
    if workload.anti_affinity is not None:
        term = workload.anti_affinity
        anti["requiredDuringSchedulingIgnoredDuringExecution"] = [
            _term(term.app, term.topology_key)]
    affinity: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": OS_LABEL, "operator": "In", "values": ["linux"]}]}]}},
        "podAntiAffinity": anti,
    }
    if workload.affinity is not None:
        term = workload.affinity
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term(term.app, term.topology_key)]}
    return affinity


def deployment(namespace: str, workload: Workload) -> dict[str, Any]:
    app = workload.name
    labels = {"app": app}
    app_container = {
        "name": app,
        "image": f"registry.example.com/{namespace}/{app}:1.24.3",
        "imagePullPolicy": "IfNotPresent",
        "ports": [
            {"containerPort": 8080, "name": "http", "protocol": "TCP"},
            {"containerPort": 9090, "name": "metrics", "protocol": "TCP"},
        ],
        "env": [
            {"name": "APP_NAME", "value": app},
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "GOMAXPROCS",
             "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1"}}},
        ],
        "envFrom": [{"configMapRef": {"name": f"{app}-config"}},
                    {"secretRef": {"name": f"{app}-secrets"}}],
        "resources": {
            "requests": {"cpu": f"{workload.cpu_m}m", "memory": f"{workload.memory_mi}Mi"},
            "limits": {"cpu": f"{2 * workload.cpu_m}m", "memory": f"{2 * workload.memory_mi}Mi"},
        },
        "livenessProbe": _probe("/healthz"),
        "readinessProbe": _probe("/ready"),
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True},
        "volumeMounts": [
            {"mountPath": "/etc/app", "name": "config", "readOnly": True},
            {"mountPath": "/etc/app/secrets", "name": "secrets", "readOnly": True},
            {"mountPath": "/tmp", "name": "tmp"},
        ],
    }
    sidecar = {
        "name": "log-shipper",
        "image": "registry.example.com/platform/log-shipper:2.3.1",
        "args": ["--input=/var/log/app", "--output=stdout"],
        "resources": {
            "requests": {"cpu": f"{SIDECAR_CPU_M}m", "memory": f"{SIDECAR_MEMORY_MI}Mi"},
            "limits": {"cpu": f"{2 * SIDECAR_CPU_M}m", "memory": f"{2 * SIDECAR_MEMORY_MI}Mi"},
        },
        "volumeMounts": [{"mountPath": "/var/log/app", "name": "tmp", "readOnly": True}],
    }
    spec: dict[str, Any] = {
        "containers": [app_container, sidecar],
        "volumes": [
            {"name": "config", "configMap": {"name": f"{app}-config"}},
            {"name": "secrets", "secret": {"secretName": f"{app}-secrets"}},
            {"name": "tmp", "emptyDir": {}},
        ],
        "tolerations": [KWOK_TOLERATION],
        "terminationGracePeriodSeconds": 30,
        "affinity": _affinity(workload),
    }
    if workload.spread is not None:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": workload.spread,
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": labels}}]
    if workload.pool is not None:
        spec["nodeSelector"] = {POOL_LABEL: workload.pool}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": app, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": workload.replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    # The emptyDir would otherwise keep the node (--skip-nodes-with-local-storage).
                    "annotations": {
                        "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "tmp"},
                },
                "spec": spec,
            },
        },
    }


def workload_objects(scenario: PeerScenario) -> list[dict[str, Any]]:
    """The scenario's namespace, each Deployment's ConfigMap and Secret, then the
    Deployments (the order `kubectl apply` needs)."""
    ns = scenario.namespace
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
    ]
    for w in scenario.workloads:
        objects.append({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": f"{w.name}-config", "namespace": ns},
                        "data": {"app.yaml": f"name: {w.name}\nport: 8080\n"}})
        objects.append({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": f"{w.name}-secrets", "namespace": ns},
                        "stringData": {"token": f"{w.name}-token"}})
    objects.extend(deployment(ns, w) for w in scenario.workloads)
    return objects


def scaled_down(scenario: PeerScenario) -> list[dict[str, Any]]:
    """A scale-down scenario's Deployments with their `remaining` replicas (applied over the
    first ones: only the replica counts change)."""
    remaining = dict(scenario.remaining)
    return [deployment(scenario.namespace, replace(w, replicas=remaining[w.name]))
            for w in scenario.workloads if w.name in remaining]


# The pod-template-hash of the ReplicaSets a `prebound` scenario makes itself (any label
# value does: a Deployment takes a ReplicaSet of its template, the hash label aside, as
# its own).
PREBOUND_HASH = "harness"


def prebound_replica_sets(scenario: PeerScenario) -> list[dict[str, Any]]:
    """For a `prebound` scenario, each Deployment's ReplicaSet as the Deployment makes it
    (its template with the pod-template-hash label), made before the Deployment: it adopts
    the pods `bound_pods` made, finds them enough and makes none; the Deployment then
    adopts it as its own."""
    out = []
    for w in scenario.workloads:
        d = deployment(scenario.namespace, w)
        labels = {**d["metadata"]["labels"], "pod-template-hash": PREBOUND_HASH}
        template = d["spec"]["template"]
        out.append({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": f"{w.name}-{PREBOUND_HASH}", "namespace": scenario.namespace,
                         "labels": labels},
            "spec": {
                "replicas": w.replicas,
                "selector": {"matchLabels": {**d["spec"]["selector"]["matchLabels"],
                                             "pod-template-hash": PREBOUND_HASH}},
                "template": {**template, "metadata": {
                    **template["metadata"],
                    "labels": {**template["metadata"]["labels"],
                               "pod-template-hash": PREBOUND_HASH}}},
            },
        })
    return out


def bound_pods(scenario: PeerScenario, node_names: list[str]) -> list[dict[str, Any]]:
    """The pods of each Deployment, as its ReplicaSet (`prebound_replica_sets`) makes them,
    bound to `node_names` in turn, as kube-scheduler spreads them (the pod template's
    preferred anti-affinity on the hostname): the same number on each node. Made before
    their ReplicaSet, which adopts them."""
    pods: list[dict[str, Any]] = []
    i = 0
    for rs in prebound_replica_sets(scenario):
        template = rs["spec"]["template"]
        rs_name = rs["metadata"]["name"]
        for n in range(rs["spec"]["replicas"]):
            spec = {**template["spec"], "nodeName": node_names[i % len(node_names)]}
            i += 1
            pods.append({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{rs_name}-{_suffix(n)}",
                    "namespace": scenario.namespace,
                    "labels": dict(template["metadata"]["labels"]),
                    "annotations": dict(template["metadata"]["annotations"]),
                },
                "spec": spec,
            })
    return pods


def as_list(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": objects}
