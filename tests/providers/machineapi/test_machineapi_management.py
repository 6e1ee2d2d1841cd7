"""A separate management cluster: Machine API objects in one API server, Nodes and pods in
another, as with upstream's `--cloud-config` (the management cluster's kubeconfig)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler.kube.actions import KubeClusterActions
from clusterscaler.kube.source import KubeClusterSource
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.model import parse_node
from clusterscaler.testing.fakekube import FakeKubeServer, cluster_api_resources
from clusterscaler.testing.rbac import RbacAuthorizer
from clusterscaler_machineapi.plugin import build_provider
from machineapi_builders import CAPI, limits, machine, node, pending_pod, resource_name, scalable

MS = resource_name(CAPI, "MachineSet")
MANIFEST = Path(__file__).resolve().parents[3] / "deploy" / "machineapi" / "rbac-machineapi.yaml"


@pytest.fixture
def management() -> Iterator[FakeKubeServer]:
    with FakeKubeServer(resources=cluster_api_resources()) as server:
        yield server


@pytest.fixture
def workload() -> Iterator[FakeKubeServer]:
    with FakeKubeServer() as server:
        yield server


def test_machines_are_read_and_scaled_in_the_management_cluster(
    management: FakeKubeServer, workload: FakeKubeServer, tmp_path: Path
) -> None:
    workload.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    ms = management.create(
        scalable(
            "workers",
            group=CAPI,
            namespace="prod",
            replicas=1,
            annotations={
                **limits(CAPI, 1, 3),
                "capacity.cluster-autoscaler.kubernetes.io/cpu": "4",
                "capacity.cluster-autoscaler.kubernetes.io/memory": "16Gi",
            },
        )
    )
    management.create(machine(ms, "w1"))
    workload.create(node("w1"))
    # w1 (4 CPUs) takes one of the pods, a new machine the other.
    workload.create(pending_pod("web-1", "3"))
    workload.create(pending_pod("web-2", "3"))

    options = dataclasses.replace(
        AutoscalingOptions(), cloud_config=str(management.kubeconfig(tmp_path / "mgmt.kubeconfig"))
    )
    client = workload.api_client()
    provider = build_provider(ProviderContext(options=options, kube_api=client), environ={}, sync_timeout=5)
    try:
        [group] = provider.node_groups()
        assert group.id == "MachineSet/prod/workers"
        raw = workload.get("nodes", "w1")
        assert raw is not None
        assert provider.node_group_for_node(parse_node(raw)) is group

        registry = collect_registry(build_plugin_manager())
        with KubeClusterSource(client, namespace="kube-system") as source:
            assert source.wait_for_sync(10)
            loop = Autoscaler.from_registry(
                registry, options=options, provider=provider, source=source, actions=KubeClusterActions(client)
            )
            result = loop.run_once(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=1))
        assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("MachineSet/prod/workers", 1)]
        scaled = management.get(MS, "workers", "prod")
        assert scaled is not None and scaled["spec"]["replicas"] == 2
    finally:
        provider.cleanup()
        client.close()

    # The workload cluster was never asked about machines, the management cluster only about
    # them, and the Machine API manifest alone allows every call made there.
    assert not [r for r in workload.requests if "x-k8s.io" in r.path]
    assert not [r for r in management.requests if r.path.startswith("/api/")]
    rbac = RbacAuthorizer.from_manifests([MANIFEST])
    assert rbac.denied(management.requests) == []


def test_cleanup_closes_the_management_client(management: FakeKubeServer, tmp_path: Path, monkeypatch: Any) -> None:
    import clusterscaler.kube.client as kube_client

    made: list[Any] = []
    original = kube_client.build_api_client

    def recording(settings: Any) -> Any:
        client = original(settings)
        made.append(client)
        return client

    monkeypatch.setattr(kube_client, "build_api_client", recording)
    closed: list[Any] = []
    options = dataclasses.replace(
        AutoscalingOptions(), cloud_config=str(management.kubeconfig(tmp_path / "mgmt.kubeconfig"))
    )
    provider = build_provider(ProviderContext(options=options, kube_api=object()), environ={}, watch=False)
    [client] = made
    monkeypatch.setattr(client, "close", lambda: closed.append(client))
    provider.cleanup()
    assert closed == [client]
