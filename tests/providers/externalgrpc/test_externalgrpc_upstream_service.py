"""The externalgrpc provider against upstream's own provider service, on the real control
plane: upstream's example external gRPC cloud provider service (its `wrapper` package, built
with `-tags kwok` by `python -m bench peer --build`, see `clusterscaler.testing.upstreamca`)
wraps CA's kwok provider, reads the kwok ConfigMaps and makes and deletes the kwok nodes; the
connection is mutual TLS as upstream's example requires, with certificates made here.

- `clusterscaler --cloud-provider=externalgrpc` as a process: pending pods that fit only
  the large group's template grow that group through `NodeGroupIncreaseSize`, KWOK's nodes
  register and the pods are bound; the nodes are counted in their group (`NodeGroupForNode`
  by provider ID); emptied, they are removed through `NodeGroupDeleteNodes`.
- the provider in-process: the template nodes, GPU label and types, options, sizes and
  instances as upstream's service serves them, and its errors as it returns them.

Skipped where the service is not built (the git mirror of kubernetes/autoscaler that the
build needs may be missing): `python -m bench peer --build` builds it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.api import CloudProviderError, InstanceState, NodeGroupOptions, ProviderContext
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.model import parse_node
from clusterscaler.testing import controlplane, upstreamca
from clusterscaler.testing.cliprocess import ClusterscalerProcess
from clusterscaler.testing.kwokenv import (
    FAST_FLAGS,
    GROUP_LABEL,
    NAMESPACE,
    KwokEnv,
    deployment,
    provider_configmaps,
    template_node,
)
from clusterscaler.testing.realcluster import RealCluster
from clusterscaler_externalgrpc.plugin import build_provider
from clusterscaler_externalgrpc.provider import (
    DRA_DRIVER_ANNOTATION,
    GPU_COUNT_ANNOTATION,
    ExternalGrpcCloudProvider,
    ExternalGrpcNodeGroup,
    NotImplementedByService,
    ServiceError,
)
from externalgrpc_fakes import Pki, make_pki
from externalgrpckit import write_config

pytestmark = [
    pytest.mark.realcluster,
    pytest.mark.xdist_group("control-plane"),
    pytest.mark.skipif(
        not upstreamca.service_built(),
        reason="upstream's external gRPC provider service is not built: python -m bench peer --build",
    ),
]

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "externalgrpc"
GPU_LABEL = "k8s.amazonaws.com/accelerator"
GPU_TYPES = {"nvidia-tesla-k80", "nvidia-tesla-p100"}
DRA_DRIVER = "gpu.nvidia.com"


def kwok_configmaps() -> list[dict[str, Any]]:
    """Three groups at zero: 2-CPU `pool-small`, 8-CPU `pool-large`, and `pool-gpu` with
    the GPU label and two DRA GPUs declared by annotations; upstream's kwok config with a
    `gpuConfig`."""
    gpu = template_node("pool-gpu", cpu="2", memory="8Gi", max_count=2,
                        labels={GPU_LABEL: "nvidia-tesla-k80"})
    gpu["metadata"]["annotations"].update({DRA_DRIVER_ANNOTATION: DRA_DRIVER,
                                           GPU_COUNT_ANNOTATION: "2"})
    templates = [
        template_node("pool-small", cpu="2", memory="8Gi", max_count=4),
        template_node("pool-large", cpu="8", memory="32Gi", max_count=4),
        gpu,
    ]
    config, listing = provider_configmaps(templates)
    gpu = ("  gpuConfig:\n"
           f"    gpuLabelKey: {GPU_LABEL}\n"
           "    availableGPUTypes:\n"
           + "".join(f"      {name}: {{}}\n" for name in sorted(GPU_TYPES)))
    config["data"]["config"] = config["data"]["config"].replace("nodes:\n", "nodes:\n" + gpu)
    return [config, listing]


@dataclasses.dataclass
class UpstreamService:
    """The running service: where it listens, the cloud-config that reaches it, its log."""

    address: str
    cloud_config: Path
    log: Path
    pki: Pki

    def requests(self, method: str) -> list[str]:
        """The requests of `method` the service logged (its wrapper logs each at -v=10)."""
        return re.findall(rf"got gRPC request: \*protos\.{method}Request(.*)",
                          self.log.read_text(errors="replace"))


@pytest.fixture
def upstream_service(kwok_cluster: RealCluster, tmp_path: Path) -> Iterator[UpstreamService]:
    kwok_cluster.apply(*kwok_configmaps())
    pki = make_pki(tmp_path)
    port = controlplane.free_port()
    log = tmp_path / "external-grpc-cloud-provider-service.log"
    command = [
        str(upstreamca.service_path()), "--cloud-provider=kwok", f"--address=127.0.0.1:{port}",
        f"--cert={pki.server_cert}", f"--key-cert={pki.server_key}", f"--ca-cert={pki.ca}",
        f"--kubeconfig={kwok_cluster.kubeconfig}", "--v=1", "--vmodule=wrapper=10",
    ]
    # Upstream's kwok provider outside a cluster: the kubeconfig, and its ConfigMaps' namespace.
    env = {**os.environ, "KWOK_PROVIDER_MODE": "local", "POD_NAMESPACE": NAMESPACE,
           "KUBECONFIG": str(kwok_cluster.kubeconfig)}
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        kwok_cluster.wait_for(
            lambda: process.poll() is not None or "Server ready at" in log.read_text(errors="replace"),
            "upstream's external gRPC provider service to listen", timeout=30,
        )
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        config = Path(write_config(tmp_path, {
            "address": f"localhost:{port}", "cert": str(pki.client_cert),
            "key": str(pki.client_key), "cacert": str(pki.ca), "grpc_timeout": "5s",
        }))
        yield UpstreamService(f"localhost:{port}", config, log, pki)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        print(f"--- {log.name} (last lines)\n{log.read_text(errors='replace')[-4000:]}")


@pytest.fixture
def provider(upstream_service: UpstreamService) -> Iterator[ExternalGrpcCloudProvider]:
    """The provider as `--cloud-provider=externalgrpc --cloud-config=...` builds it."""
    options = dataclasses.replace(AutoscalingOptions(), cloud_provider="externalgrpc",
                                  cloud_config=str(upstream_service.cloud_config))
    built = build_provider(ProviderContext(options=options))
    yield built
    if built._close is not None:
        built._close()


def _groups(provider: ExternalGrpcCloudProvider) -> dict[str, ExternalGrpcNodeGroup]:
    return {g.id: g for g in provider.node_groups()}


def _registered(env: KwokEnv, group: str) -> int:
    status = env.status_configmap()
    if status is None:
        return -1
    groups = {g["name"]: g for g in yaml.safe_load(status["data"]["status"])["nodeGroups"]}
    if group not in groups:
        return -1
    return int(groups[group]["health"]["nodeCounts"]["registered"]["total"])


def test_pending_pods_grow_the_right_group_through_upstreams_service_and_empty_nodes_go(
    kwok_cluster: RealCluster, upstream_service: UpstreamService, tmp_path: Path
) -> None:
    """Three pods of 3 CPU fit only `pool-large`'s template (from `nodeBytes`, the groups
    being at zero): two 8-CPU nodes made by the service, every pod bound; emptied, both are
    removed through `NodeGroupDeleteNodes`. clusterscaler runs as deploy/externalgrpc's
    ServiceAccount; the service as the cluster's admin, as its own Deployment would."""
    cluster, service = kwok_cluster, upstream_service
    env = KwokEnv.for_cluster(cluster, tmp_path, DEPLOY)
    ns = cluster.namespace()
    cluster.apply(deployment(ns, "big", 3, cpu="3", memory="1Gi"))
    cluster.wait_for(lambda: len(env.unschedulable(ns)) == 3, "three unschedulable pods")
    port = controlplane.free_port()
    run = ClusterscalerProcess(
        ["--cloud-provider=externalgrpc", f"--cloud-config={service.cloud_config}",
         f"--kubeconfig={env.kubeconfig}", f"--namespace={NAMESPACE}",
         f"--address=127.0.0.1:{port}", *FAST_FLAGS],
        log=tmp_path / "clusterscaler.log",
    )
    env.runs.append(run)
    try:
        with run:
            run.wait_for("every pod bound and running", lambda: len(env.running(ns, "big")) == 3, 90)
            nodes = env.nodes()
            # Two 3-CPU pods to an 8-CPU node.
            assert len(nodes) == 2, [n["metadata"]["name"] for n in nodes]
            for node in nodes:
                meta = node["metadata"]
                assert meta["labels"][GROUP_LABEL] == "pool-large", meta
                assert node["spec"]["providerID"] == f"kwok:{meta['name']}"
                assert node["status"]["allocatable"]["cpu"] == "8"
            increases = service.requests("NodeGroupIncreaseSize")
            assert increases, run.tail()
            assert all(re.search(r'id:\s*"pool-large"', r) for r in increases), increases
            assert sum(int(re.search(r"delta:\s*(\d+)", r).group(1))  # type: ignore[union-attr]
                       for r in increases) == 2, increases
            # The service's templates were read: the groups had no node to copy.
            assert service.requests("NodeGroupTemplateNodeInfo")

            # Each node is counted in its group: NodeGroupForNode by the node's provider ID.
            run.wait_for("the status ConfigMap to count two nodes in pool-large",
                         lambda: _registered(env, "pool-large") == 2, 30)
            assert _registered(env, "pool-small") == 0
            asked = service.requests("NodeGroupForNode")
            assert any(f'providerID:"kwok:{n["metadata"]["name"]}"' in r.replace(" ", "")
                       for r in asked for n in nodes), asked

            cluster.kubectl("delete", "deployment", "big", "-n", ns)
            run.wait_for("both emptied nodes removed", lambda: not env.nodes(), 90)
            deletes = service.requests("NodeGroupDeleteNodes")
            deleted = {m for r in deletes for m in re.findall(r'name:\s*"([^"]+)"', r)}
            assert deleted == {n["metadata"]["name"] for n in nodes}, deletes
            assert all(re.search(r'id:\s*"pool-large"', r) for r in deletes), deletes
            assert env.events("default", "ScaleDown"), "no ScaleDown event on the nodes"
        assert run.returncode == 0, run.tail()
        # What is cached, as upstream's client caches it: a group's template and a node's
        # group at most once a loop (each loop starts with Refresh), the GPU label and types
        # at most once.
        loops = len(service.requests("Refresh"))
        assert loops > 1
        for group in ("pool-small", "pool-large", "pool-gpu"):
            asked = [r for r in service.requests("NodeGroupTemplateNodeInfo")
                     if re.search(rf'id:\s*"{group}"', r)]
            assert len(asked) <= loops, (group, len(asked), loops)
        for node in nodes:
            name = node["metadata"]["name"]
            asked = [r for r in service.requests("NodeGroupForNode") if f'name:"{name}"' in r.replace(" ", "")]
            assert 0 < len(asked) <= loops, (name, len(asked), loops)
        assert len(service.requests("GPULabel")) <= 1
        assert len(service.requests("GetAvailableGPUTypes")) <= 1
        assert service.requests("Cleanup"), "no Cleanup when clusterscaler stopped"
    finally:
        env.stop_all()
        print(f"--- {run.log.name} (last lines)\n{run.tail(4000)}")


