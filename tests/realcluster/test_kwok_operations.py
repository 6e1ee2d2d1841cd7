"""Operating the autoscaler on the real control plane: leader election on real Leases, the
apiserver restarted and etcd compacted under it, and the offline commands agreeing with `run`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter

import pytest
from clusterscaler.testing.cliprocess import clusterscaler_command
from clusterscaler.testing.kwokenv import NAMESPACE, KwokEnv, deployment, template_node

pytestmark = pytest.mark.realcluster

# Shorter than CA's 15s/10s/2s, so that the tests do not wait long, yet with room for a
# loaded machine: a renewal late by a few seconds must not lose the Lease.
LEADER_FLAGS = (
    "--leader-elect-lease-duration=10s",
    "--leader-elect-renew-deadline=8s",
    "--leader-elect-retry-period=1s",
)


def _holder(env: KwokEnv) -> str:
    leases = env.cluster.items("leases", "-n", NAMESPACE,
                               "--field-selector=metadata.name=cluster-autoscaler")
    return str(leases[0]["spec"].get("holderIdentity") or "") if leases else ""


def _groups(env: KwokEnv) -> Counter[str]:
    return Counter(
        n["metadata"]["annotations"].get("cluster-autoscaler.kwok.nodegroup/name", "")
        for n in env.nodes()
    )


def test_only_the_leader_acts_and_the_other_takes_over(kwok_env: KwokEnv) -> None:
    env, cluster = kwok_env, kwok_env.cluster
    env.configure(template_node("small", cpu="4"))
    ns = cluster.namespace()
    with env.run(*LEADER_FLAGS, name="first") as first:
        first.wait_for("the first replica to lead", lambda: "leader_elected" in first.output(), 30)
        holder = _holder(env)
        assert holder, "no Lease holder"
        with env.run(*LEADER_FLAGS, name="second") as second:
            second.wait_for("the second replica to wait for the Lease",
                            lambda: "leader_election_waiting" in second.output(), 30)
            cluster.apply(deployment(ns, "web", 2, cpu="1500m"))
            first.wait_for("the leader's scale-up", lambda: len(env.running(ns, "web")) == 2, 60)
            assert _holder(env) == holder
            assert "loop_done" not in second.output(), "the follower ran a loop"
            assert "leader_elected" not in second.output()

            # The leader dies without releasing the Lease (no SIGTERM handler runs).
            first.process.kill()
            first.process.wait()
            second.wait_for("the second replica to take over",
                            lambda: "leader_elected" in second.output(), 30)
            assert _holder(env) != holder
            cluster.apply(deployment(ns, "more", 2, cpu="1500m"))
            second.wait_for("the new leader's scale-up",
                            lambda: len(env.running(ns, "more")) == 2, 60)
        assert second.returncode == 0, second.tail()


def test_apiserver_restart_and_etcd_compaction_delete_nothing(kwok_env: KwokEnv) -> None:
    """The apiserver goes away mid-loop and comes back; etcd's history is compacted, so every
    watch must relist. No node is deleted on the way, and the next scale-up still happens."""
    env, cluster = kwok_env, kwok_env.cluster
    env.configure(template_node("small", cpu="4"))
    ns = cluster.namespace()
    cluster.apply(deployment(ns, "web", 4, cpu="1500m"))
    # A Lease that outlives the outage: the same process must carry on.
    with env.run("--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=45s") as run:
        run.wait_for("four pods running", lambda: len(env.running(ns, "web")) == 4, 60)
        before = env.node_names()
        assert len(before) == 2
        cluster.restart_apiserver()
        cluster.compact_etcd()
        cluster.restart_apiserver()
        assert env.node_names() == before, "a node was deleted across the restart"
        # The caches relisted: their watches' resourceVersions were compacted away (410).
        run.wait_for("the caches to relist", lambda: "informer_relist" in run.output(), 30)
        cluster.apply(deployment(ns, "more", 2, cpu="1500m"))
        run.wait_for("the scale-up after the restart",
                     lambda: len(env.running(ns, "more")) == 2, 60)
        after = env.node_names()
        assert before < after and len(after) == 3
    assert run.returncode == 0, run.tail()


def test_a_replica_that_loses_its_lease_exits_without_deleting_nodes(kwok_env: KwokEnv) -> None:
    """The apiserver is away longer than the renew deadline: the leader loses its Lease and
    exits, as CA does, and leaves the kwok nodes to the next leader (its exit cleanup, which
    deletes them, is the leader's alone)."""
    env, cluster = kwok_env, kwok_env.cluster
    env.configure(template_node("small", cpu="4"))
    ns = cluster.namespace()
    cluster.apply(deployment(ns, "web", 2, cpu="1500m"))
    # A renew deadline shorter than the apiserver's restart (several seconds).
    short = ("--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s",
             "--leader-elect-retry-period=1s")
    with env.run(*short) as run:
        run.wait_for("two pods running", lambda: len(env.running(ns, "web")) == 2, 60)
        before = env.node_names()
        cluster.restart_apiserver()
        cluster.wait_for(lambda: run.process.poll() is not None, "the replica to exit", 30)
    assert run.returncode != 0
    assert re.search(r"leader(ship|_election)_lost", run.output())
    assert "provider_cleanup_skipped" in run.output()
    assert env.node_names() == before, "the replica that lost its Lease deleted nodes"


def _offline(env: KwokEnv, command: str, *args: str) -> dict[str, object]:
    proc = subprocess.run(
        [*clusterscaler_command(), command, "--from-cluster", "--json", "--cloud-provider=kwok",
         f"--kubeconfig={env.kubeconfig}", f"--namespace={NAMESPACE}", *args],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "POD_NAMESPACE": NAMESPACE},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout))


