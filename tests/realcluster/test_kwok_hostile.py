"""Objects the API server accepts and no careful tool writes, on the real control plane beside
a healthy workload: the loop reads past them and the healthy node group still scales."""

from __future__ import annotations

import pytest
import yaml
from clusterscaler.testing.kwokenv import KwokEnv, deployment, template_node

pytestmark = pytest.mark.realcluster

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SCALE_UP_DELAY = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"


def odd_node() -> dict[str, object]:
    """A node of no node group with a quantity beyond int64 (the API server keeps `1e400` as
    `10e399`), three hundred labels and a taint nothing tolerates. Its CPU and memory stay
    plausible: as in Cluster Autoscaler, a node outside the node groups counts toward
    --cores-total and --memory-total, so a `1e400` CPU would rightly refuse every scale-up."""
    huge = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "1e400"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "odd-node",
            "labels": {f"example.com/label-{i}": "x" * 63 for i in range(300)},
        },
        "spec": {"taints": [{"key": "example.com/odd", "effect": "NoSchedule"}]},
        "status": {"capacity": huge, "allocatable": huge},
    }


def test_odd_objects_never_stop_the_healthy_group_from_scaling(kwok_env: KwokEnv) -> None:
    """Beside a node of quantities beyond int64 and pods with annotation values the
    autoscaler does not understand (`safe-to-evict: maybe`, `pod-scale-up-delay: later`,
    a 200 KB value), four pending pods get their two nodes and are bound, and every loop
    succeeds."""
    env, cluster = kwok_env, kwok_env.cluster
    env.configure(template_node("small", cpu="4", max_count=10))
    ns = cluster.namespace()
    cluster.apply(odd_node())
    odd_annotations = {SAFE_TO_EVICT: "maybe", SCALE_UP_DELAY: "later",
                       "example.com/blob": "b" * 200_000}
    web = deployment(ns, "web", 4, cpu="1500m")
    web["spec"]["template"]["metadata"]["annotations"] = odd_annotations
    cluster.apply(web)
    cluster.wait_for(lambda: len(env.unschedulable(ns)) == 4, "four unschedulable pods")
    stored = cluster.get("node", "odd-node")
    assert stored["status"]["capacity"]["ephemeral-storage"] == "10e399"
    with env.run() as run:
        run.wait_for("every pod bound and running", lambda: len(env.running(ns, "web")) == 4, 60)
        small = [n for n in env.nodes() if n["metadata"]["name"].startswith("small-")]
        assert len(small) == 2, [n["metadata"]["name"] for n in env.nodes()]

        def running_status() -> bool:
            status = env.status_configmap()
            return status is not None and "Running" in status["data"]["status"]

        run.wait_for("the status ConfigMap", running_status, 20)
        document = yaml.safe_load(env.status_configmap()["data"]["status"])  # type: ignore[index]
        assert document["autoscalerStatus"] == "Running"
        metrics = env.metrics(run)
        assert metrics["cluster_autoscaler_scaled_up_nodes_total"] == 2, metrics
    assert run.returncode == 0, run.tail()
    output = run.output()
    assert "loop_done" in output, run.tail()
    assert "loop_failed" not in output and "Traceback" not in output, run.tail()