def test_the_provider_reads_upstreams_service_as_it_answers(
    kwok_cluster: RealCluster, provider: ExternalGrpcCloudProvider
) -> None:
    """Each call of the provider against upstream's service wrapping the kwok provider: what
    it serves (templates, GPU label and types, options, sizes, instances, the group of a
    node) and its errors, as the provider takes them."""
    cluster = kwok_cluster
    provider.refresh()
    groups = _groups(provider)
    assert set(groups) == {"pool-small", "pool-large", "pool-gpu"}
    large = groups["pool-large"]
    assert (large.min_size, large.max_size, large.debug()) == (0, 4, "pool-large (0:4)")
    assert large.target_size() == 0 and large.nodes() == []

    # NodeGroupTemplateNodeInfo: nodeBytes, the kwok template as upstream's provider
    # prepares it (its name, annotations and taint).
    template = large.template_node_info().node
    assert template.name == "kwok-fake-pool-large-template"
    assert template.labels[GROUP_LABEL] == "pool-large"
    assert template.allocatable.cpu == 8000
    assert template.allocatable.memory == 32 * 1024**3
    assert template.allocatable.pods == 110
    assert [(t.key, t.value, t.effect) for t in template.taints] == [
        ("kwok-provider", "true", "NoSchedule")
    ]
    assert template.annotations["kwok.x-k8s.io/node"] == "fake"
    assert large.template_node_info().resource_slices == ()
    # The template's annotations come through nodeBytes: the DRA GPUs they declare are the
    # template's ResourceSlice.
    gpu_info = groups["pool-gpu"].template_node_info()
    assert gpu_info.node.labels[GPU_LABEL] == "nvidia-tesla-k80"
    (devices,) = gpu_info.resource_slices
    assert devices.driver == DRA_DRIVER and devices.node_name == gpu_info.node.name
    assert [d.name for d in devices.devices] == ["gpu-0", "gpu-1"]

    # GPULabel and GetAvailableGPUTypes from the kwok config's gpuConfig (the types' values
    # are empty Any messages).
    assert provider.gpu_label() == GPU_LABEL
    assert provider.available_gpu_types() == GPU_TYPES

    # NodeGroupGetOptions: the kwok provider returns the defaults. Upstream's wrapper
    # (1.36.1) fills scaleDownUtilizationThreshold from the request's GPU threshold, so the
    # reply carries that value in both fields, as CA itself gets it.
    defaults = NodeGroupOptions(
        scale_down_utilization_threshold=0.4, scale_down_gpu_utilization_threshold=0.6,
        scale_down_unneeded_time=timedelta(minutes=3), scale_down_unready_time=timedelta(minutes=20),
        max_node_provision_time=timedelta(minutes=15), zero_or_max_node_scaling=False,
        ignore_daemonsets_utilization=True,
    )
    assert large.get_options(defaults) == dataclasses.replace(
        defaults, scale_down_utilization_threshold=0.6
    )

    # The kwok provider has no prices: UNIMPLEMENTED, which the price expander skips.
    with pytest.raises(NotImplementedByService):
        provider.pricing().node_price(template, *_an_hour())

    # NodeGroupIncreaseSize: the service creates two Nodes, which KWOK makes Ready.
    small = groups["pool-small"]
    small.increase_size(2)
    assert small.target_size() == 2
    cluster.wait_for(lambda: len(cluster.items("nodes")) == 2, "the two new kwok nodes")
    nodes = [parse_node(n) for n in cluster.items("nodes")]
    assert {n.labels[GROUP_LABEL] for n in nodes} == {"pool-small"}
    # The kwok provider lists a group's nodes from its own cache: wait for it.
    cluster.wait_for(lambda: len(small.nodes()) == 2, "the service to list the two instances")
    instances = small.nodes()
    assert {i.id for i in instances} == {n.provider_id for n in nodes}
    assert {i.state for i in instances} == {InstanceState.RUNNING}

    # NodeGroupForNode: a node the service made is in its group; a node of the same label
    # that it did not make (no kwok provider ID) is in none.
    provider.refresh()
    for node in nodes:
        found = provider.node_group_for_node(node)
        assert found is not None and found.id == "pool-small"
    stranger = template_node("pool-small")
    stranger["metadata"]["name"] = "stranger"
    stranger["spec"] = {"providerID": "other://stranger"}
    cluster.apply(stranger)
    stranger_node = parse_node(cluster.get("node", "stranger"))
    assert provider.node_group_for_node(stranger_node) is None

    small = _groups(provider)["pool-small"]
    # The service's own errors: status UNKNOWN with the provider's message, named by the
    # group and the call.
    with pytest.raises(ServiceError, match=r"node group pool-small: NodeGroupDeleteNodes .*"
                       r"UNKNOWN: can't delete node 'stranger' because it is not managed by kwok"
                       ) as refused:
        small.delete_nodes([stranger_node])
    assert refused.value.code == "UNKNOWN"
    with pytest.raises(ServiceError, match=r"NodeGroupDecreaseTargetSize .*UNKNOWN: attempt to "
                       r"delete existing nodes, targetSize: 2 delta: -1 existingNodes: 2"):
        small.decrease_target_size(-1)
    gone = ExternalGrpcNodeGroup(provider.client, "pool-gone", 0, 3, "")
    with pytest.raises(ServiceError, match=r'NodeGroupTargetSize .*UNKNOWN: NodeGroup "pool-gone", not found'):
        gone.target_size()
    # Above the max: refused before the service is asked, in CA's words.
    with pytest.raises(CloudProviderError, match=r"size increase too large"):
        small.increase_size(3)
    assert small.target_size() == 2

    # NodeGroupDeleteNodes of a node it made: the Node is deleted and the target shrinks.
    victim = sorted(nodes, key=lambda n: n.name)[0]
    small.delete_nodes([victim])
    assert small.target_size() == 1
    cluster.wait_for(lambda: victim.name not in {n["metadata"]["name"] for n in cluster.items("nodes")},
                     f"node {victim.name} deleted by the service")

    # Cleanup: upstream's kwok provider deletes the nodes it made.
    provider.cleanup()
    cluster.wait_for(
        lambda: {n["metadata"]["name"] for n in cluster.items("nodes")} == {"stranger"},
        "the service's nodes deleted on Cleanup",
    )


def _an_hour() -> tuple[Any, Any]:
    from datetime import UTC, datetime

    end = datetime.now(UTC)
    return end - timedelta(hours=1), end

