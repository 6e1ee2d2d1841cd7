"""Scale-down deletions run in the background, as in Cluster Autoscaler.

The loop taints the nodes it removes and returns; evictions, the wait for pods to go,
`delete_nodes` and the rollback on failure run on threads. These tests use the real
`ThreadedExecutor` with a gated virtual clock: a drain whose evictions are refused sleeps on
the clock between retries until the test moves it, so a drain lasts exactly as long as the
test says while loops run meanwhile.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.commands.run import finish_deletions
from clusterscaler.framework.clusteractions import EvictionError
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.loop.decisions import (
    DeletionKind,
    LoopResult,
    ScaleDownStatus,
    UnremovableReason,
)
from clusterscaler.loop.scaledown.actuator import deletion_timeout
from clusterscaler.loop.scaledown.executor import ThreadedExecutor
from clusterscaler.loop.taints import TO_BE_DELETED_TAINT
from clusterscaler.model import Pod, Taint
from clusterscaler.report.events import SCALE_DOWN, SCALE_DOWN_FAILED, ObjectRef, events_for_result
from clusterscaler.report.metrics import HealthCheck as LivenessCheck
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopkit import GatedClock, Harness, pending_pod, running_pod

ELEVEN_MINUTES = timedelta(minutes=11)
RETRY = timedelta(seconds=10)
STATUS = ObjectRef.config_map("kube-system", "cluster-autoscaler-status")


class GuardedCluster(InMemoryCluster):
    """Refuses evictions of the pods in `refused`, as the API server does while their
    PodDisruptionBudget has no disruption left."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refused: set[str] = set()

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        if pod.key in self.refused:
            raise EvictionError(
                pod.key,
                "cannot evict pod as it would violate the pod's disruption budget default/web",
                retryable=True,
            )
        super().evict(pod, grace_period_seconds)


