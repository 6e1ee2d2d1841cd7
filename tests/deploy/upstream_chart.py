"""What Cluster Autoscaler's own chart renders for the values files CA users have, recorded so
that tests/deploy/test_helm_chart.py can hold our chart to it without upstream's chart.

For each example values file below, upstream_chart.json records the objects (kind and name),
the Deployment's arguments and the RBAC grants that upstream's chart (UPSTREAM_CHART_VERSION)
renders with real Helm. To record them again, with upstream's chart unpacked somewhere (it is
in the kubernetes/autoscaler repository, cluster-autoscaler/charts/cluster-autoscaler):

    .venv/bin/python tests/deploy/upstream_chart.py PATH/TO/charts/cluster-autoscaler

With CLUSTERSCALER_UPSTREAM_CHART set to that path, the tests also render upstream's chart
live and check the record against it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from clusterscaler.testing import helm

UPSTREAM_CHART_VERSION = "9.59.0"
RECORD = Path(__file__).with_name("upstream_chart.json")
RELEASE, NAMESPACE = "cluster-autoscaler", "kube-system"

# The values files a CA user brings: each cloud's usual setup, with the extraArgs habits of
# upstream's README (repeated flags with `_N`, large numbers, thresholds).
EXAMPLES: dict[str, dict[str, Any]] = {
    "eks": {
        "cloudProvider": "aws",
        "awsRegion": "eu-west-1",
        "autoDiscovery": {"clusterName": "prod-eks"},
        "rbac": {
            "serviceAccount": {
                "annotations": {
                    "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/cluster-autoscaler"
                }
            }
        },
        "extraArgs": {
            "logtostderr": True,
            "stderrthreshold": "info",
            "v": 4,
            "balance-similar-node-groups": True,
            "skip-nodes-with-system-pods": False,
            "expander": "least-waste",
            "max-nodes-total": 1000000,
            "scale-down-utilization-threshold": 0.6,
            "ignore-taint_1": "dedicated",
            "ignore-taint_2": "gpu",
            "balancing-ignore-label_1": "topology.ebs.csi.aws.com/zone",
        },
    },
    "eks-static-groups": {
        "cloudProvider": "aws",
        "awsRegion": "us-east-1",
        "autoscalingGroups": [
            {"name": "workers-a", "minSize": 1, "maxSize": 10},
            {"name": "workers-b", "minSize": 0, "maxSize": 5},
        ],
        "extraArgs": {"expander": "priority", "scan-interval": "20s"},
        "expanderPriorities": {10: [".*"], 50: [".*workers-b.*"]},
    },
    "gke": {
        "cloudProvider": "gce",
        "autoscalingGroupsnamePrefix": [
            {"name": "gke-prod-pool-", "minSize": 0, "maxSize": 20}
        ],
        "rbac": {
            "serviceAccount": {
                "annotations": {
                    "iam.gke.io/gcp-service-account": "ca@my-project.iam.gserviceaccount.com"
                }
            }
        },
    },
    "aks": {
        "cloudProvider": "azure",
        "autoscalingGroups": [{"name": "aks-pool1-12345678-vmss", "minSize": 1, "maxSize": 10}],
        "azureClientID": "client",
        "azureClientSecret": "secret",
        "azureResourceGroup": "MC_rg_prod_westeurope",
        "azureSubscriptionID": "sub",
        "azureTenantID": "tenant",
        "azureVMType": "vmss",
    },
    "aks-workload-identity": {
        "cloudProvider": "azure",
        "autoDiscovery": {"clusterName": "prod-aks"},
        "azureUseWorkloadIdentityExtension": True,
        "azureSubscriptionID": "sub",
        "azureResourceGroup": "MC_rg_prod_westeurope",
        "podLabels": {"azure.workload.identity/use": "true"},
    },
    "clusterapi": {
        "cloudProvider": "clusterapi",
        "autoDiscovery": {"clusterName": "prod", "namespace": "capi-prod", "labels": [{"pool": "gpu"}]},
        "extraArgs": {"scale-down-delay-after-add": "5m", "v": 2},
    },
    "clusterapi-kubeconfig": {
        "cloudProvider": "clusterapi",
        "clusterAPIMode": "kubeconfig-incluster",
        "clusterAPIKubeconfigSecret": "workload-kubeconfig",
        "autoDiscovery": {"namespace": "capi-prod"},
    },
    "kwok": {"cloudProvider": "kwok", "autoscalingGroups": [{"name": "kind-worker", "minSize": 0, "maxSize": 5}]},
}


def grants(doc: dict[str, Any]) -> set[tuple[str, str, str, str, str]]:
    """A Role's or ClusterRole's rules, one (kind, group, resource, verb, name) each."""
    return {
        (doc["kind"], group, resource, verb, name)
        for rule in doc.get("rules") or []
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
        for name in rule.get("resourceNames") or [""]
    }


def facts(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """What is compared: objects, the container's arguments (after the binary), RBAC grants.
    Upstream's chart renders no Deployment for some values (GCE with only a name prefix):
    then arguments, ServiceAccount and environment are None."""
    roles = [d for d in docs if d["kind"] in ("Role", "ClusterRole")]
    found = {
        "objects": sorted([d["kind"], d["metadata"]["name"]] for d in docs),
        "grants": sorted(list(g) for g in set().union(*(grants(r) for r in roles))),
        "args": None,
        "serviceAccountName": None,
        "env": None,
    }
    for deployment in (d for d in docs if d["kind"] == "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        command = [*container.get("command", []), *container.get("args", [])]
        found["args"] = command[1:]
        found["serviceAccountName"] = pod["serviceAccountName"]
        found["env"] = sorted(e["name"] for e in container.get("env", []))
    return found


def render(chart: Path, values: dict[str, Any]) -> list[dict[str, Any]]:
    return helm.template(values, chart=chart, release=RELEASE, namespace=NAMESPACE)


def record(chart: Path) -> dict[str, Any]:
    return {
        "chart": f"cluster-autoscaler {UPSTREAM_CHART_VERSION}",
        "helm": helm.helm("version", "--short").strip(),
        "examples": {name: facts(render(chart, values)) for name, values in EXAMPLES.items()},
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    chart = Path(argv[0])
    version = next(
        line.split(":", 1)[1].strip()
        for line in (chart / "Chart.yaml").read_text().splitlines()
        if line.startswith("version:")
    )
    if version != UPSTREAM_CHART_VERSION:
        print(f"{chart}: chart version {version}, expected {UPSTREAM_CHART_VERSION}",
              file=sys.stderr)
        return 1
    RECORD.write_text(json.dumps(record(chart), indent=1, sort_keys=True) + "\n")
    print(RECORD, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
