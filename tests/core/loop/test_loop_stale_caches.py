"""Nothing is deleted on a guess: stale caches, unconfirmed unregistered instances and
taints left by an earlier run.

The loop reads the cluster through caches that can fall behind (an API server that stops
streaming, a proxy that cuts watches). While the source says a cache is stale, scale-down
and the clean-up of unregistered or failed instances wait, the result and the status say
why, and everything resumes by itself once the caches are current. An instance is deleted
as unregistered only after a fresh read confirms that no Node carries it, since a cache that
does not know it is behind can still miss a Node.
"""

from __future__ import annotations

from datetime import timedelta

from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.loop.decisions import DeletionKind, ScaleDownStatus
from clusterscaler.loop.taints import TO_BE_DELETED_TAINT
from clusterscaler.model import ClusterObjects, Taint
from clusterscaler.report.status import status_from_result
from loopkit import Harness, pending_pod, running_pod

PAST_UNNEEDED = timedelta(minutes=11)


class LaggingSource:
    """The cluster as a cache that may be behind: `hidden` nodes are missing from it, and
    `stale` is what it says about itself."""

    def __init__(self, cluster: InMemoryCluster) -> None:
        self.cluster = cluster
        self.hidden: set[str] = set()
        self.stale: tuple[str, ...] = ()

    def snapshot(self) -> ClusterObjects:
        objects = self.cluster.snapshot()
        objects.nodes = [n for n in objects.nodes if n.name not in self.hidden]
        return objects

    def stale_caches(self) -> tuple[str, ...]:
        return self.stale


class FlakyActions:
    """The cluster's actions, with `remove_taint` failing for the nodes in `fail_untaint`
    (each failure used once)."""

    def __init__(self, cluster: InMemoryCluster) -> None:
        self.cluster = cluster
        self.fail_untaint: list[str] = []
        self.untaint_calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.cluster, name)

    def remove_taint(self, node_name: str, key: str) -> bool:
        self.untaint_calls.append(node_name)
        if node_name in self.fail_untaint:
            self.fail_untaint.remove(node_name)
            raise ConnectionResetError("connection reset by peer")
        return self.cluster.remove_taint(node_name, key)


def _empty_second_node() -> tuple[Harness, LaggingSource]:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("busy", "g-1", cpu="3")])
    source = LaggingSource(h.cluster)
    h.source = source
    return h, source


def test_stale_cache_holds_scale_down_and_it_resumes_when_current() -> None:
    h, source = _empty_second_node()
    h.run()
    source.stale = ("pods: last list or watch event 45s ago (HTTP 500 Internal Server Error)",)
    stale = h.run(PAST_UNNEEDED)
    assert stale.stale_caches == source.stale
    assert stale.scale_down.status is ScaleDownStatus.NOT_TRIED
    assert "stale caches: pods" in stale.scale_down.cooldown_reason
    assert "g-2" in h.cluster.nodes
    message = status_from_result(stale).message
    assert "stale caches, scale-down and instance clean-up paused: pods:" in message

    source.stale = ()
    # Time spent blind does not count as unneeded time: the timer starts again.
    assert h.run(timedelta(seconds=10)).scale_down.deletions == ()
    result = h.run(PAST_UNNEEDED)
    (deletion,) = result.scale_down.deletions
    assert (deletion.node, deletion.ok) == ("g-2", True)
    assert "g-2" not in h.cluster.nodes


def test_scale_up_still_runs_while_a_cache_is_stale() -> None:
    h, source = _empty_second_node()
    h.add_pods([running_pod("busy2", "g-2", cpu="3")])
    h.add_pods([pending_pod("p", cpu="3")])
    source.stale = ("nodes: last list or watch event 40s ago",)
    result = h.run()
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 1)]


def test_unregistered_instance_whose_node_the_cache_missed_is_not_deleted() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10)
    source = LaggingSource(h.cluster)
    h.source = source
    h.add_pods([pending_pod("p", cpu="3")])
    h.run()
    (node,) = g.register()
    # The Node exists in the API; the cache never saw it and does not know it is behind.
    source.hidden.add(node.name)
    result = h.run(timedelta(minutes=16))
    assert result.cleanups == ()
    assert g.target == 1 and node.provider_id in g.instances
    assert node.name in h.cluster.nodes


