"""`python -m bench peer` end to end on the real control plane, at the smallest size: both
autoscalers scale up the same node group for the same Deployment, and the harness measures
both and judges every target. Runs only where upstream CA is built (`python -m bench peer --build`); it is not
built by the test suite."""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterscaler.testing import controlplane, upstreamca
from clusterscaler.testing.realcluster import RealCluster

from bench.peer.run import AUTOSCALERS, CA, Row, evaluate, run_on_cluster
from bench.peer.scenarios import NodeGroup, PeerScenario, Workload

pytestmark = [
    pytest.mark.realcluster,
    pytest.mark.skipif(not upstreamca.built(),
                       reason="upstream CA is not built: python -m bench peer --build"),
]

# 30 pods of 250m (sidecar included) on 4-core nodes: 16 a node, so 2 nodes.
SMOKE = PeerScenario(
    "smoke", "30 pods onto one empty node group",
    groups=(NodeGroup("pool-a", cpu=4, memory_gi=16, max_count=5),),
    workloads=(Workload("web", 30, cpu_m=200, memory_mi=400, pool="pool-a"),),
    namespace="peer-smoke", timeout_s=60.0, settle_s=2.0,
)


@pytest.mark.timeout(150)
def test_both_autoscalers_scale_up_the_same_and_are_measured(
    kwok_cluster: RealCluster, tmp_path: Path
) -> None:
    cluster = controlplane.Cluster.load(kwok_cluster.root)
    rows: list[Row] = []
    for autoscaler in AUTOSCALERS:
        kwok_cluster.namespaces.append(SMOKE.namespace)
        rows.append(run_on_cluster(SMOKE, autoscaler, 1, cluster, tmp_path))
        kwok_cluster.reset()
    for row in rows:
        assert row.ok, row.error
        # Two nodes hold the 30 pods; a third is the overshoot either autoscaler may make
        # while the ReplicaSet controller creates the pods in batches. Whether the two
        # agree is the benchmark's verdict (equal decisions), not this test's.
        assert set(row.nodes_per_group) == {"pool-a"}, row
        assert 2 <= row.nodes_per_group["pool-a"] <= 3, row
        assert row.pods_pending == 0, row
        assert row.decision_latency_s is not None and row.end_to_end_s is not None, row
        assert 0 < row.decision_latency_s <= row.end_to_end_s < SMOKE.timeout_s, row
        assert row.cpu_s is not None and row.cpu_s > 0, row
        assert row.peak_rss_mib is not None and row.peak_rss_mib > 10, row
        assert row.loops >= 1 and row.loop_s is not None, row
        # Each announced its scale-up on the pods it helps (CA's TriggeredScaleUp), once a
        # pod.
        assert row.events.get("Pod TriggeredScaleUp", 0) >= 1, row
        assert row.events.get("Pod TriggeredScaleUp", 0) <= SMOKE.workloads[0].replicas, row
    assert rows[0].autoscaler == CA and rows[0].version == upstreamca.RELEASE
    verdicts = {v.target: v for v in evaluate("smoke", rows)}
    assert set(verdicts) == {"decision latency <= CA", "end to end <= CA",
                             "CPU seconds within 1.5x CA", "peak RSS <= CA",
                             "equal decisions"}, verdicts
