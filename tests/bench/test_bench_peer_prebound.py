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
    # The ReplicaSet adopted the pods, the Deployment the ReplicaSet; the kwok kubelets
    # run them, and nobody made or deleted a pod.
    def adopted() -> bool:
        (rs,) = kwok_cluster.items("replicasets", "-n", scenario.namespace)
        pods = kwok_cluster.items("pods", "-n", scenario.namespace)
        return (
            rs.get("status", {}).get("readyReplicas") == 6
            and [o["kind"] for o in rs["metadata"].get("ownerReferences", [])] == ["Deployment"]
            and all([o["uid"] for o in p["metadata"].get("ownerReferences", [])]
                    == [rs["metadata"]["uid"]] for p in pods)
        )

    kwok_cluster.wait_for(adopted, "the ReplicaSet to adopt 6 ready pods", timeout=60)
    after = kwok_cluster.items("pods", "-n", scenario.namespace)
    assert sorted(p["metadata"]["uid"] for p in after) == sorted(
        p["metadata"]["uid"] for p in pods)
    (d,) = kwok_cluster.items("deployments", "-n", scenario.namespace)
    assert d["spec"]["replicas"] == 6
