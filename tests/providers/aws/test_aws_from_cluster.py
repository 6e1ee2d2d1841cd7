"""`simulate --from-cluster` and `explain --from-cluster` with `--cloud-provider=aws`: the
cluster is read from the fake API server (GET requests only), the node groups, their bounds
and scale-from-zero templates from moto's ASGs, and nothing is written to either: the
simulation's scale-ups act on the simulated cluster, never on the ASGs."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aws_fakes import AwsFixtures, ProxyState
from clusterscaler.commands.cli import main
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import CloudProviderError
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler.model import parse_node
from clusterscaler.offline.cloudgroups import read_only, read_provider_groups
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.kubeobjects import node_json, pod_json
from clusterscaler_aws.plugin import build_provider

ENABLED = "k8s.io/cluster-autoscaler/enabled"
OWNED = "k8s.io/cluster-autoscaler/demo"
DISCOVERY = f"--node-group-auto-discovery=asg:tag={ENABLED},{OWNED}"
TAGS = {ENABLED: "true", OWNED: "owned"}
# What a cloud's API is asked to change: none of it may reach moto.
READS = ("Describe", "Get", "List")
CREATED = (datetime.now(UTC) - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(name: str, provider_id: str, zone: str) -> dict[str, Any]:
    """A node kubelet registered for an m5.large instance."""
    return node_json(
        name,
        provider_id=provider_id,
        labels={"node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": zone,
                "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
        capacity={"cpu": "2", "memory": "8Gi", "pods": "29"},
        allocatable={"cpu": "1930m", "memory": "7Gi", "pods": "29"},
        created=CREATED,
    )  # fmt: skip


def _pod(name: str, cpu: str, node: str = "") -> dict[str, Any]:
    """A pod of the ReplicaSet its name is made from (up to the last dash): running on
    `node`, or pending (unschedulable, for want of cpu)."""
    return pod_json(
        name,
        cpu=cpu,
        node_name=node,
        owner=("ReplicaSet", name.rsplit("-", 1)[0], f"uid-{name}"),
        created=CREATED,
        message="0/1 nodes are available: 1 Insufficient cpu.",
    )


@contextlib.contextmanager
def _cluster_of(aws: AwsFixtures, proxy: ProxyState, tmp_path: Path, big_desired: int) -> Iterator[Any]:
    """ASG `general` (1..5, one m5.large running, its node registered) and ASG `big`
    (0..3 m5.2xlarge, `big_desired` instances launched, none registered as a node yet),
    both discoverable by tags; a pending pod of 3 CPUs that only an m5.2xlarge fits.
    Yields the fake API server and its kubeconfig."""
    aws.asg("general", min_size=1, max_size=5, desired=1, tags=TAGS, instance_type="m5.large")
    aws.asg("big", min_size=0, max_size=3, desired=big_desired, tags=TAGS, instance_type="m5.2xlarge")
    aws.asg("other", min_size=0, max_size=3, desired=0, tags={ENABLED: "true"})
    general = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])
    [instance_id] = [i["InstanceId"] for i in general["AutoScalingGroups"][0]["Instances"]]
    [instance] = aws.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"]
    zone = instance["Placement"]["AvailabilityZone"]
    with FakeKubeServer() as server:
        server.create(_node("ip-10-0-1-1", f"aws:///{zone}/{instance_id}", zone))
        server.create(_node("ip-10-0-9-9", f"aws:///{zone}/i-0000000000000dead", zone))
        server.create(_pod("web-a1b2c", "1500m", node="ip-10-0-1-1"))
        server.create(_pod("batch-x9y8z", "3"))
        with proxy.lock:
            proxy.calls.clear()
        yield server, server.kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def cluster(aws: AwsFixtures, proxy: ProxyState, tmp_path: Path) -> Any:
    with _cluster_of(aws, proxy, tmp_path, big_desired=0) as found:
        yield found


def _writes(proxy: ProxyState) -> list[str]:
    with proxy.lock:
        return [c for c in proxy.calls if not c.startswith(READS)]


def _only_gets(server: FakeKubeServer) -> None:
    assert {r.method for r in server.requests} == {"GET"}, sorted(
        f"{r.method} {r.path}" for r in server.requests if r.method != "GET"
    )


def _from_cluster(
    capsys: pytest.CaptureFixture[str], command: str, kubeconfig: Path, *flags: str
) -> str:
    """Run `clusterscaler <command> --from-cluster` on the aws provider's discovered ASGs;
    its standard output, once it exited 0."""
    code = main(
        [command, "--from-cluster", "--kubeconfig", str(kubeconfig), "--cloud-provider=aws",
         DISCOVERY, *flags]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _last_json(out: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return doc


def test_simulate_from_cluster_takes_the_asgs_and_writes_to_neither(
    cluster: Any, proxy: ProxyState, aws: AwsFixtures, capsys: pytest.CaptureFixture[str]
) -> None:
    server, kubeconfig = cluster
    out = _from_cluster(capsys, "simulate", kubeconfig, "--once", "--json")
    doc = _last_json(out)
    groups = {g["name"]: g for g in doc["providerNodeGroups"]}
    assert doc["cloudProvider"] == "aws"
    assert groups == {
        "big": {"name": "big", "providerId": "big", "nodes": 0, "targetSize": 0, "minSize": 0,
                "maxSize": 3, "boundsFrom": "aws provider",
                "templateFrom": "aws provider (scale from zero)"},
        "general": {"name": "general", "providerId": "general", "nodes": 1, "targetSize": 1,
                    "minSize": 1, "maxSize": 5, "boundsFrom": "aws provider",
                    "templateFrom": "live node"},
    }  # fmt: skip
    assert [n["node"] for n in doc["notInNodeGroup"]] == ["ip-10-0-9-9"]
    # The 3-CPU pod fits only the m5.2xlarge template the provider made for the empty ASG.
    [up] = doc["scaleUp"]
    assert (up["nodeGroup"], up["from"], up["to"], up["pods"]) == ("big", 0, 1, ["default/batch-x9y8z"])
    # Read only: the ASGs are as they were, no write request reached moto or the API server.
    assert _writes(proxy) == []
    assert proxy.count("DescribeAutoScalingGroups") >= 1
    assert (aws.desired("big"), aws.desired("general")) == (0, 1)
    _only_gets(server)


def test_instances_the_provider_is_still_creating_are_upcoming(
    aws: AwsFixtures, proxy: ProxyState, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ASG `big` already launched an m5.2xlarge whose node has not registered: as in `run`,
    the pending pod waits for that upcoming node instead of asking for another one."""
    with _cluster_of(aws, proxy, tmp_path, big_desired=1) as (server, kubeconfig):
        out = _from_cluster(capsys, "simulate", kubeconfig, "--once", "--json")
        doc = _last_json(out)
        groups = {g["name"]: g for g in doc["providerNodeGroups"]}
        assert (groups["big"]["nodes"], groups["big"]["targetSize"]) == (0, 1)
        assert doc["scaleUp"] == []
        assert doc["unschedulable"] == []
        out = _from_cluster(capsys, "explain", kubeconfig, "--json")
        assert _last_json(out)["scaleUp"] == []
        assert _writes(proxy) == []
        assert aws.desired("big") == 1
        _only_gets(server)