class ProbingCluster(GuardedCluster):
    """Runs `probe` at each taint written, recording the taint's key and the answer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.probe: Any = None
        self.probed: list[tuple[str, str, bool]] = []

    def add_taint(self, node_name: str, taint: Taint) -> None:
        if self.probe is not None:
            self.probed.append((node_name, taint.key, self.probe()))
        super().add_taint(node_name, taint)


class Background:
    """A harness whose deletions run on a `ThreadedExecutor` over a `GatedClock`."""

    def __init__(
        self,
        *,
        nodes: int = 3,
        min_size: int = 0,
        cluster: type[GuardedCluster] = GuardedCluster,
        **options: Any,
    ) -> None:
        self.clock = GatedClock()
        self.executor = ThreadedExecutor()
        self.h = Harness(cluster, clock=self.clock, executor=self.executor, **options)
        self.cluster: GuardedCluster = self.h.cluster  # type: ignore[assignment]
        self.group = self.h.provider.add_group("g", min_size, 10, nodes=nodes)
        # g-1 is busy; every other node carries one small pod that fits on g-1.
        self.h.add_pods([running_pod("big", "g-1", cpu="2500m", memory="1Gi")])
        for i in range(2, nodes + 1):
            self.h.add_pods([running_pod(f"small-{i}", f"g-{i}", cpu="200m")])

    def run(self, advance: timedelta = timedelta(0)) -> LoopResult:
        """Move the clock, let the background work run until it sleeps or ends, then loop."""
        if advance:
            self.clock.advance(advance)
        self.settle()
        result: LoopResult = self.h.autoscaler.run_once(self.clock.now())
        self.settle()
        return result

    def settle(self) -> None:
        self.clock.settle(self.executor.running)

    def close(self) -> None:
        """Let every deletion end (failing by its deadline) so no thread outlives the test."""
        self.cluster.refused.clear()
        for _ in range(200):
            if self.executor.running() == 0:
                break
            self.clock.advance(RETRY)
            self.settle()
        assert self.executor.wait(5)


@pytest.fixture
def bg_factory() -> Any:
    made: list[Background] = []

    def make(**kw: Any) -> Background:
        b = Background(**kw)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def being_deleted(result: LoopResult) -> int:
    return sum(s.counts.being_deleted for s in result.node_groups)


def test_slow_drain_does_not_hold_up_the_next_loop(bg_factory: Any) -> None:
    b = bg_factory(nodes=2)
    b.cluster.refused.add("default/small-2")
    b.run()
    started = b.run(ELEVEN_MINUTES)
    assert started.scale_down.status is ScaleDownStatus.NODE_DELETE_STARTED
    assert [(d.node, d.kind) for d in started.scale_down.started] == [("g-2", DeletionKind.DRAIN)]
    assert started.scale_down.in_flight == ("g-2",)
    # Nothing finished yet, so nothing is reported as deleted (no ScaleDown event yet).
    assert started.scale_down.deletions == ()
    # The taint is on before the loop returns: the scheduler stops using the node at once.
    assert any(t.key == TO_BE_DELETED_TAINT for t in b.cluster.nodes["g-2"].taints)

    # The drain keeps retrying; meanwhile a pod arrives and the next loop scales up.
    b.h.add_pods([pending_pod("new", cpu="3")])
    during = b.run(RETRY)
    assert [(d.node_group, d.delta) for d in during.scale_up.decisions] == [("g", 1)]
    assert during.scale_down.in_flight == ("g-2",)
    assert during.scale_down.deletions == ()
    assert being_deleted(during) == 1
    assert "g-2" in b.cluster.nodes

    # The PDB allows the eviction again: the drain ends and the next loop reports it.
    b.cluster.refused.clear()
    done = b.run(RETRY)
    (deletion,) = done.scale_down.deletions
    assert (deletion.node, deletion.kind, deletion.ok) == ("g-2", DeletionKind.DRAIN, True)
    assert deletion.evicted_pods == ("default/small-2",)
    assert done.scale_down.in_flight == ()
    assert "g-2" not in b.cluster.nodes
    assert ("delete_nodes", ["g-2"]) in b.group.calls
    # As in CA, the node's "marked" event came when the deletion started; the finish brings
    # the evicted pod's, then the node's "removed" ones.
    assert [e.message for e in events_for_result(started, STATUS) if e.involved.name == "g-2"] == [
        "marked the node as toBeDeleted/unschedulable"
    ]
    finished_events = events_for_result(done, STATUS)
    assert [e.message for e in finished_events if e.involved.name == "g-2"] == [
        "nodes removed by cluster autoscaler"
    ]
    assert [e.message for e in finished_events if e.involved == STATUS] == [
        "Scale-down: node g-2 removed with drain"
    ]
    assert [e.reason for e in finished_events if e.involved.name == "small-2"] == [SCALE_DOWN]
    # Reported once: the loop after that has nothing more to say about g-2.
    assert b.run(RETRY).scale_down.deletions == ()


@pytest.mark.parametrize(
    "budget",
    [{"max_drain_parallelism": 1}, {"max_scale_down_parallelism": 1}],
    ids=["max-drain-parallelism", "max-scale-down-parallelism"],
)
def test_budgets_count_deletions_in_flight_across_loops(
    bg_factory: Any, budget: dict[str, int]
) -> None:
    b = bg_factory(nodes=3, **budget)
    b.cluster.refused.update({"default/small-2", "default/small-3"})
    b.run()
    first = b.run(ELEVEN_MINUTES)
    assert [d.node for d in first.scale_down.started] == ["g-2"]
    # Later loops see the budget spent by the drain still in flight.
    for _ in range(3):
        later = b.run(RETRY)
        assert later.scale_down.started == ()
        assert later.scale_down.in_flight == ("g-2",)
        assert later.scale_down.status is ScaleDownStatus.NO_NODE_DELETED
    assert b.cluster.evicted == []
    # Once the drain ends, the budget is free again for g-3.
    b.cluster.refused.discard("default/small-2")
    freed = b.run(RETRY)
    assert [d.node for d in freed.scale_down.deletions if d.ok] == ["g-2"]
    assert [d.node for d in freed.scale_down.started] == ["g-3"]


def test_taint_writes_leave_the_cloud_to_deletions_in_flight(bg_factory: Any) -> None:
    """The loop has the cloud provider to itself while it reads and plans, and deletions in
    flight call `delete_nodes` only under that lock. Its node writes (soft taints, the
    taints that start deletions) call no cloud but wait their turn under
    --kube-client-qps, a second or more each on a busy API server: held through them, the
    lock kept the deletions in flight waiting for the whole loop and their places of
    --max-scale-down-parallelism taken. CA's deletions run beside its loop."""
    b = bg_factory(nodes=3, cluster=ProbingCluster)
    cluster: ProbingCluster = b.cluster  # type: ignore[assignment]
    lock = b.h.autoscaler.actuator.provider_lock

    def a_deletion_could_call_the_cloud() -> bool:
        got: list[bool] = []

        def take() -> None:
            if lock.acquire(timeout=2):
                got.append(True)
                lock.release()

        other = threading.Thread(target=take)
        other.start()
        other.join()
        return got == [True]

    cluster.probe = a_deletion_could_call_the_cloud
    b.run()
    started = b.run(ELEVEN_MINUTES)
    assert [d.node for d in started.scale_down.started] == ["g-2"]
    assert ("g-2", TO_BE_DELETED_TAINT, True) in cluster.probed
    assert all(free for _, _, free in cluster.probed), cluster.probed


