"""The chart installed with real Helm into the real control plane: the API server accepts every
object, and the autoscaler runs with the ServiceAccount token the chart created and the
arguments of the Deployment the API server holds, so the chart's RBAC is proven by the API
server itself."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import load_plugins, parse_autoscaler_args
from clusterscaler.testing import controlplane, helm
from clusterscaler.testing.cliprocess import ClusterscalerProcess
from clusterscaler.testing.kwokenv import FAST_FLAGS, KwokEnv, deployment, template_node
from clusterscaler.testing.realcluster import RealCluster

pytestmark = pytest.mark.realcluster

NAMESPACE = "kube-system"
UPSTREAM_CHART = Path(__file__).resolve().parents[1] / "deploy" / "upstream_chart.py"


def upstream_example(name: str) -> tuple[dict[str, Any], list[str]]:
    """An example values file of tests/deploy/upstream_chart.py, and the arguments upstream's
    chart renders for it (whole numbers printed whole, as this chart prints them)."""
    spec = importlib.util.spec_from_file_location("upstream_chart", UPSTREAM_CHART)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    record = json.loads(module.RECORD.read_text())["examples"][name]
    return module.EXAMPLES[name], [a.replace("=1e+06", "=1000000") for a in record["args"]]


@pytest.fixture
def release(kwok_cluster: RealCluster) -> Iterator[list[str]]:
    """Names of the releases a test installs; each is uninstalled after it."""
    names: list[str] = []
    yield names
    for name in names:
        helm.helm("uninstall", name, "--namespace", NAMESPACE, "--wait",
                  "--kubeconfig", str(kwok_cluster.kubeconfig))


def installed_deployment(cluster: RealCluster, name: str) -> dict[str, Any]:
    found = cluster.get("deployment", name, "-n", NAMESPACE)
    assert isinstance(found, dict)
    return found


def command_args(deployment_doc: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The container's arguments after the binary, and its literal environment."""
    container = deployment_doc["spec"]["template"]["spec"]["containers"][0]
    command = [*container["command"], *container.get("args", [])]
    assert command[0] == "clusterscaler"
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    return command[1:], env


def test_the_installed_chart_scales_up_as_its_service_account(
    kwok_cluster: RealCluster, release: list[str], tmp_path: Path,
) -> None:
    cluster = kwok_cluster
    values = {
        "cloudProvider": "kwok",
        "replicaCount": 0,  # the test runs the autoscaler itself, with the pod's identity
        "kwok": {"templates": [template_node("charted", cpu="4", max_count=5)]},
        "extraArgs": {flag[2:].split("=")[0]: flag.split("=", 1)[1] for flag in FAST_FLAGS},
    }
    # The chart writes the kwok provider's ConfigMaps; earlier tests may have left their own.
    cluster.kubectl("delete", "configmap", "-n", NAMESPACE, "--ignore-not-found",
                    "kwok-provider-config", "kwok-provider-templates")
    helm.install(values, cluster.kubeconfig, release="cluster-autoscaler", namespace=NAMESPACE)
    release.append("cluster-autoscaler")
    name = "cluster-autoscaler-kwok-cluster-autoscaler"
    args, env = command_args(installed_deployment(cluster, name))
    account = installed_deployment(cluster, name)["spec"]["template"]["spec"][
        "serviceAccountName"]
    assert account == name
    kubeconfig = cluster.service_account_kubeconfig(NAMESPACE, account, tmp_path / "sa.kubeconfig")

    ns = cluster.namespace()
    cluster.apply(deployment(ns, "web", 4, cpu="1500m"))
    kwok = KwokEnv(cluster, tmp_path, kubeconfig)
    cluster.wait_for(lambda: len(kwok.unschedulable(ns)) == 4, "four unschedulable pods")
    port = controlplane.free_port()
    # What the pod gets from its environment: the in-cluster connection and POD_NAMESPACE.
    process = ClusterscalerProcess(
        [*args, f"--kubeconfig={kubeconfig}", f"--address=127.0.0.1:{port}"],
        log=tmp_path / "charted.log",
        env={**os.environ, **env, "POD_NAMESPACE": NAMESPACE},
    )
    try:
        with process:
            process.wait_for("every pod bound and running",
                             lambda: len(kwok.running(ns, "web")) == 4, 90)
            groups = {n["metadata"]["labels"]["kwok-nodegroup"] for n in kwok.nodes()}
            assert groups == {"charted"}
            assert len(kwok.nodes()) == 2
            process.wait_for("the status ConfigMap", lambda: kwok.status_configmap() is not None,
                             30)
            output = process.output()
            assert "Forbidden" not in output and "forbidden" not in output, process.tail()
    finally:
        print(f"--- charted.log (last lines)\n{process.tail(4000)}")


