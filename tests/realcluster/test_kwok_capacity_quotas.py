"""A CapacityQuota on the real control plane, with upstream's CRD and the chart's RBAC: pods
that need more nodes than the quota allows get exactly the quota's nodes, the rest stay
pending naming the quota, and the quota's status says what it covers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from clusterscaler.testing import helm
from clusterscaler.testing.capacityquotacrd import NAME, capacity_quota_crd
from clusterscaler.testing.kwokenv import (
    GROUP_LABEL,
    NAMESPACE,
    KwokEnv,
    deployment,
    template_node,
)

pytestmark = pytest.mark.realcluster

ROLE = "clusterscaler-capacity-quotas"
HELD = 'exceeded quota: "CapacityQuota/small-pool", resources: nodes'


@pytest.fixture
def quota_env(kwok_env: KwokEnv) -> Iterator[KwokEnv]:
    """The CRD installed, and the autoscaler's ServiceAccount granted what the chart grants
    with `extraArgs.capacity-quotas-enabled`."""
    cluster = kwok_env.cluster
    crd, origin = capacity_quota_crd()
    print(f"CapacityQuota CRD from {origin}")
    cluster.apply(crd)
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{NAME}", "--timeout=30s")
    docs = helm.template({"cloudProvider": "kwok", "extraArgs": {"capacity-quotas-enabled": True}})
    [role] = [d for d in docs if d["kind"] == "ClusterRole"]
    rules = [r for r in role["rules"] if "autoscaling.x-k8s.io" in r["apiGroups"]]
    assert rules
    cluster.apply(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": ROLE}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": ROLE},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": "cluster-autoscaler",
                       "namespace": NAMESPACE}]},
    )
    try:
        yield kwok_env
    finally:
        cluster.kubectl("delete", "capacityquotas", "--all", "--wait=false", check=False)
        cluster.kubectl("delete", "clusterrolebinding,clusterrole", ROLE, "--ignore-not-found",
                        check=False)


def quota_status(env: KwokEnv) -> dict[str, Any]:
    obj = env.cluster.get("capacityquotas.autoscaling.x-k8s.io", "small-pool")
    status: dict[str, Any] = obj.get("status") or {}
    return status


def test_pending_pods_get_exactly_the_quotas_nodes(quota_env: KwokEnv) -> None:
    env, cluster = quota_env, quota_env.cluster
    env.configure(template_node("small", cpu="4", max_count=10))
    cluster.apply({
        "apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityQuota",
        "metadata": {"name": "small-pool"},
        "spec": {"selector": {"matchLabels": {GROUP_LABEL: "small"}},
                 "limits": {"resources": {"nodes": 2}}},
    })
    ns = cluster.namespace()
    # Six pods of 3 CPUs: one to a 4-CPU node, six nodes wanted, two allowed.
    cluster.apply(deployment(ns, "web", 6, cpu="3"))
    with env.run("--capacity-quotas-enabled") as run:
        run.wait_for("two pods running", lambda: len(env.running(ns, "web")) == 2, 40)
        run.wait_for("the quota's status written",
                     lambda: quota_status(env).get("used", {}).get("resources", {}).get("nodes")
                     == "2", 20)
        run.wait_for("a pod told why it triggered no scale-up",
                     lambda: any(HELD in e.get("message", "")
                                 for e in env.events(ns, "NotTriggerScaleUp")), 20)
        # Several loops later, still the quota's two nodes and no more.
        assert len(env.nodes()) == 2
        assert len(env.pending(ns)) == 4
        conditions = {c["type"]: c for c in quota_status(env)["conditions"]}
        assert (conditions["Valid"]["status"], conditions["Valid"]["reason"]) == (
            "True", "ValidationSucceeded")
        assert conditions["Reconciled"]["status"] == "True"
    assert run.returncode == 0, run.tail()
