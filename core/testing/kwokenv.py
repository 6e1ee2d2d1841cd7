"""The real `clusterscaler` process with the kwok provider on the real control plane.

`KwokEnv` holds what a user installs (the RBAC of deploy/kwok/, the kwok provider's two
ConfigMaps) and starts the autoscaler as that ServiceAccount, never as admin, so a
permission the shipped RBAC lacks fails the test; it reads back the cluster's state (nodes,
pods, Events, the status ConfigMap, /metrics). Builders make the objects a test applies:
template nodes, the provider's ConfigMaps, Deployments.
"""

from __future__ import annotations

import contextlib
import os
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from clusterscaler.testing import controlplane
from clusterscaler.testing.cliprocess import ClusterscalerProcess
from clusterscaler.testing.realcluster import RealCluster

NAMESPACE = "kube-system"
GROUP_LABEL = "kwok-nodegroup"
KWOK_TOLERATION = {"key": "kwok-provider", "operator": "Exists", "effect": "NoSchedule"}

# Timers short enough for a test, the rest CA's defaults.
FAST_FLAGS = (
    "--scan-interval=2s",
    "--scale-down-unneeded-time=4s",
    "--scale-down-delay-after-add=0s",
    "--scale-down-delay-after-delete=0s",
    "--scale-down-delay-after-failure=2s",
    "--unremovable-node-recheck-timeout=4s",
)


def template_node(group: str, *, cpu: str = "4", memory: str = "16Gi", pods: str = "110",
                  min_count: int = 0, max_count: int = 10,
                  labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A template Node as a kwok user writes it (upstream's sample, resized)."""
    resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"{group}-template",
            "annotations": {
                "cluster-autoscaler.kwok.nodegroup/min-count": str(min_count),
                "cluster-autoscaler.kwok.nodegroup/max-count": str(max_count),
            },
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": f"{group}-template",
                GROUP_LABEL: group,
                **(labels or {}),
            },
        },
        "spec": {},
        "status": {"allocatable": resources, "capacity": resources},
    }


def provider_configmaps(templates: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The kwok provider's config (upstream chart's, unchanged) and templates ConfigMaps."""
    config = (
        "apiVersion: v1alpha1\n"
        "readNodesFrom: configmap # possible values: [cluster,configmap]\n"
        "nodegroups:\n"
        f'  fromNodeLabelKey: "{GROUP_LABEL}"\n'
        "nodes:\n"
        "configmap:\n"
        "  name: kwok-provider-templates\n"
        "kwok: {}\n"
    )
    listing = {"apiVersion": "v1", "kind": "List", "items": list(templates),
               "metadata": {"resourceVersion": ""}}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "kwok-provider-config", "namespace": NAMESPACE},
         "data": {"config": config}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "kwok-provider-templates", "namespace": NAMESPACE},
         "data": {"templates": yaml.safe_dump(listing)}},
    ]


def deployment(namespace: str, name: str, replicas: int, *, cpu: str = "1500m",
               memory: str = "1Gi", extra_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "tolerations": [KWOK_TOLERATION],
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{
                        "name": "app",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}},
                    }],
                    **(extra_spec or {}),
                },
            },
        },
    }


@dataclass
class KwokEnv:
    """One test's view of the cluster: the autoscaler's setup and helpers to read the state."""

    cluster: RealCluster
    tmp_path: Path
    kubeconfig: Path
    runs: list[ClusterscalerProcess] = field(default_factory=list)

    def configure(self, *templates: dict[str, Any]) -> None:
        self.cluster.apply(*provider_configmaps(templates))

    def run(self, *flags: str, name: str = "run", port: int | None = None,
            env: dict[str, str] | None = None) -> ClusterscalerProcess:
        """`clusterscaler --cloud-provider=kwok` as the deploy/ ServiceAccount (a with-block)."""
        port = port or controlplane.free_port()
        process = ClusterscalerProcess(
            ["--cloud-provider=kwok", f"--kubeconfig={self.kubeconfig}",
             f"--namespace={NAMESPACE}", f"--address=127.0.0.1:{port}", *FAST_FLAGS, *flags],
            log=self.tmp_path / f"{name}.log",
            env={**os.environ, "POD_NAMESPACE": NAMESPACE, **(env or {})},
        )
        process.port = port  # type: ignore[attr-defined]
        self.runs.append(process)
        return process

    # -- reading the cluster

    def nodes(self) -> list[dict[str, Any]]:
        return self.cluster.items("nodes")

    def node_names(self) -> set[str]:
        return {n["metadata"]["name"] for n in self.nodes()}

    def pods(self, namespace: str, app: str | None = None) -> list[dict[str, Any]]:
        args = ["pods", "-n", namespace] + (["-l", f"app={app}"] if app else [])
        return [p for p in self.cluster.items(*args)
                if not p["metadata"].get("deletionTimestamp")]

    def running(self, namespace: str, app: str | None = None) -> list[dict[str, Any]]:
        return [p for p in self.pods(namespace, app)
                if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") == "Running"]

    def pending(self, namespace: str) -> list[dict[str, Any]]:
        return [p for p in self.pods(namespace) if not p["spec"].get("nodeName")]

    def unschedulable(self, namespace: str) -> list[dict[str, Any]]:
        """Pods kube-scheduler has marked PodScheduled=False/Unschedulable."""
        return [
            p for p in self.pending(namespace)
            if any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                   for c in (p.get("status") or {}).get("conditions") or [])
        ]

    def status_configmap(self) -> dict[str, Any] | None:
        items = self.cluster.items("configmaps", "-n", NAMESPACE,
                                   "--field-selector=metadata.name=cluster-autoscaler-status")
        return items[0] if items else None

    def events(self, namespace: str, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.cluster.items("events", "-n", namespace)
                if e.get("reason") == reason]

    @staticmethod
    def metric_samples(process: ClusterscalerProcess) -> list[tuple[str, dict[str, str], float]]:
        """The samples of the process's /metrics: (name, labels, value)."""
        from prometheus_client.parser import text_string_to_metric_families

        port = process.port  # type: ignore[attr-defined]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
        return [(s.name, dict(s.labels), s.value)
                for family in text_string_to_metric_families(text) for s in family.samples]

    @classmethod
    def metrics(cls, process: ClusterscalerProcess) -> dict[str, float]:
        """Each metric name (no labels) to the sum of its samples."""
        sums: dict[str, float] = {}
        for name, _, value in cls.metric_samples(process):
            sums[name] = sums.get(name, 0.0) + value
        return sums

    def install(self, deploy: Path) -> None:
        """Apply the RBAC of ``deploy`` (deploy/kwok/ of the repository)."""
        self.cluster.apply((deploy / "rbac.yaml").read_text())

    def stop_all(self) -> None:
        for process in self.runs:
            with contextlib.suppress(Exception):
                process.stop()

    @classmethod
    def for_cluster(cls, cluster: RealCluster, tmp_path: Path, deploy: Path) -> KwokEnv:
        env = cls(cluster, tmp_path, tmp_path / "autoscaler.kubeconfig")
        env.install(deploy)
        cluster.service_account_kubeconfig(NAMESPACE, "cluster-autoscaler", env.kubeconfig)
        return env