def test_node_being_deleted_is_neither_candidate_nor_destination(bg_factory: Any) -> None:
    b = bg_factory(nodes=3, max_drain_parallelism=1)
    b.cluster.refused.add("default/small-2")
    b.run()
    assert [d.node for d in b.run(ELEVEN_MINUTES).scale_down.started] == ["g-2"]
    later = b.run(RETRY)
    blocked = {u.node: u.reason for u in later.scale_down.unremovable}
    assert blocked["g-2"] is UnremovableReason.CURRENTLY_BEING_DELETED
    assert "g-2" not in {u.node for u in later.scale_down.unneeded}
    (other,) = later.scale_down.unneeded
    assert other.node == "g-3"
    # g-3's pod would move to g-1, never to g-2, which has the most room but is going away.
    assert other.destinations == {"default/small-3": "g-1"}


def test_deletion_in_flight_counts_against_the_group_min_size(bg_factory: Any) -> None:
    b = bg_factory(nodes=3, min_size=2, max_drain_parallelism=1)
    b.cluster.refused.add("default/small-2")
    b.run()
    assert [d.node for d in b.run(ELEVEN_MINUTES).scale_down.started] == ["g-2"]
    # The group's target is still 3 while g-2 drains; g-3 would take it to 1.
    later = b.run(RETRY)
    blocked = {u.node: u.reason for u in later.scale_down.unremovable}
    assert blocked["g-3"] is UnremovableReason.NODE_GROUP_MIN_SIZE_REACHED
    assert b.group.target == 3


def test_failed_drain_rolls_back_and_is_reported(bg_factory: Any) -> None:
    b = bg_factory(nodes=2, max_pod_eviction_time=timedelta(seconds=30))
    b.cluster.refused.add("default/small-2")
    b.run()
    assert [d.node for d in b.run(ELEVEN_MINUTES).scale_down.started] == ["g-2"]
    results = [b.run(RETRY) for _ in range(4)]
    failed = [d for r in results for d in r.scale_down.deletions]
    (deletion,) = failed
    assert deletion.node == "g-2" and not deletion.ok
    assert "--max-pod-eviction-time" in deletion.error
    reported = next(r for r in results if r.scale_down.deletions)
    assert reported.scale_down.in_flight == ()
    # Rolled back: the node is schedulable again, and still there.
    node = b.cluster.nodes["g-2"]
    assert not any(t.key == TO_BE_DELETED_TAINT for t in node.taints)
    assert not node.unschedulable
    assert b.group.target == 2 and ("delete_nodes", ["g-2"]) not in b.group.calls
    reasons = [e.reason for e in events_for_result(reported, STATUS) if e.involved.name == "g-2"]
    assert reasons == [SCALE_DOWN_FAILED]
    # As after a failure inside the loop: scale-down waits, and g-2 is not retried at once.
    after = b.run(RETRY)
    assert after.scale_down.status is ScaleDownStatus.IN_COOLDOWN
    assert after.scale_down.cooldown_reason == "--scale-down-delay-after-failure"


def test_waiting_for_deletions_returns_when_they_finish(bg_factory: Any) -> None:
    b = bg_factory(nodes=2)
    b.cluster.refused.add("default/small-2")
    b.run()
    b.run(ELEVEN_MINUTES)
    autoscaler = b.h.autoscaler
    assert set(autoscaler.deletions_in_flight()) == {"g-2"}
    assert not autoscaler.wait_for_deletions(0.05)
    waited = threading.Event()
    outcome: list[bool] = []

    def wait() -> None:
        outcome.append(autoscaler.wait_for_deletions(5))
        waited.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert not waited.wait(0.2)
    b.cluster.refused.clear()
    b.clock.advance(RETRY)
    waiter.join(5)
    assert outcome == [True]
    final = autoscaler.report_finished(b.clock.now())
    assert final is not None
    assert [(d.node, d.ok) for d in final.scale_down.deletions] == [("g-2", True)]
    # Nothing new is decided in that report.
    assert final.scale_up.decisions == () and final.scale_down.started == ()
    assert autoscaler.report_finished(b.clock.now()) is None


class _Recorder:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def record(self, event: Any) -> bool:
        self.events.append(event)
        return True


class _Runtime:
    """The parts of `KubeRuntime` that shutdown uses: leadership, health and the event
    recorder."""

    def __init__(self, health: LivenessCheck | None = None) -> None:
        self.elector = None
        self.status_ref = STATUS
        self.recorder = _Recorder()
        self.health = health or LivenessCheck(timedelta(minutes=10), timedelta(minutes=15))