def test_simulate_over_time_scales_the_simulated_cluster_only(
    cluster: Any, proxy: ProxyState, aws: AwsFixtures, capsys: pytest.CaptureFixture[str]
) -> None:
    server, kubeconfig = cluster
    out = _from_cluster(
        capsys, "simulate", kubeconfig,
        "--nodes=1:4:general", "--duration=20m", "--scale-down-unneeded-time=1m", "--json",
    )  # fmt: skip
    lines = [json.loads(line) for line in out.strip().splitlines()]
    assert lines[0]["type"] == "nodeGroups"
    bounds = {g["name"]: (g["minSize"], g["maxSize"], g["boundsFrom"]) for g in lines[0]["providerNodeGroups"]}
    # --nodes names an ASG the tags discover too: the flag's bounds win, as in `run`.
    assert bounds["general"] == (1, 4, "--nodes")
    summary = lines[-1]
    assert summary["type"] == "summary"
    assert summary["nodesProvisioned"] >= 1
    assert summary["stillPending"] == 0
    assert _writes(proxy) == []
    assert (aws.desired("big"), aws.desired("general")) == (0, 1)
    _only_gets(server)


def test_explain_from_cluster_with_aws(
    cluster: Any, proxy: ProxyState, capsys: pytest.CaptureFixture[str]
) -> None:
    server, kubeconfig = cluster
    out = _from_cluster(capsys, "explain", kubeconfig, "--drain-node", "ip-10-0-1-1")
    assert "Node groups of the aws provider (read only" in out
    header = next(line for line in out.splitlines() if line.startswith("NODE GROUP  "))
    assert "BOUNDS FROM" in header and "TEMPLATE FROM" in header
    assert "aws provider (scale from zero)" in out
    assert "ip-10-0-9-9" in out
    assert _writes(proxy) == []
    _only_gets(server)


def test_a_write_through_the_read_only_provider_is_refused(
    cluster: Any, proxy: ProxyState, aws: AwsFixtures
) -> None:
    options = dataclasses.replace(
        AutoscalingOptions(),
        cloud_provider="aws",
        node_group_auto_discovery=[DISCOVERY.split("=", 1)[1]],
    )
    provider = read_only(build_provider(ProviderContext(options=options)))
    provider.refresh()
    [general] = [g for g in provider.node_groups() if g.id == "general"]
    with pytest.raises(CloudProviderError, match=r"node group general: increase_size\(2\) refused"):
        general.increase_size(2)
    node = parse_node(_node("ip-10-0-1-1", "aws:///us-east-1a/i-1", "us-east-1a"))
    with pytest.raises(CloudProviderError, match=r"delete_nodes.*refused: the cloud provider is read only"):
        general.delete_nodes([node])
    with pytest.raises(CloudProviderError, match="decrease_target_size"):
        general.decrease_target_size(-1)
    assert _writes(proxy) == []
    assert aws.desired("general") == 1
    # Reading the groups goes through the same guard.
    groups = read_provider_groups(provider.provider, [node], options)
    assert [g.name for g in groups.groups] == ["big", "general"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--node-group-bounds", "bounds.yaml"], "--node-group-bounds 'bounds.yaml': expected only when"),
        (["--node-group-auto-discovery=asg:tags=x"], "asg:tags=x"),
    ],
    ids=["bounds-file", "bad-discovery"],
)
def test_bad_flags_are_named_before_anything_is_read(
    cluster: Any, proxy: ProxyState, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    server, kubeconfig = cluster
    code = main(
        ["simulate", "--from-cluster", "--kubeconfig", str(kubeconfig), "--cloud-provider=aws",
         "--once", *argv]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err
    assert server.requests == []
    with proxy.lock:
        assert proxy.calls == []
