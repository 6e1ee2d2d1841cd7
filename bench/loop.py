"""Performance figures of the autoscaling loop.

Run from the repository root with `python -m bench.loop` (or `python bench/loop.py`).
Prints one line per figure with its target; exits non-zero when a target is missed.

Figures:
- scale-up loop:   one `run_once` on 1,000 nodes x 30 pods with 3,000 pending pods of 10
                   shapes (target: under 1 s)
- scale-down loop: one `run_once` on 2,000 nodes x 40 small pods, every node underutilized
                   (target: under 10 s)
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import logging
import platform
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import structlog
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.loop.autoscaler import Autoscaler, build_estimator, build_expander
from clusterscaler.model import Controller, OwnerRef
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.plugins import estimators, expanders, pod_filters
from clusterscaler.simulator.builders import make_pod
from clusterscaler.simulator.drain import build_pod_filters
from clusterscaler.testing.fakecloud import FakeCloud

NOW = datetime(2024, 1, 1, tzinfo=UTC)

BenchCloud = FakeCloud[InMemoryCluster]


def build_cluster(
    nodes: int, pods_per_node: int, pod_cpu: str, groups: int = 4
) -> tuple[InMemoryCluster, BenchCloud]:
    """`nodes` running 16-core nodes spread round-robin over `groups` node groups (of up to
    twice `nodes` each), `pods_per_node` running pods of `pod_cpu` on each."""
    owners = [OwnerRef("ReplicaSet", f"app{i}", f"uid-app{i}", True, "apps/v1") for i in range(20)]
    cluster = InMemoryCluster(
        controllers=[
            Controller("ReplicaSet", "default", o.name, o.uid, replicas=10_000) for o in owners
        ]
    )
    cloud = FakeCloud(cluster, VirtualClock(NOW), name="bench")
    bench_groups = [
        cloud.add_group(f"group-{gi}", max_size=nodes * 2, cpu="16", memory="64Gi")
        for gi in range(groups)
    ]
    created = NOW - timedelta(days=1)
    seq = 0
    for i in range(nodes):
        # Round-robin, so that the groups' nodes interleave in the cluster as in a real one.
        (node,) = bench_groups[i % groups].add_running(1, created)
        for _ in range(pods_per_node):
            owner = owners[seq % len(owners)]
            cluster.add_pod(
                make_pod(
                    f"{owner.name}-{seq}",
                    pod_cpu,
                    "256Mi",
                    owner=owner,
                    labels={"app": owner.name},
                    node_name=node.name,
                    phase="Running",
                    creation_time=NOW - timedelta(hours=1),
                )
            )
            seq += 1
    return cluster, cloud


def autoscaler(cluster: InMemoryCluster, provider: BenchCloud) -> Autoscaler:
    host = build_plugin_manager(
        autoload=False,
        extra_plugins={
            "pod-filters": pod_filters,
            "estimators": estimators,
            "expanders": expanders,
        },
    )
    registry = collect_registry(host)
    options = dataclasses.replace(AutoscalingOptions(), scale_down_delay_after_add=timedelta(0))
    return Autoscaler(
        options=options,
        provider=provider,
        source=cluster,
        actions=cluster,
        estimator=build_estimator(registry, options),
        expander=build_expander(registry, options, provider),
        pod_filters=build_pod_filters(registry, options),
        clock=VirtualClock(NOW),
    )


def timed_loop(a: Autoscaler) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    result = a.run_once(NOW)
    return time.perf_counter() - start, result


def scale_up_loop() -> tuple[float, str]:
    # Nodes are full (30 x 500m of 16 cores), so no pending pod fits existing capacity.
    cluster, provider = build_cluster(1000, 30, "500m")
    shapes = [(f"{1100 + 300 * i}m", f"{1 + i}Gi") for i in range(10)]
    for i in range(3000):
        cpu, mem = shapes[i % 10]
        owner = OwnerRef("ReplicaSet", f"pending{i % 10}", f"uid-pending{i % 10}", True)
        cluster.add_pod(
            make_pod(
                f"pending-{i}",
                cpu,
                mem,
                owner=owner,
                labels={"app": f"pending{i % 10}"},
                unschedulable=True,
                creation_time=NOW - timedelta(minutes=1),
            )
        )
    seconds, result = timed_loop(autoscaler(cluster, provider))
    decisions = result.scale_up.decisions  # type: ignore[attr-defined]
    added = sum(d.delta for d in decisions)
    return seconds, f"{added} nodes added for {len(result.pending_pods)} pending pods"  # type: ignore[attr-defined]


def scale_down_loop() -> tuple[float, str]:
    cluster, provider = build_cluster(2000, 40, "100m")
    seconds, result = timed_loop(autoscaler(cluster, provider))
    sd = result.scale_down  # type: ignore[attr-defined]
    return seconds, f"{len(sd.unneeded)} unneeded, {len(sd.unremovable)} unremovable"


FIGURES = (
    ("scale-up loop (1,000 nodes x 30 pods, 3,000 pending)", scale_up_loop, 1.0),
    ("scale-down loop (2,000 nodes x 40 pods, underutilized)", scale_down_loop, 10.0),
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    # Per-decision logs would dominate the timings; keep warnings only.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"# python {platform.python_version()} on {platform.machine()}")
    failed = False
    for title, fn, target in FIGURES:
        seconds, detail = fn()
        ok = seconds < target
        failed = failed or not ok
        print(
            f"{title}: {seconds:.3f} s (target < {target:g} s) {'ok' if ok else 'MISSED'}; {detail}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
