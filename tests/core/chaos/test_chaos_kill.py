"""`kill -9` of the real `clusterscaler run` process at random points of a scale-down, many
times, each followed by a restart whose first API calls fail.

Each round arranges a scale-down (an empty node, or a node whose one pod fits elsewhere)
with every step of it slowed down by the server (soft taint, deletion taint, cordon,
eviction, Node deletion: 0.3 s each, carried out even when the client is gone meanwhile),
kills the process at a random moment from its first write of the scale-down, then starts a
new process with the next N requests failing with 500. Afterwards no taint of ours may
remain, nothing may be deleted twice, and nothing unsafe may have happened (see
`chaoskit.Audit`). Seeded: a failure names its seed.
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
from pathlib import Path

from chaoskit import (
    DELETION_CANDIDATE,
    GROUP,
    NAMESPACE,
    TO_BE_DELETED,
    Audit,
    Autoscaler,
    Workload,
    convergence_gaps,
    group_node,
    taint_keys,
    wait_for,
    workload_objects,
)
from clusterscaler.testing.fakekube import FakeKubeServer, Fault
from clusterscaler.testing.faults import FaultKind

SEED = int(os.environ.get("CLUSTERSCALER_CHAOS_SEED", "20261124"))
ROUNDS = 10
REPLICAS = 4  # two full nodes once converged
STEP_SECONDS = 0.3
# From the first write of a scale-down to the Node's deletion: two taints, the cordon,
# the eviction and the deletion, each slowed down by STEP_SECONDS.
KILL_WINDOW = 5 * STEP_SECONDS + 0.2

FLAGS = [
    "--scan-interval=100ms",
    "--v=1",
    "--kube-client-qps=200",
    "--kube-client-burst=400",
    "--scale-down-unneeded-time=0s",
    "--scale-down-delay-after-add=0s",
    "--scale-down-delay-after-delete=0s",
    "--scale-down-delay-after-failure=200ms",
    "--unremovable-node-recheck-timeout=1s",
    "--node-delete-delay-after-taint=300ms",
    "--max-graceful-termination-sec=1",
    "--initial-node-group-backoff-duration=500ms",
    "--max-node-group-backoff-duration=2s",
]


def arrange_scale_down(kube: FakeKubeServer, workload: Workload, index: int, empty: bool) -> str:
    """From two full nodes, add a node with one pod of its own, and take one pod away: from
    the new node (``empty``: it is left empty) or from a full node (two nodes then have one
    pod each, and one of them can go). One change, at once. Returns the new node's name."""
    name = f"{GROUP}-extra-{index:02d}"
    with kube.locked():
        placement = workload.placement()
        full = sorted(n for n, pods in placement.items() if n and len(pods) == 2)
        assert len(full) == 2 and len(placement) == 2, placement
        kube.create(group_node(name))
        added = workload.add_running_pod(name)
        doomed = added if empty else placement[full[0]][0]
        kube.delete("pods", doomed, NAMESPACE)
        workload.set_replicas(REPLICAS)
    return name


def slow_scale_down(kube: FakeKubeServer) -> list[Fault]:
    """Every write a scale-down makes takes STEP_SECONDS before it is carried out."""
    return [
        kube.add_fault(method=method, path=path, kind=FaultKind.SLOW, delay=STEP_SECONDS)
        for method, path in (
            ("PUT", r"^/api/v1/nodes/[^/]+$"),
            ("PATCH", r"^/api/v1/nodes/[^/]+$"),
            ("DELETE", r"^/api/v1/nodes/[^/]+$"),
            ("POST", r"/eviction$"),
        )
    ]


class FirstNodeWrite:
    """Set when the autoscaler first writes a Node after ``arm()`` (``on_request``, as the
    request arrives, before any delay)."""

    _NODE = re.compile(r"/api/v1/nodes/[^/]+")

    def __init__(self, kube: FakeKubeServer) -> None:
        self.event = threading.Event()
        self.armed = False
        kube.on_request = self.on_request

    def arm(self) -> None:
        self.event.clear()
        self.armed = True

    def on_request(self, method: str, path: str) -> None:
        if self.armed and method in ("PUT", "PATCH") and self._NODE.fullmatch(path):
            self.armed = False
            self.event.set()


