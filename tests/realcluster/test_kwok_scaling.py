"""Scale-up and scale-down on the real control plane: kube-scheduler binds, the eviction API
drains under a real PodDisruptionBudget, the DaemonSet controller places its pods."""

from __future__ import annotations

import time

import pytest
import yaml
from clusterscaler.testing.kwokenv import (
    KWOK_TOLERATION,
    KwokEnv,
    deployment,
    template_node,
)

pytestmark = pytest.mark.realcluster


def test_scale_up_until_kube_scheduler_binds_every_pod(kwok_env: KwokEnv) -> None:
    """Six pods of 1.5 CPU on 4-CPU nodes: three new nodes, every pod bound by kube-scheduler,
    and the status ConfigMap, Events and /metrics say so as CA's do."""
    env, cluster = kwok_env, kwok_env.cluster
    env.configure(template_node("small", cpu="4", max_count=10))
    ns = cluster.namespace()
    cluster.apply(deployment(ns, "web", 6, cpu="1500m"))
    cluster.wait_for(lambda: len(env.unschedulable(ns)) == 6, "six unschedulable pods")
    with env.run() as run:
        started = time.monotonic()
        run.wait_for("every pod bound and running", lambda: len(env.running(ns, "web")) == 6, 60)
        elapsed = time.monotonic() - started
        nodes = env.nodes()
        # The pods fit two to a node: no more nodes than that.
        assert len(nodes) == 3, [n["metadata"]["name"] for n in nodes]
        for node in nodes:
            meta, spec = node["metadata"], node["spec"]
            assert meta["annotations"]["kwok.x-k8s.io/node"] == "fake"
            assert meta["annotations"]["cluster-autoscaler.kwok.nodegroup/name"] == "small"
            assert meta["name"].startswith("small-")
            assert meta["labels"]["kubernetes.io/hostname"] == meta["name"]
            assert spec["providerID"] == f"kwok:{meta['name']}"
            assert {"key": "kwok-provider", "value": "true", "effect": "NoSchedule"} in spec["taints"]
        # Several scan intervals (2 s) at most, not minutes.
        assert elapsed < 30, elapsed

        def registered() -> int:
            status = env.status_configmap()
            if status is None:
                return -1
            groups = {g["name"]: g for g in yaml.safe_load(status["data"]["status"])["nodeGroups"]}
            return int(groups["small"]["health"]["nodeCounts"]["registered"]["total"])

        # The status is written at the end of each loop: the next loop sees the new nodes.
        run.wait_for("the status ConfigMap to count three registered nodes",
                     lambda: registered() == 3, 20)
        status = env.status_configmap()
        assert status is not None
        document = yaml.safe_load(status["data"]["status"])
        assert document["autoscalerStatus"] == "Running"
        groups = {g["name"]: g for g in document["nodeGroups"]}
        assert groups["small"]["health"]["maxSize"] == 10
        assert "cluster-autoscaler.kubernetes.io/last-updated" in status["metadata"]["annotations"]

        triggered = env.events(ns, "TriggeredScaleUp")
        assert triggered, "no TriggeredScaleUp event on the pods"
        assert "small" in triggered[0]["message"]
        assert triggered[0]["source"]["component"] == "cluster-autoscaler"

        def ready() -> list[float]:
            return [v for name, labels, v in env.metric_samples(run)
                    if name == "cluster_autoscaler_nodes_count" and labels.get("state") == "ready"]

        # A loop's metrics are recorded after its status is written (the write counts in the
        # loop's duration, as in CA): the loop that wrote three nodes may not have set them yet.
        run.wait_for("/metrics to count three ready nodes", lambda: ready() == [3.0], 20)
        metrics = env.metrics(run)
        assert metrics["cluster_autoscaler_scaled_up_nodes_total"] == 3, metrics
        assert metrics["cluster_autoscaler_function_duration_seconds_count"] > 0
        # client-go's series of the API traffic, as CA's /metrics has them.
        codes = {labels["code"] for name, labels, _ in env.metric_samples(run)
                 if name == "rest_client_requests_total"}
        assert "200" in codes or "201" in codes, codes
    assert run.returncode == 0, run.tail()
    # On exit the provider deletes the nodes it made, as upstream's does.
    cluster.wait_for(lambda: not env.nodes(), "the kwok nodes to be cleaned up on exit", 30)