def test_an_eks_values_file_installs_and_the_autoscaler_starts_with_its_arguments(
    kwok_cluster: RealCluster, release: list[str], tmp_path: Path,
) -> None:
    cluster = kwok_cluster
    values, upstream_args = upstream_example("eks")
    helm.install(values, cluster.kubeconfig, release="cluster-autoscaler", namespace=NAMESPACE,
                 extra=["--set", "replicaCount=0"])
    release.append("cluster-autoscaler")
    name = "cluster-autoscaler-aws-cluster-autoscaler"
    args, env = command_args(installed_deployment(cluster, name))
    assert args == upstream_args
    assert env == {"AWS_REGION": "eu-west-1"}
    host, registry = load_plugins(args)
    options, _ = parse_autoscaler_args(args, host, registry)
    assert (options.cloud_provider, options.max_nodes_total) == ("aws", 1000000)
    account = cluster.get("serviceaccount", name, "-n", NAMESPACE)
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == (
        "arn:aws:iam::123456789012:role/cluster-autoscaler")
    subject = f"system:serviceaccount:{NAMESPACE}:{name}"
    for verb, resource, where in (
        ("update", "nodes", []), ("create", "pods", ["-n", "default", "--subresource=eviction"]),
        ("watch", "pods", []), ("update", "leases/cluster-autoscaler", ["-n", NAMESPACE]),
        ("update", "configmaps/cluster-autoscaler-status", ["-n", NAMESPACE]),
        ("list", "resourceslices.resource.k8s.io", []),
    ):
        assert cluster.kubectl("auth", "can-i", verb, resource, "--as", subject, *where,
                               check=False).strip() == "yes", (verb, resource)
    # Least privilege: no Node deletion for aws (its groups are the cloud's), no Secrets.
    for verb, resource in (("delete", "nodes"), ("get", "secrets"), ("delete", "pods")):
        assert cluster.kubectl("auth", "can-i", verb, resource, "--as", subject, "-A",
                               check=False).strip() == "no", (verb, resource)

    # The autoscaler starts with those arguments, as the chart's ServiceAccount, against an
    # EC2 Auto Scaling API (moto's) holding an ASG with the discovery tags.
    pytest.importorskip("clusterscaler_aws")
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        aws_env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "testing",
                   "AWS_SECRET_ACCESS_KEY": "testing", "AWS_CONFIG_FILE": "/nonexistent",
                   "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
        session = boto3.session.Session(region_name="eu-west-1",
                                        aws_access_key_id="testing",
                                        aws_secret_access_key="testing")
        ec2 = session.client("ec2", endpoint_url=aws_env["AWS_ENDPOINT_URL"])
        ec2.create_launch_template(LaunchTemplateName="workers", LaunchTemplateData={
            "ImageId": "ami-12c6146b", "InstanceType": "m5.large"})
        session.client("autoscaling", endpoint_url=aws_env["AWS_ENDPOINT_URL"]) \
            .create_auto_scaling_group(
                AutoScalingGroupName="prod-eks-workers", MinSize=0, MaxSize=4, DesiredCapacity=0,
                LaunchTemplate={"LaunchTemplateName": "workers"},
                AvailabilityZones=["eu-west-1a"],
                Tags=[{"Key": key, "Value": "true", "PropagateAtLaunch": True,
                       "ResourceId": "prod-eks-workers", "ResourceType": "auto-scaling-group"}
                      for key in ("k8s.io/cluster-autoscaler/enabled",
                                  "k8s.io/cluster-autoscaler/prod-eks")])
        kubeconfig = cluster.service_account_kubeconfig(NAMESPACE, name,
                                                        tmp_path / "aws.kubeconfig")
        env_vars = {**os.environ, **aws_env, **env, "POD_NAMESPACE": NAMESPACE}
        process = ClusterscalerProcess(
            [*args, f"--kubeconfig={kubeconfig}",
             f"--address=127.0.0.1:{controlplane.free_port()}"],
            log=tmp_path / "eks.log", env=env_vars,
        )
        kwok = KwokEnv(cluster, tmp_path, kubeconfig)
        try:
            with process:
                def discovered() -> bool:
                    status = kwok.status_configmap()
                    return status is not None and "prod-eks-workers" in status["data"]["status"]

                process.wait_for("the status ConfigMap to list the discovered ASG", discovered,
                                 60)
                assert "forbidden" not in process.output().lower(), process.tail()
        finally:
            print(f"--- eks.log (last lines)\n{process.tail(4000)}")
    finally:
        server.stop()