def test_shutdown_waits_for_deletions_and_reports_them(bg_factory: Any) -> None:
    b = bg_factory(nodes=2)
    b.cluster.refused.add("default/small-2")
    b.run()
    b.run(ELEVEN_MINUTES)
    runtime = _Runtime()
    finished: list[bool] = []
    shutdown = threading.Thread(
        target=lambda: finished.append(
            finish_deletions(b.h.autoscaler, runtime, b.h.options)  # type: ignore[arg-type]
        )
    )
    shutdown.start()
    shutdown.join(0.2)
    assert shutdown.is_alive(), "shutdown must wait for the drain in flight"
    b.cluster.refused.clear()
    b.clock.advance(RETRY)
    shutdown.join(5)
    assert finished == [True]
    assert "g-2" not in b.cluster.nodes
    # The drain's outcome is still recorded: the evicted pod's event.
    assert SCALE_DOWN in {e.reason for e in runtime.recorder.events if e.involved.name == "small-2"}


def test_health_check_stays_healthy_through_a_shutdown_wait_longer_than_max_inactivity(
    bg_factory: Any,
) -> None:
    """Liveness must not kill the process while it waits for a drain at shutdown: the wait
    may last longer than --max-inactivity, and no loop runs meanwhile."""
    b = bg_factory(nodes=2)
    b.cluster.refused.add("default/small-2")
    b.run()
    b.run(ELEVEN_MINUTES)
    monotonic = [0.0]
    health = LivenessCheck(timedelta(minutes=10), timedelta(minutes=15), clock=lambda: monotonic[0])
    health.start_monitoring()
    runtime = _Runtime(health)
    shutdown = threading.Thread(
        target=lambda: finish_deletions(b.h.autoscaler, runtime, b.h.options)  # type: ignore[arg-type]
    )
    shutdown.start()
    shutdown.join(0.2)
    assert shutdown.is_alive()
    monotonic[0] += timedelta(minutes=20).total_seconds()
    assert health.check() == (True, "OK")
    b.cluster.refused.clear()
    b.clock.advance(RETRY)
    shutdown.join(5)
    assert not shutdown.is_alive()


def test_shutdown_wait_is_bounded_by_the_deletion_timeouts() -> None:
    options = AutoscalingOptions()
    bound = deletion_timeout(options)
    # Long enough for a deletion that uses every allowance, and no more than a margin over.
    allowances = (
        options.node_delete_delay_after_taint
        + options.max_pod_eviction_time
        + timedelta(seconds=options.max_graceful_termination_sec)
        + options.node_deletion_delay_timeout
    )
    assert allowances < bound <= allowances + timedelta(minutes=2)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    nodes=st.integers(min_value=2, max_value=6),
    min_size=st.integers(min_value=0, max_value=2),
    parallelism=st.integers(min_value=1, max_value=3),
    drains=st.integers(min_value=1, max_value=2),
    refused=st.sets(st.integers(min_value=2, max_value=6), max_size=4),
    releases=st.lists(st.integers(min_value=2, max_value=6), min_size=1, max_size=8),
)
def test_in_flight_deletions_respect_budgets_and_are_reported_once(
    nodes: int,
    min_size: int,
    parallelism: int,
    drains: int,
    refused: set[int],
    releases: list[int],
) -> None:
    b = Background(
        nodes=nodes,
        min_size=min_size,
        max_scale_down_parallelism=parallelism,
        max_drain_parallelism=drains,
    )
    try:
        b.cluster.refused.update(f"default/small-{i}" for i in refused)
        results = [b.run(), b.run(ELEVEN_MINUTES)]
        for i in releases:
            # One PDB frees up per loop, in the order drawn.
            b.cluster.refused.discard(f"default/small-{i}")
            results.append(b.run(RETRY))
        b.cluster.refused.clear()
        # Loop on until nothing is started or in flight: every outcome is then reported.
        for _ in range(nodes + 2):
            last = b.run(RETRY)
            results.append(last)
            if not last.scale_down.started and not last.scale_down.in_flight:
                break
    finally:
        b.close()
    previous: tuple[str, ...] = ()
    for r in results:
        in_flight = r.scale_down.in_flight
        assert len(in_flight) <= min(parallelism, drains)
        # A node in flight is never started again.
        assert not set(previous) & {d.node for d in r.scale_down.started}
        previous = in_flight
    started = sorted(d.node for r in results for d in r.scale_down.started)
    reported = sorted(d.node for r in results for d in r.scale_down.deletions)
    # Every deletion started is reported exactly once, and only those.
    assert started == reported
    assert results[-1].scale_down.in_flight == ()
    assert b.group.target >= min_size
    removed = {d.node for r in results for d in r.scale_down.deletions if d.ok}
    assert removed.isdisjoint(b.cluster.nodes)
    assert len(b.cluster.nodes) >= min_size