def test_empty_nodes_are_removed(kwok_env: KwokEnv) -> None:
    env, cluster = kwok_env, kwok_env.cluster
    env.configure(template_node("small", cpu="4"))
    ns = cluster.namespace()
    cluster.apply(deployment(ns, "web", 4, cpu="1500m"))
    with env.run() as run:
        run.wait_for("four pods running", lambda: len(env.running(ns, "web")) == 4, 60)
        assert len(env.nodes()) == 2
        cluster.kubectl("delete", "deployment", "web", "-n", ns)
        run.wait_for("every empty node removed", lambda: not env.nodes(), 60)
        assert env.events("default", "ScaleDown"), "no ScaleDown event on the nodes"
        # The kwok provider's own client (outside a cluster) deleted them: counted too.
        methods = {labels["method"] for name, labels, _ in env.metric_samples(run)
                   if name == "rest_client_requests_total"}
        assert {"GET", "PATCH", "DELETE"} <= methods, methods
    assert run.returncode == 0, run.tail()


def _ready_web(env: KwokEnv, ns: str) -> int:
    return sum(
        1 for p in env.pods(ns, "web")
        if any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (p.get("status") or {}).get("conditions") or [])
    )


def test_drain_respects_a_pod_disruption_budget(kwok_env: KwokEnv) -> None:
    """Three nodes, one `web` pod each (kube-scheduler spreads a ReplicaSet). With a budget
    that allows no disruption no node is drained; once it allows one, the nodes are drained
    one eviction at a time and `web` never drops below the budget."""
    env, cluster = kwok_env, kwok_env.cluster
    env.configure(template_node("small", cpu="4"))
    ns = cluster.namespace()
    # A filler pod per node makes three nodes; `web` spreads over them.
    cluster.apply(deployment(ns, "filler", 3, cpu="2500m"))
    with env.run() as run:
        run.wait_for("three filler pods running", lambda: len(env.running(ns, "filler")) == 3, 60)
        cluster.apply(deployment(ns, "web", 3, cpu="1000m"))
        run.wait_for("three web pods running", lambda: len(env.running(ns, "web")) == 3, 30)
        assert len({p["spec"]["nodeName"] for p in env.running(ns, "web")}) == 3
        cluster.apply({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}},
        })
        cluster.wait_for(
            lambda: (cluster.get("pdb", "web", "-n", ns).get("status") or {}).get(
                "currentHealthy") == 3, "the budget to count three healthy pods")
        cluster.kubectl("delete", "deployment", "filler", "-n", ns)
        # Every node is now at 25%: two could go, but no eviction is allowed.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert len(env.nodes()) == 3, "a node was removed against the budget"
            assert _ready_web(env, ns) == 3
            time.sleep(0.5)
        names = {p["metadata"]["name"] for p in env.pods(ns, "web")}
        assert len(names) == 3, "a web pod was evicted against the budget"

        cluster.apply({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        })
        lowest = 3

        def one_node_left() -> bool:
            nonlocal lowest
            lowest = min(lowest, _ready_web(env, ns))
            return len(env.nodes()) == 1 and len(env.running(ns, "web")) == 3

        run.wait_for("the cluster to shrink to one node", one_node_left, 120)
        assert lowest >= 2, f"web dropped to {lowest} ready pods, below the budget's 2"
    assert run.returncode == 0, run.tail()


def test_daemonset_pods_are_counted_on_template_nodes(kwok_env: KwokEnv) -> None:
    """A DaemonSet of 1.5 CPU that tolerates the kwok taint: on a 4-CPU node only two 1.2-CPU
    pods fit beside it (three without it). Six pods take three nodes in one scale-up."""
    env, cluster = kwok_env, kwok_env.cluster
    env.configure(template_node("small", cpu="4"))
    ns = cluster.namespace()
    cluster.apply({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "tolerations": [KWOK_TOLERATION],
                    "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "1500m"}}}],
                },
            },
        },
    })
    cluster.apply(deployment(ns, "web", 6, cpu="1200m"))
    with env.run() as run:
        run.wait_for("six web pods running", lambda: len(env.running(ns, "web")) == 6, 60)
        assert len(env.nodes()) == 3
        agents = env.running(ns, "agent")
        assert len(agents) == 3, "the DaemonSet controller did not place a pod on each node"
        assert env.metrics(run)["cluster_autoscaler_scaled_up_nodes_total"] == 3, (
            "more nodes than needed: the template left out the DaemonSet pod"
        )
    assert run.returncode == 0, run.tail()