def test_unregistered_instance_is_not_deleted_while_a_cache_is_stale() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10)
    source = LaggingSource(h.cluster)
    h.source = source
    h.add_pods([pending_pod("p", cpu="3")])
    h.run()
    source.stale = ("nodes: last list or watch event 50s ago",)
    held = h.run(timedelta(minutes=16))
    assert held.cleanups == () and g.target == 1
    source.stale = ()
    resumed = h.run(timedelta(seconds=10))
    assert [(c.kind, c.ok) for c in resumed.cleanups] == [(DeletionKind.UNREGISTERED, True)]
    assert g.target == 0


def test_taints_left_by_an_earlier_run_are_retried_until_every_node_is_clean() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=3)
    h.add_pods([running_pod(f"busy{i}", f"g-{i}", cpu="3") for i in (1, 2, 3)])
    for name in ("g-1", "g-2"):
        h.cluster.add_node(
            h.cluster.nodes[name].with_(
                taints=(Taint(TO_BE_DELETED_TAINT, "123"),), unschedulable=True
            )
        )
    actions = FlakyActions(h.cluster)
    actions.fail_untaint = ["g-1", "g-1"]
    h.actions = actions
    h.run()
    # g-1 failed; g-2, whose cleaning did not depend on it, is clean.
    assert h.cluster.nodes["g-1"].taints != ()
    assert h.cluster.nodes["g-2"].taints == () and not h.cluster.nodes["g-2"].unschedulable
    h.run(timedelta(seconds=10))
    assert h.cluster.nodes["g-1"].taints != ()
    h.run(timedelta(seconds=10))
    node = h.cluster.nodes["g-1"]
    assert node.taints == () and not node.unschedulable
    # Done: later loops leave the nodes alone.
    calls = len(actions.untaint_calls)
    h.run(timedelta(seconds=10))
    assert len(actions.untaint_calls) == calls
    # Only the nodes that carried a taint were asked about.
    assert set(actions.untaint_calls) == {"g-1", "g-2"}


def test_taint_left_by_a_failed_rollback_is_retried_next_loop_and_counted() -> None:
    h, _ = _empty_second_node()
    actions = FlakyActions(h.cluster)
    h.actions = actions
    h.run()
    h.provider.groups["g"].fail_delete = "instance is protected"
    actions.fail_untaint = ["g-2"]  # the rollback's untaint
    failed = h.run(PAST_UNNEEDED)
    (deletion,) = failed.scale_down.deletions
    assert not deletion.ok
    assert any(t.key == TO_BE_DELETED_TAINT for t in h.cluster.nodes["g-2"].taints)
    h.provider.groups["g"].fail_delete = ""
    h.run(timedelta(seconds=10))
    assert not any(t.key == TO_BE_DELETED_TAINT for t in h.cluster.nodes["g-2"].taints)


def test_a_stale_taint_that_cannot_be_removed_is_an_error_of_the_loop() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=1)
    h.add_pods([running_pod("busy", "g-1", cpu="3")])
    h.cluster.add_node(h.cluster.nodes["g-1"].with_(taints=(Taint(TO_BE_DELETED_TAINT, "1"),)))
    actions = FlakyActions(h.cluster)
    actions.fail_untaint = ["g-1"]
    h.actions = actions
    result = h.run()
    (error,) = result.errors
    assert "node g-1: removing a stale taint failed: ConnectionResetError" in error
    assert error.type.value == "apiCallError"  # counted in errors_total{type}


class RecoversAtTaint(InMemoryCluster):
    """The node turns Ready again just as its deletion taint lands (the cache that saw it
    unready is behind)."""

    def add_taint(self, node_name: str, taint: Taint) -> None:
        if taint.key == TO_BE_DELETED_TAINT:
            self.add_node(self.nodes[node_name].with_(ready=True))
        super().add_taint(node_name, taint)


def test_unready_node_that_recovered_is_not_deleted_as_unready() -> None:
    h = Harness(RecoversAtTaint)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.cluster.add_node(h.cluster.nodes["g-2"].with_(ready=False))
    h.run()
    h.run(timedelta(minutes=11))
    result = h.run(timedelta(minutes=10))
    (deletion,) = result.scale_down.deletions
    assert (deletion.node, deletion.kind, deletion.ok) == ("g-2", DeletionKind.UNREADY, False)
    assert "ready again" in deletion.error
    assert "g-2" in h.cluster.nodes
    assert not any(t.key == TO_BE_DELETED_TAINT for t in h.cluster.nodes["g-2"].taints)
