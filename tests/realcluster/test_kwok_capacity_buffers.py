"""CapacityBuffers on the real control plane, with upstream's CRD and the chart's RBAC: a
buffer of spare pods shaped by a PodTemplate gets its status from the controller, and the
autoscaler scales a kwok node group up for its placeholder pods, which are never created."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from clusterscaler.testing import helm
from clusterscaler.testing.capacitybuffercrd import NAME, capacity_buffer_crd
from clusterscaler.testing.kwokenv import KWOK_TOLERATION, NAMESPACE, KwokEnv, template_node

pytestmark = pytest.mark.realcluster

ROLE = "clusterscaler-capacity-buffers"
FLAGS = {"capacity-buffer-controller-enabled": True,
         "capacity-buffer-pod-injection-enabled": True}


@pytest.fixture
def buffer_env(kwok_env: KwokEnv) -> Iterator[KwokEnv]:
    """The CRD installed, and the autoscaler's ServiceAccount granted what the chart grants
    with the capacity-buffer flags beyond its base rules."""
    cluster = kwok_env.cluster
    crd, origin = capacity_buffer_crd()
    print(f"CapacityBuffer CRD from {origin}")
    cluster.apply(crd)
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{NAME}", "--timeout=30s")
    base = helm.template({"cloudProvider": "kwok"})
    docs = helm.template({"cloudProvider": "kwok", "extraArgs": FLAGS})
    [base_role] = [d for d in base if d["kind"] == "ClusterRole"]
    [role] = [d for d in docs if d["kind"] == "ClusterRole"]
    rules = [r for r in role["rules"] if r not in base_role["rules"]]
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
        cluster.kubectl("delete", "capacitybuffers", "--all", "-A", "--wait=false", check=False)
        cluster.kubectl("delete", "clusterrolebinding,clusterrole", ROLE, "--ignore-not-found",
                        check=False)


def buffer_of(env: KwokEnv, ns: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = env.cluster.get("capacitybuffers.autoscaling.x-k8s.io", name, "-n", ns)
    return obj


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def test_a_buffer_scales_a_node_group_up_ahead_of_demand(buffer_env: KwokEnv) -> None:
    env, cluster = buffer_env, buffer_env.cluster
    env.configure(template_node("small", cpu="4", max_count=6))
    ns = cluster.namespace()
    # Five spare pods of 1.5 CPUs: two fit a 4-CPU node, so three nodes.
    cluster.apply(
        {"apiVersion": "v1", "kind": "PodTemplate",
         "metadata": {"name": "spare", "namespace": ns},
         "template": {"metadata": {"labels": {"app": "spare"}}, "spec": {
             "tolerations": [KWOK_TOLERATION],
             "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                             "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}],
         }}},
        {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
         "metadata": {"name": "spare", "namespace": ns},
         "spec": {"podTemplateRef": {"name": "spare"}, "replicas": 5}},
    )
    args = [f"--{flag}" for flag in FLAGS]
    with env.run(*args) as run:
        run.wait_for(
            "the buffer to be provisioning",
            lambda: conditions(buffer_of(env, ns, "spare")).get("Provisioning", {}).get("status")
            == "True",
            40,
        )
        got = buffer_of(env, ns, "spare")
        status = got["status"]
        assert status["replicas"] == 5
        assert status["podTemplateRef"] == {"name": "capacitybuffer-spare-pod-template"}
        assert status["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
        ready = conditions(got)["ReadyForProvisioning"]
        assert (ready["status"], ready["reason"]) == ("True", "AttributesSetSuccessfully")
        assert conditions(got)["Provisioning"]["reason"] == "FakePodsInjected"
        managed = cluster.get("podtemplate", "capacitybuffer-spare-pod-template", "-n", ns)
        assert status["podTemplateGeneration"] == managed["metadata"]["generation"]
        assert managed["metadata"]["ownerReferences"][0]["kind"] == "CapacityBuffer"
        run.wait_for("three nodes for the buffer", lambda: len(env.nodes()) == 3, 40)
        # The placeholder pods exist nowhere but in the autoscaler's simulation.
        assert cluster.items("pods", "-n", ns) == []
