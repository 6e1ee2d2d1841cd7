"""ProvisioningRequests on the real control plane, with upstream's CRD and the chart's RBAC:
Kueue's flow (create the request, wait for Provisioned, create the consuming pods, they run
on the room it got) and a check-capacity request answered from the room left."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from clusterscaler.testing import helm
from clusterscaler.testing.kwokenv import KWOK_TOLERATION, NAMESPACE, KwokEnv, template_node
from clusterscaler.testing.provreqcrd import NAME, provisioning_request_crd

pytestmark = pytest.mark.realcluster

ROLE = "clusterscaler-provisioning-requests"


@pytest.fixture
def provreq_env(kwok_env: KwokEnv) -> Iterator[KwokEnv]:
    """The CRD installed, and the autoscaler's ServiceAccount granted what the chart grants
    with `extraArgs.enable-provisioning-requests` (and nothing of it otherwise)."""
    cluster = kwok_env.cluster
    crd, origin = provisioning_request_crd()
    print(f"ProvisioningRequest CRD from {origin}")
    cluster.apply(crd)
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{NAME}", "--timeout=30s")
    docs = helm.template({"cloudProvider": "kwok",
                          "extraArgs": {"enable-provisioning-requests": True}})
    [role] = [d for d in docs if d["kind"] == "ClusterRole"]
    rules = [r for r in role["rules"]
             if "autoscaling.x-k8s.io" in r["apiGroups"] or "podtemplates" in r["resources"]]
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
        cluster.kubectl("delete", "provisioningrequests", "--all", "-A", "--wait=false",
                        check=False)
        cluster.kubectl("delete", "clusterrolebinding,clusterrole", ROLE, "--ignore-not-found",
                        check=False)


def pod_spec(cpu: str) -> dict[str, Any]:
    return {
        "tolerations": [KWOK_TOLERATION],
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "worker", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }


def pod_template(ns: str, name: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": name, "namespace": ns},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(cpu)}}


def request(ns: str, name: str, class_name: str, template: str, count: int,
            **parameters: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"provisioningClassName": class_name,
                            "podSets": [{"podTemplateRef": {"name": template}, "count": count}]}
    if parameters:
        spec["parameters"] = parameters
    return {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def conditions(env: KwokEnv, ns: str, name: str) -> dict[str, dict[str, Any]]:
    obj = env.cluster.get("provisioningrequests.autoscaling.x-k8s.io", name, "-n", ns)
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def test_kueues_flow_gets_room_for_the_whole_gang_then_its_pods_run_there(
    provreq_env: KwokEnv,
) -> None:
    env, cluster = provreq_env, provreq_env.cluster
    env.configure(template_node("small", cpu="4", max_count=6))
    ns = cluster.namespace()
    # Four workers of 1.5 CPUs: two new 4-CPU nodes, asked for at once.
    cluster.apply(pod_template(ns, "worker", "1500m"),
                  request(ns, "gang", "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                          "worker", 4))
    with env.run("--enable-provisioning-requests") as run:
        run.wait_for("the request to be Provisioned",
                     lambda: conditions(env, ns, "gang").get("Provisioned", {}).get("status")
                     == "True", 40)
        got = conditions(env, ns, "gang")
        assert got["Accepted"]["reason"] == "Accepted"
        assert got["Provisioned"]["reason"] == "CapacityIsProvisioned"
        assert got["Provisioned"]["message"] == "Capacity is found in the cluster"
        run.wait_for("two nodes", lambda: len(env.nodes()) == 2, 30)
        # The workload's pods, created only now, on the request's room.
        for i in range(4):
            cluster.apply({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"worker-{i}", "namespace": ns,
                             "labels": {"app": "worker"},
                             "annotations": {
                                 "autoscaling.x-k8s.io/consume-provisioning-request": "gang"}},
                "spec": pod_spec("1500m"),
            })
        run.wait_for("the four workers running", lambda: len(env.running(ns, "worker")) == 4,
                     30)
        # Nothing more was bought for them: they ran on the booked room.
        assert len(env.nodes()) == 2

        # One CPU is left on each node: a check-capacity request for a 1.5-CPU pod finds no
        # room, and with noRetry it fails at once; one for a 1-CPU pod is provisioned.
        cluster.apply(pod_template(ns, "small", "1"), pod_template(ns, "big", "1500m"),
                      request(ns, "no-room", "check-capacity.autoscaling.x-k8s.io", "big", 1,
                              noRetry="true"),
                      request(ns, "room", "check-capacity.autoscaling.x-k8s.io", "small", 2))
        run.wait_for("both check-capacity requests answered",
                     lambda: "Failed" in conditions(env, ns, "no-room")
                     and "Provisioned" in conditions(env, ns, "room"), 30)
        failed = conditions(env, ns, "no-room")["Failed"]
        assert (failed["status"], failed["reason"], failed["message"]) == (
            "True", "CapacityIsNotFound", "CA could not find requested capacity")
        provisioned = conditions(env, ns, "room")["Provisioned"]
        assert (provisioned["status"], provisioned["reason"]) == ("True", "CapacityIsFound")
        assert len(env.nodes()) == 2
