"""The plain manifests of deploy/<provider>/, rendered from the Helm chart so the two cannot
drift. tests/deploy/test_plain_manifests.py checks the checked-in files against this
rendering; after a change to the chart, write them again with

    .venv/bin/python tests/deploy/plain_manifests.py
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path
from typing import Any

from clusterscaler.testing import helm

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

# One directory per provider, with the chart values that make its example. `machineapi`
# also serves `--cloud-provider=clusterapi` (the same provider).
PLAIN: dict[str, dict[str, Any]] = {
    "aws": {
        "autoDiscovery": {"clusterName": "my-cluster"},
    },
    "gce": {
        "autoscalingGroupsnamePrefix": [{"name": "gke-my-cluster-", "minSize": 0, "maxSize": 10}],
        "gce": {"projectId": "my-project", "localZone": "us-central1-b"},
        "rbac": {
            "serviceAccount": {
                "annotations": {
                    "iam.gke.io/gcp-service-account": "autoscaler@my-project.iam.gserviceaccount.com"
                }
            }
        },
    },
    "azure": {
        "autoDiscovery": {"clusterName": "my-cluster"},
        "azure": {"cloudConfigHostPath": "/etc/kubernetes/azure.json"},
    },
    "machineapi": {},
    "externalgrpc": {
        "cloudConfigPath": "/etc/clusterscaler/externalgrpc/cloud-config.yaml",
        "extraVolumeSecrets": {
            "externalgrpc": {
                "name": "cluster-autoscaler-externalgrpc",
                "mountPath": "/etc/clusterscaler/externalgrpc",
            }
        },
    },
    "kwok": {"kwok": {"createConfigMaps": False}},
    "sim": {
        "sim": {
            "cloudConfig": {
                "nodeGroups": [
                    {
                        "name": "general",
                        "minSize": 0,
                        "maxSize": 10,
                        "template": {
                            "metadata": {
                                "labels": {"node.kubernetes.io/instance-type": "sim.xlarge"}
                            },
                            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
                        },
                    }
                ]
            }
        }
    },
}

# What to replace in each example before applying it.
EDIT = {
    "aws": "my-cluster (the ASG discovery tags), and the ServiceAccount's annotations for "
    "IRSA or EKS Pod Identity (docs/providers/aws.md)",
    "gce": "the MIG name prefix, gce.conf's project and zone, and the Google service account "
    "of the workload identity annotation (docs/providers/gce.md)",
    "azure": "my-cluster (the scale set tags); azure.json is the one AKS writes on every node "
    "(docs/providers/azure.md)",
    "machineapi": "--node-group-auto-discovery to limit the namespaces or labels "
    "(docs/providers/machineapi.md); --cloud-provider=clusterapi is the same provider",
    "externalgrpc": "create the Secret cluster-autoscaler-externalgrpc first, with "
    "cloud-config.yaml (the provider service's address, and cert, key, cacert naming the TLS "
    "files of the same Secret under /etc/clusterscaler/externalgrpc/) "
    "(docs/providers/externalgrpc.md)",
    "kwok": "nothing: create the kwok-provider-config ConfigMap and its templates ConfigMap "
    "first, and run a kwok controller (docs/providers/kwok.md)",
    "sim": "the node groups of the cloud-config (docs/simulate.md); for clusters whose nodes "
    "are simulated, with kwok",
}

# Which file of deploy/<provider>/ each template of the chart goes to.
RBAC_TEMPLATES = ("serviceaccount.yaml", "clusterrole.yaml", "role.yaml")
PROVIDER_RBAC_TEMPLATE = "clusterrole-clusterapi.yaml"
SOURCE = re.compile(r"^---\n# Source: clusterscaler/templates/(\S+)\n", re.MULTILINE)


def header(provider: str, file: str) -> str:
    what = {
        "rbac.yaml": "the ServiceAccount and its RBAC.",
        f"rbac-{provider}.yaml": f"the RBAC of the {provider} provider alone"
        + (
            " (in a separate Cluster API management cluster, apply this file alone)."
            if provider == "machineapi"
            else "."
        ),
        "deployment.yaml": "the Deployment, what it mounts, its Service and its "
        "PodDisruptionBudget.",
    }[file]
    text = (
        f"clusterscaler with --cloud-provider={provider}: {what} "
        f"Apply the whole directory: `kubectl apply -f deploy/{provider}/`. "
        f"Edit first: {EDIT[provider]}. "
        "Rendered from the Helm chart deploy/helm/clusterscaler by "
        "tests/deploy/plain_manifests.py: change the chart, then run that script; "
        "tests/deploy/test_plain_manifests.py fails while the two differ."
    )
    return "".join(f"# {line}\n" for line in textwrap.wrap(text, 92))


def render(provider: str) -> dict[str, str]:
    """The files of deploy/<provider>/, name to text."""
    values = {
        "cloudProvider": provider,
        "fullnameOverride": "cluster-autoscaler",
        **PLAIN[provider],
    }
    text = helm.render_text(values, release="cluster-autoscaler")
    # Applied with kubectl, not managed by Helm.
    text = text.replace('app.kubernetes.io/managed-by: "Helm"', 'app.kubernetes.io/managed-by: "kubectl"')
    parts = SOURCE.split("\n" + text)
    rendered: dict[str, str] = {}
    for template, body in zip(parts[1::2], parts[2::2], strict=True):
        rendered[template] = rendered.get(template, "") + ("\n---\n" if template in rendered else "") + body
    files: dict[str, list[str]] = {}
    # The objects others refer to first: the ServiceAccount, the ConfigMaps a pod mounts.
    first = ("serviceaccount.yaml", "gce-configmap.yaml", "sim-configmap.yaml")
    for template, text in sorted(rendered.items(), key=lambda t: (t[0] not in first, t[0])):
        body = "\n".join(line.rstrip() for line in text.strip("\n").splitlines())
        if not body.strip():
            continue
        if template in RBAC_TEMPLATES:
            file = "rbac.yaml"
        elif template == PROVIDER_RBAC_TEMPLATE:
            file = f"rbac-{provider}.yaml"
        else:
            file = "deployment.yaml"
        files.setdefault(file, []).append(body)
    order = ["rbac.yaml", f"rbac-{provider}.yaml", "deployment.yaml"]
    return {
        file: header(provider, file) + "---\n" + "\n---\n".join(files[file]) + "\n"
        for file in order
        if file in files
    }


def main() -> None:
    for provider in PLAIN:
        folder = DEPLOY / provider
        folder.mkdir(exist_ok=True)
        for name, text in render(provider).items():
            (folder / name).write_text(text)
            print(folder / name, file=sys.stderr)


if __name__ == "__main__":
    main()