def test_simulate_and_explain_from_cluster_agree_with_run(kwok_env: KwokEnv) -> None:
    env, cluster = kwok_env, kwok_env.cluster
    env.configure(
        template_node("small", cpu="4", labels={"tier": "small"}),
        template_node("big", cpu="16", memory="64Gi", labels={"tier": "big"}),
    )
    ns = cluster.namespace()
    cluster.apply(
        deployment(ns, "web", 4, cpu="1500m", extra_spec={"nodeSelector": {"tier": "small"}}),
        deployment(ns, "batch", 2, cpu="6"),
        deployment(ns, "huge", 1, cpu="32"),
    )
    cluster.wait_for(lambda: len(env.unschedulable(ns)) == 7, "seven unschedulable pods")

    simulated = _offline(env, "simulate", "--once")
    explained = _offline(env, "explain")
    # The first loop's decision: one node group per loop, as CA.
    first = {d["nodeGroup"]: d["to"] for d in simulated["scaleUp"]}  # type: ignore[attr-defined]
    assert first == {d["nodeGroup"]: d["to"] for d in explained["scaleUp"]}  # type: ignore[attr-defined]
    assert first == {"small": 2}, simulated
    helps = {
        e["pod"].split("/")[1].rsplit("-", 2)[0]: {g for g, v in e["nodeGroups"].items() if v["helps"]}
        for e in explained["pendingPods"]  # type: ignore[attr-defined]
    }
    assert helps == {"web": {"small"}, "batch": {"big"}, "huge": set()}, explained["pendingPods"]

    with env.run() as run:
        run.wait_for("web and batch running", lambda: len(env.running(ns)) == 6, 60)
        run.wait_for("the NotTriggerScaleUp event of huge",
                     lambda: any(e["involvedObject"]["name"].startswith("huge-")
                                 for e in env.events(ns, "NotTriggerScaleUp")), 30)
        assert dict(_groups(env)) == {"small": 2, "big": 1}
        # Each pod's scale-up went to the group explain named, the first one as simulated.
        triggered = env.events(ns, "TriggeredScaleUp")
        for event in triggered:
            app = event["involvedObject"]["name"].rsplit("-", 2)[0]
            assert [f"{g} " in event["message"] for g in helps[app]] == [True], event["message"]
        assert any("small 0->2" in e["message"] for e in triggered), [e["message"] for e in triggered]
        pending = [p["metadata"]["name"] for p in env.pending(ns)]
        assert len(pending) == 1 and pending[0].startswith("huge-"), pending
    assert run.returncode == 0, run.tail()
