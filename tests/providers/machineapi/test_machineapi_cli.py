"""`clusterscaler --cloud-provider=machineapi` as a process against the fake API server.

The test plays the Machine API controllers: it turns replicas into Machines and Nodes,
and removes the Machines the autoscaler marked for deletion.
"""

from __future__ import annotations

import os
from pathlib import Path

from clusterscaler.testing.cliprocess import ClusterscalerProcess
from clusterscaler.testing.fakekube import FakeKubeServer
from machineapi_builders import (
    OPENSHIFT,
    OPENSHIFT_NS,
    MachineController,
    limits,
    pending_pod,
    resource_name,
    scalable,
)

MS_OS = resource_name(OPENSHIFT, "MachineSet")
M_OS = resource_name(OPENSHIFT, "Machine")


def replicas(kube: FakeKubeServer) -> int:
    obj = kube.get(MS_OS, "workers", OPENSHIFT_NS)
    assert obj is not None
    return int(obj["spec"]["replicas"])


def test_cli_scales_a_machineset_from_zero_to_n_and_back(kube: FakeKubeServer, tmp_path: Path) -> None:
    for namespace in ("default", "kube-system"):
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    kube.create(
        scalable(
            "workers",
            replicas=0,
            annotations={**limits(OPENSHIFT, 0, 3), f"{OPENSHIFT}/vCPU": "4", f"{OPENSHIFT}/memoryMb": "16384"},
        )
    )
    kube.create(pending_pod("web-1", "3"))
    kube.create(pending_pod("web-2", "3"))
    kubeconfig = kube.kubeconfig(tmp_path / "kubeconfig")
    env = {k: v for k, v in os.environ.items() if k not in ("CAPI_GROUP", "CAPI_VERSION", "KUBECONFIG")}
    args = [
        "--cloud-provider=machineapi",
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--scan-interval=1s",
        "--address=127.0.0.1:0",
        "--scale-down-delay-after-add=0s",
        "--scale-down-unneeded-time=1s",
        "--skip-nodes-with-custom-controller-pods=false",
        # The fake server answers at once; the default 5 QPS would only slow the test down.
        "--kube-client-qps=200",
        "--kube-client-burst=200",
    ]
    controller = MachineController(kube)
    with ClusterscalerProcess(args, log=tmp_path / "clusterscaler.log", env=env, stop_timeout=10) as run:
        run.wait_for("the scale-up from zero", lambda: replicas(kube) == 2, 15)

        def controllers() -> None:
            controller.reconcile()
            for pod in kube.list("pods", "default"):
                kube.delete("pods", pod["metadata"]["name"], "default")

        controllers()
        assert len(kube.list("nodes")) == 2
        run.wait_for(
            "the scale-down to zero",
            lambda: replicas(kube) == 0 and not kube.list(M_OS),
            15,
            tick=controllers,
        )
    output = run.output()
    assert run.returncode == 0, output[-3000:]
    assert "machineapi_provider_ready" in output
    marks = [r for r in kube.requests if r.method == "PATCH" and r.resource == "machines"]
    assert len(marks) == 2, output[-3000:]


def test_cli_scales_machines_of_a_separate_management_cluster_from_their_template(tmp_path: Path) -> None:
    """`--cloud-provider=clusterapi --kubeconfig=<workload> --cloud-config=<management>`: the
    pods pend in the workload cluster, the MachineSet (at zero, described only by its
    infrastructure template) is scaled in the management cluster."""
    from clusterscaler.testing.fakekube import cluster_api_resources
    from clusterscaler.testing.fakekube_resources import ResourceType
    from machineapi_builders import CAPI

    infra = "infrastructure.cluster.x-k8s.io"
    resources = [
        *cluster_api_resources(),
        ResourceType(infra, ("v1beta1",), "DockerMachineTemplate", "dockermachinetemplates"),
    ]
    with FakeKubeServer(resources=resources) as management, FakeKubeServer() as workload:
        for namespace in ("default", "kube-system"):
            workload.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        management.create(
            {
                "apiVersion": f"{infra}/v1beta1",
                "kind": "DockerMachineTemplate",
                "metadata": {"name": "tmpl", "namespace": "prod"},
                "status": {"capacity": {"cpu": "4", "memory": "16Gi"}},
            }
        )
        ms = scalable("workers", group=CAPI, namespace="prod", replicas=0, annotations=limits(CAPI, 0, 3))
        ms["spec"]["template"]["spec"]["infrastructureRef"] = {
            "apiVersion": f"{infra}/v1beta1",
            "kind": "DockerMachineTemplate",
            "name": "tmpl",
        }
        management.create(ms)
        workload.create(pending_pod("web-1", "3"))
        env = {k: v for k, v in os.environ.items() if k not in ("CAPI_GROUP", "CAPI_VERSION", "KUBECONFIG")}
        args = [
            "--cloud-provider=clusterapi",
            f"--kubeconfig={workload.kubeconfig(tmp_path / 'workload.kubeconfig')}",
            f"--cloud-config={management.kubeconfig(tmp_path / 'management.kubeconfig')}",
            "--clusterapi-cloud-config-authoritative=false",
            "--leader-elect=false",
            "--scan-interval=1s",
            "--address=127.0.0.1:0",
            "--kube-client-qps=200",
            "--kube-client-burst=200",
        ]

        def management_replicas() -> int:
            obj = management.get(resource_name(CAPI, "MachineSet"), "workers", "prod")
            assert obj is not None
            return int(obj["spec"]["replicas"])

        with ClusterscalerProcess(args, log=tmp_path / "clusterscaler.log", env=env, stop_timeout=10) as run:
            run.wait_for("the scale-up from zero", lambda: management_replicas() == 1, 15)
        output = run.output()
        assert run.returncode == 0, output[-3000:]
        assert "management_cluster=true" in output, output[-3000:]
        assert not [r for r in workload.requests if "x-k8s.io" in r.path]