def test_kill_during_scale_down_then_failing_restart_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED)
    with FakeKubeServer() as kube:
        for obj in workload_objects():
            kube.create(obj)
        for i in range(2):
            kube.create(group_node(f"{GROUP}-init-{i}"))
        workload = Workload(kube, period=0.02)
        workload.set_replicas(REPLICAS)
        audit = Audit(kube, workload)
        audit.install()
        first_write = FirstNodeWrite(kube)
        autoscaler = Autoscaler(tmp_path, kube, FLAGS)
        workload.start()
        wait_for(lambda: not convergence_gaps(kube, workload), 10, "the initial cluster")
        autoscaler.start()
        kills: list[str] = []
        try:
            for index in range(ROUNDS):
                empty = rng.random() < 0.4
                slow = slow_scale_down(kube)
                first_write.arm()
                arrange_scale_down(kube, workload, index, empty)
                assert first_write.event.wait(15), (
                    f"round {index}: no scale-down started (seed {SEED})\n{autoscaler.tail()}"
                )
                delay = rng.uniform(0.0, KILL_WINDOW)
                time.sleep(delay)
                assert autoscaler.alive(), autoscaler.tail()
                autoscaler.stop(signal.SIGKILL)
                for fault in slow:
                    kube.remove_fault(fault)
                # What the kill left (writes in flight may still land).
                tainted = {
                    n["metadata"]["name"]: sorted(
                        taint_keys(n) & {TO_BE_DELETED, DELETION_CANDIDATE}
                    )
                    for n in kube.list("nodes")
                    if taint_keys(n) & {TO_BE_DELETED, DELETION_CANDIDATE}
                }
                failing = rng.randint(1, 25)
                kills.append(
                    f"round {index}: {'empty' if empty else 'drain'}, killed {delay:.2f}s "
                    f"after its first Node write (tainted then: {tainted}), restart with "
                    f"{failing} failing requests"
                )
                # Its first Node writes (the clean-up of the taints left) fail too.
                failing_writes = rng.randint(0, 2)
                kube.add_fault(
                    method="PUT",
                    path=r"^/api/v1/nodes/",
                    status=500,
                    times=failing_writes,
                    message="injected at restart",
                )
                kube.add_fault(status=500, times=failing, message="injected at restart")
                kills[-1] += f" and {failing_writes} failing Node updates"
                autoscaler.start()
                wait_for(
                    lambda: not convergence_gaps(kube, workload),
                    20,
                    lambda index=index: (
                        f"round {index} to converge after the restart (seed "
                        f"{SEED}): {convergence_gaps(kube, workload)}\n"
                        + "\n".join(kills)
                        + f"\n{audit.node_history()}\n{autoscaler.tail()}"
                    ),
                )
            # The last restart too is up and looping before it is asked to stop.
            wait_for(
                lambda: autoscaler.count("loop_done"), 20, lambda: f"a loop\n{autoscaler.tail()}"
            )
        finally:
            code = autoscaler.stop()
            workload.stop()

        breaches = audit.breaches()
        history = "\n".join(kills)
        assert not breaches, f"seed {SEED}:\n" + "\n".join(breaches) + f"\n{history}"
        # Nothing deleted twice: no deletion of a Node already gone, no Node deleted twice.
        assert not audit.deleted_missing, (audit.deleted_missing, history)
        uids = [d.uid for d in audit.deletions]
        assert len(uids) == len(set(uids)), (audit.deletions, history)
        assert code == 0, autoscaler.tail()
        # Every round ended with one node fewer than it started with.
        assert len(audit.deletions) == ROUNDS, f"{audit.node_history()}\n{history}"
    print(f"seed {SEED}:\n{history}")
