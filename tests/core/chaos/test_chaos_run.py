"""The real `clusterscaler run` process against an API server that misbehaves in every way
the fault schedule knows, through scale-ups and scale-downs; then the faults stop.

While the faults last, nothing unsafe may happen (see `chaoskit.Audit`) and the process must
stay up; once they stop, the cluster must converge: every pod scheduled, unneeded nodes
removed, no taint of ours left. Seeded: a failure names its seed, and a run with the same
seed injects the same faults into the same sequence of requests of each path.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from chaoskit import (
    Audit,
    Autoscaler,
    Workload,
    convergence_gaps,
    wait_for,
    workload_objects,
)
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.faults import FaultKind, FaultSchedule

SEED = int(os.environ.get("CLUSTERSCALER_CHAOS_SEED", "20261124"))

# Per request. Watch kinds count for watch requests only; the others for every request.
# The client's read timeout is 60 s, with no flag to shorten it: TIMEOUT (the request is
# carried out, then the connection closes without an answer) stands for answers past it.
RATES = {
    FaultKind.ERROR_500: 0.05,
    FaultKind.ERROR_503: 0.02,
    FaultKind.ERROR_429: 0.01,  # answered with Retry-After: 1, which urllib3 waits out
    FaultKind.SLOW: 0.01,
    FaultKind.TIMEOUT: 0.01,
    FaultKind.DROP: 0.03,
    FaultKind.WATCH_END: 0.1,
    FaultKind.WATCH_LIST: 0.05,
    FaultKind.WATCH_GARBAGE: 0.05,
    FaultKind.WATCH_GONE: 0.05,
}
# How the workload moves while the faults last: (seconds from the start, replicas).
PLAN = [(0.0, 3), (2.0, 9), (6.0, 2), (10.0, 8), (14.0, 1), (18.0, 7), (21.0, 3)]
FAULTS_SECONDS = 24.0
CONVERGE_SECONDS = 25.0

FLAGS = [
    "--scan-interval=50ms",
    "--v=1",
    "--kube-client-qps=200",
    "--kube-client-burst=400",
    "--scale-down-unneeded-time=1s",
    "--scale-down-delay-after-add=0s",
    "--scale-down-delay-after-delete=0s",
    "--scale-down-delay-after-failure=500ms",
    "--initial-node-group-backoff-duration=500ms",
    "--max-node-group-backoff-duration=2s",
    "--unremovable-node-recheck-timeout=1s",
    "--node-delete-delay-after-taint=200ms",
    "--max-graceful-termination-sec=1",
    "--max-pod-eviction-time=15s",
    # A node created by a scale-up that the caches do not show within this is taken for
    # an instance that never registered: the clean-up must confirm it before deleting.
    "--max-node-provision-time=3s",
]


def test_chaos_scale_up_and_down_stays_safe_and_converges(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    with FakeKubeServer(bookmark_interval=0.5) as kube:
        for obj in workload_objects():
            kube.create(obj)
        workload = Workload(kube)
        audit = Audit(kube, workload)
        audit.install()
        autoscaler = Autoscaler(tmp_path, kube, FLAGS)
        schedule = FaultSchedule(seed=SEED, rates=RATES, slow_seconds=0.3)
        workload.start()
        autoscaler.start()
        try:
            # The faults start with the process: even its first list and watches fail.
            kube.set_fault_schedule(schedule)
            started = time.monotonic()
            plan = list(PLAN)
            next_cut = started + rng.uniform(0.5, 2.0)
            while (now := time.monotonic()) - started < FAULTS_SECONDS:
                while plan and now - started >= plan[0][0]:
                    workload.set_replicas(plan.pop(0)[1])
                if now >= next_cut:
                    # Streams cut by a proxy: the re-watches meet the watch faults.
                    kube.drop_watches(clean=rng.random() < 0.7)
                    next_cut = now + rng.uniform(0.5, 2.0)
                assert autoscaler.alive(), f"the process died:\n{autoscaler.tail()}"
                time.sleep(0.05)
            schedule.enabled = False
            loops_under_faults = autoscaler.count("loop_done") + autoscaler.count("loop_failed")

            def converged() -> bool:
                assert autoscaler.alive(), f"the process died:\n{autoscaler.tail()}"
                return not convergence_gaps(kube, workload)

            wait_for(
                converged,
                CONVERGE_SECONDS,
                lambda: (
                    f"convergence after the faults (seed {SEED}): "
                    f"{convergence_gaps(kube, workload)}\n{audit.node_history()}\n"
                    f"breaches: {audit.breaches()}\n{autoscaler.tail()}"
                ),
            )
            assert autoscaler.alive(), autoscaler.tail()
        finally:
            code = autoscaler.stop()
            workload.stop()
        assert code == 0, autoscaler.tail()

    # The run did what it claims: hundreds of loops under every kind of fault, and both
    # directions of scaling.
    loops = autoscaler.count("loop_done") + autoscaler.count("loop_failed")
    summary = (
        f"seed {SEED}: {loops} loops, {loops_under_faults} under faults, "
        f"{sum(schedule.injected.values())} faults {dict(schedule.injected)}, "
        f"{len(audit.deletions)} nodes deleted, {audit.evictions} evictions"
    )
    assert loops_under_faults >= 150, summary
    assert set(schedule.injected) == set(RATES), summary
    created = [r for r in kube.requests if r.resource == "nodes" and r.method == "POST"]
    assert sum(1 for r in created if r.status == 201) >= 4, audit.node_history()
    assert len(audit.deletions) >= 2, audit.node_history()

    breaches = audit.breaches()
    assert not breaches, f"{summary}:\n" + "\n".join(breaches)
    print(summary)
