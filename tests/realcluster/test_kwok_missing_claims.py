"""A pod whose claim does not exist, on the real control plane: kube-scheduler keeps it
pending, and the autoscaler adds no node for it (a node would stay empty and be removed,
and the cycle start again), telling the pod why in kube-scheduler's words."""

from __future__ import annotations

import pytest
from clusterscaler.testing.kwokenv import KwokEnv, deployment, template_node

pytestmark = pytest.mark.realcluster

NOT_FOUND = 'persistentvolumeclaim "missing" not found'


def test_a_pod_whose_claim_does_not_exist_gets_no_node(kwok_env: KwokEnv) -> None:
    env, cluster = kwok_env, kwok_env.cluster
    env.configure(template_node("small", cpu="4", max_count=10))
    ns = cluster.namespace()
    # Each pod takes a node of its own: `web` proves the autoscaler adds nodes, `stateful`
    # would get one too if its claim were not checked.
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "missing"}}]
    cluster.apply(
        deployment(ns, "web", 1, cpu="3"),
        deployment(ns, "stateful", 1, cpu="3", extra_spec={"volumes": volumes}),
    )
    with env.run() as run:
        run.wait_for("web running", lambda: len(env.running(ns, "web")) == 1, 60)
        run.wait_for("the stateful pod told why it triggered no scale-up",
                     lambda: any(NOT_FOUND in e.get("message", "")
                                 for e in env.events(ns, "NotTriggerScaleUp")), 30)
        # kube-scheduler says the same once it retries the pod on the new node (its first
        # attempt, before any node existed, said only "no nodes available"), and several
        # loops later there is still one node.
        def scheduler_message() -> str:
            (pod,) = env.pending(ns)
            assert pod["metadata"]["labels"]["app"] == "stateful"
            scheduled = [c for c in pod["status"].get("conditions") or []
                         if c.get("type") == "PodScheduled"]
            return str(scheduled[0].get("message", "")) if scheduled else ""

        run.wait_for("kube-scheduler names the missing claim",
                     lambda: NOT_FOUND in scheduler_message(), 60)
        assert len(env.nodes()) == 1
    assert run.returncode == 0, run.tail()
