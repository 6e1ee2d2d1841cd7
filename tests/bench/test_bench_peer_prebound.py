"""A `prebound` steady scenario on the real control plane: the harness binds the pods
itself, as their ReplicaSet's own, and the ReplicaSet makes none of its own."""

from __future__ import annotations

import dataclasses

import pytest
from clusterscaler.testing import controlplane
from clusterscaler.testing.realcluster import RealCluster

from bench.peer.run import prepare_existing
from bench.peer.scenarios import SCENARIOS

pytestmark = pytest.mark.realcluster


@pytest.mark.timeout(180)
def test_prebound_pods_are_bound_running_and_owned_by_the_deployments_replica_set(
    kwok_cluster: RealCluster,
) -> None:
    steady = SCENARIOS["steady-5k"]
    scenario = dataclasses.replace(
        steady, namespace="peer-prebound", existing=(("pool-b", 3),), timeout_s=90.0,
        workloads=(dataclasses.replace(steady.workloads[0], replicas=6),),
    )
    kwok_cluster.namespaces.append(scenario.namespace)
    cluster = controlplane.Cluster.load(kwok_cluster.root)
    nodes = prepare_existing(scenario, cluster, progress=False)
    assert len(nodes) == 3
    pods = kwok_cluster.items("pods", "-n", scenario.namespace)
    assert len(pods) == 6
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(nodes * 2)
    (rs,) = kwok_cluster.items("replicasets", "-n", scenario.namespace)
    assert rs["spec"]["replicas"] == 6
    for pod in pods:
        (owner,) = pod["metadata"]["ownerReferences"]
        assert owner["uid"] == rs["metadata"]["uid"] and owner["controller"] is True
    # The ReplicaSet counts them as its own and the kwok kubelets run them.
    kwok_cluster.wait_for(
        lambda: (kwok_cluster.items("replicasets", "-n", scenario.namespace)[0]
                 .get("status", {}).get("readyReplicas") == 6),
        "the ReplicaSet to count 6 ready pods", timeout=60,
    )
    assert len(kwok_cluster.items("pods", "-n", scenario.namespace)) == 6
