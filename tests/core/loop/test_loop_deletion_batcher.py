"""--node-deletion-batcher-interval: the nodes of one node group ready for deletion within
the interval go to the cloud provider in one `delete_nodes` call; with 0, each node goes on
its own as soon as it is ready. Deletions run on the real `ThreadedExecutor` over a gated
virtual clock, so the interval and the drains last exactly as long as the test says."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from clusterscaler.framework.clusteractions import EvictionError
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.loop.decisions import DeletionKind, LoopResult, ScaleDownStatus
from clusterscaler.loop.scaledown.executor import ThreadedExecutor
from clusterscaler.loop.taints import TO_BE_DELETED_TAINT
from clusterscaler.model import Pod
from loopkit import GatedClock, Harness, running_pod

ELEVEN_MINUTES = timedelta(minutes=11)


class GuardedCluster(InMemoryCluster):
    """Refuses the evictions of the pods in `refused` (a PDB with no disruption left)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refused: set[str] = set()

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        if pod.key in self.refused:
            raise EvictionError(pod.key, "would violate the disruption budget", retryable=True)
        super().evict(pod, grace_period_seconds)


class Batched:
    """Four nodes of group g: g-1 busy, g-2..g-4 each with a small pod that fits on g-1."""

    def __init__(self, **options: Any) -> None:
        self.clock = GatedClock()
        self.executor = ThreadedExecutor()
        options.setdefault("max_drain_parallelism", 3)
        self.h = Harness(GuardedCluster, clock=self.clock, executor=self.executor, **options)
        self.cluster: GuardedCluster = self.h.cluster  # type: ignore[assignment]
        self.group = self.h.provider.add_group("g", 0, 10, nodes=4)
        self.h.add_pods([running_pod("big", "g-1", cpu="1", memory="1Gi")])
        for i in (2, 3, 4):
            self.h.add_pods([running_pod(f"small-{i}", f"g-{i}", cpu="200m")])

    def run(self, advance: timedelta = timedelta(0)) -> LoopResult:
        if advance:
            self.clock.advance(advance)
        self.settle()
        result: LoopResult = self.h.autoscaler.run_once(self.clock.now())
        self.settle()
        return result

    def advance(self, delta: timedelta) -> None:
        self.clock.advance(delta)
        self.settle()

    def settle(self) -> None:
        self.clock.settle(self.executor.running)

    def deletes(self) -> list[list[str]]:
        return [sorted(nodes) for call, nodes in self.group.calls if call == "delete_nodes"]

    def close(self) -> None:
        self.cluster.refused.clear()
        for _ in range(200):
            if self.executor.running() == 0:
                break
            self.clock.advance(timedelta(seconds=30))
        assert self.executor.wait(5)


def started(result: LoopResult) -> list[str]:
    return sorted(d.node for d in result.scale_down.started)


def test_nodes_ready_within_the_interval_are_deleted_with_one_call() -> None:
    b = Batched(node_deletion_batcher_interval=timedelta(seconds=30))
    try:
        b.run()
        # g-3's eviction is refused at first: it is drained 10 s after g-2 and g-4.
        b.cluster.refused.add("default/small-3")
        result = b.run(ELEVEN_MINUTES)
        assert result.scale_down.status is ScaleDownStatus.NODE_DELETE_STARTED
        assert started(result) == ["g-2", "g-3", "g-4"]
        b.cluster.refused.clear()
        b.advance(timedelta(seconds=10))
        # Drained, all three wait for the batch: nothing is deleted yet.
        assert b.deletes() == []
        assert {"g-2", "g-3", "g-4"} <= set(b.cluster.nodes)
        b.advance(timedelta(seconds=20))
        assert b.deletes() == [["g-2", "g-3", "g-4"]]
        assert set(b.cluster.nodes) == {"g-1"}
        finished = b.run().scale_down.deletions
        assert sorted((d.node, d.ok) for d in finished) == [
            ("g-2", True),
            ("g-3", True),
            ("g-4", True),
        ]
        assert {d.kind for d in finished} == {DeletionKind.DRAIN}
        assert b.group.target == 1
    finally:
        b.close()


def test_a_node_ready_after_the_interval_goes_in_the_next_batch() -> None:
    b = Batched(node_deletion_batcher_interval=timedelta(seconds=30))
    try:
        b.run()
        b.cluster.refused.add("default/small-3")
        b.run(ELEVEN_MINUTES)
        b.advance(timedelta(seconds=30))
        assert b.deletes() == [["g-2", "g-4"]]
        b.cluster.refused.clear()
        b.advance(timedelta(seconds=10))
        assert b.deletes() == [["g-2", "g-4"]]
        b.advance(timedelta(seconds=30))
        assert b.deletes() == [["g-2", "g-4"], ["g-3"]]
        assert set(b.cluster.nodes) == {"g-1"}
    finally:
        b.close()


def test_without_an_interval_each_node_is_deleted_on_its_own() -> None:
    b = Batched()
    try:
        b.run()
        b.run(ELEVEN_MINUTES)
        assert sorted(b.deletes()) == [["g-2"], ["g-3"], ["g-4"]]
        assert set(b.cluster.nodes) == {"g-1"}
    finally:
        b.close()


def test_a_failed_batch_fails_and_rolls_back_only_its_nodes() -> None:
    b = Batched(node_deletion_batcher_interval=timedelta(seconds=30))
    try:
        b.run()
        b.cluster.refused.add("default/small-3")
        b.run(ELEVEN_MINUTES)
        b.group.fail_delete = "instance protected"
        b.advance(timedelta(seconds=30))
        assert b.deletes() == [["g-2", "g-4"]]
        b.group.fail_delete = ""
        b.cluster.refused.clear()
        b.advance(timedelta(seconds=10))
        b.advance(timedelta(seconds=30))
        assert b.deletes() == [["g-2", "g-4"], ["g-3"]]
        result = b.run()
        outcome = {d.node: d for d in result.scale_down.deletions}
        assert outcome["g-3"].ok
        for name in ("g-2", "g-4"):
            assert not outcome[name].ok
            assert "instance protected" in outcome[name].error
            # Rolled back: the node stays, without our taint.
            assert name in b.cluster.nodes
            assert TO_BE_DELETED_TAINT not in {t.key for t in b.cluster.nodes[name].taints}
        assert "g-3" not in b.cluster.nodes
        assert b.group.target == 3
    finally:
        b.close()


def test_empty_nodes_are_batched_too() -> None:
    clock = GatedClock()
    executor = ThreadedExecutor()
    h = Harness(
        clock=clock, executor=executor, node_deletion_batcher_interval=timedelta(seconds=30)
    )
    group = h.provider.add_group("g", 0, 10, nodes=3)
    h.add_pods([running_pod("big", "g-1", cpu="1")])
    h.run()
    clock.advance(ELEVEN_MINUTES)
    result = h.autoscaler.run_once(clock.now())
    clock.settle(executor.running)
    assert started(result) == ["g-2", "g-3"]
    assert {d.kind for d in result.scale_down.started} == {DeletionKind.EMPTY}
    # --node-delete-delay-after-taint (5 s), then the interval.
    clock.advance(timedelta(seconds=5))
    clock.settle(executor.running)
    assert [n for call, n in group.calls if call == "delete_nodes"] == []
    clock.advance(timedelta(seconds=30))
    clock.settle(executor.running)
    assert [sorted(n) for call, n in group.calls if call == "delete_nodes"] == [["g-2", "g-3"]]
    assert executor.wait(5)
    assert set(h.cluster.nodes) == {"g-1"}


def test_the_simulator_deletes_each_node_with_the_same_outcome() -> None:
    """The inline executor runs each deletion at once: no gathering, the same result as
    without the flag, and no wait that would move the simulated clock inside a loop."""
    moved = []
    for interval in (timedelta(0), timedelta(seconds=30)):
        h = Harness(node_deletion_batcher_interval=interval)
        group = h.provider.add_group("g", 0, 10, nodes=3)
        h.add_pods([running_pod("big", "g-1", cpu="1")])
        h.run()
        started = h.clock.now() + ELEVEN_MINUTES
        result = h.run(ELEVEN_MINUTES)
        moved.append(h.clock.now() - started)
        assert sorted((d.node, d.ok) for d in result.scale_down.deletions) == [
            ("g-2", True),
            ("g-3", True),
        ]
        assert sorted(n for call, n in group.calls if call == "delete_nodes") == [["g-2"], ["g-3"]]
        assert set(h.cluster.nodes) == {"g-1"}
        assert group.target == 1
    assert moved[1] == moved[0]
