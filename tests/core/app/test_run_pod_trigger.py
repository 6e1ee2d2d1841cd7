"""--frequent-loops-enabled: the real `clusterscaler` process against a fake API server,
with a 10-minute --scan-interval. A pod that becomes unschedulable after the first loop
starts the next loop at once (a node is added within seconds); with the flag off it waits
for the interval. Either way SIGTERM still ends the wait at once."""

from __future__ import annotations

import itertools
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from clusterscaler.testing.fakekube import FakeKubeServer
from test_run_e2e import CLOUD_CONFIG, free_port, node_names, start, stop, wait_for, web_pod

POD_TRIGGER = "by unschedulable pod appearing"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeKubeServer, Path]]:
    (tmp_path / "cloud.yaml").write_text(yaml.safe_dump(CLOUD_CONFIG))
    with FakeKubeServer() as kube:
        kube.kubeconfig(tmp_path / "kubeconfig")
        kube.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": "web", "namespace": "default", "uid": "rs-web"},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}},
            }
        )
        yield kube, tmp_path


def loops(log: Path) -> int:
    return log.read_text().count("loop_done")


def start_alone(tmp: Path, *flags: str) -> subprocess.Popen[bytes]:
    """The autoscaler without leader election, with a 10-minute --scan-interval: any loop
    after the first that starts within a test's seconds was started early."""
    return start(
        tmp, "--leader-elect=false", f"--address=127.0.0.1:{free_port()}", "--scan-interval=10m", *flags
    )


@pytest.mark.parametrize("frequent", [True, False], ids=["enabled", "disabled"])
def test_an_unschedulable_pod_starts_the_next_loop_only_with_frequent_loops(
    cluster: tuple[FakeKubeServer, Path], frequent: bool
) -> None:
    kube, tmp = cluster
    log = tmp / "autoscaler.log"
    process = start_alone(tmp, f"--frequent-loops-enabled={str(frequent).lower()}")
    try:
        wait_for(lambda: loops(log) >= 1, 60, "the first loop")
        assert not node_names(kube)
        created = time.monotonic()
        kube.create(web_pod(0))
        if frequent:
            wait_for(lambda: node_names(kube), 15, "a node for the new pending pod")
            assert time.monotonic() - created < 15
            assert POD_TRIGGER in log.read_text()
        else:
            time.sleep(8)
            assert not node_names(kube), "no loop may start before --scan-interval"
            assert loops(log) == 1
            assert POD_TRIGGER not in log.read_text()
        # SIGTERM ends the 10-minute wait at once.
        stopping = time.monotonic()
        assert stop(process) == 0
        assert time.monotonic() - stopping < 15
    finally:
        stop(process)



PRODUCTIVE = "immediately after a productive iteration"


def test_a_productive_loop_is_followed_at_once_by_one_loop_then_the_interval(
    cluster: tuple[FakeKubeServer, Path],
) -> None:
    """A pod pending before the start (it signals no loop) makes the first loop scale up: the
    next loop starts at once (CA: only the loop that just ended counts), sees the new node,
    does nothing, and the one after waits for the 10-minute interval."""
    kube, tmp = cluster
    kube.create(web_pod(0))
    log = tmp / "autoscaler.log"
    process = start_alone(tmp)
    try:
        wait_for(lambda: loops(log) >= 2, 60, "the loop after the scale-up")
        assert node_names(kube)
        time.sleep(4)
        text = log.read_text()
        assert loops(log) == 2, "a third loop started before --scan-interval"
        assert text.count(PRODUCTIVE) == 1
        assert POD_TRIGGER not in text
    finally:
        assert stop(process) == 0


def stamp(line: str) -> datetime:
    """The time in a line's klog header (`I1127 02:11:11.123456 ...`: local, no year)."""
    return datetime.strptime(f"{datetime.now().year}{line[1:21]}", "%Y%m%d %H:%M:%S.%f")


def test_pods_appearing_one_after_another_leave_a_second_between_loops(
    cluster: tuple[FakeKubeServer, Path],
) -> None:
    """Pods no node group can hold (no scale-up, so no productive loop) appear every 0.1s
    for 4s: each loop they start begins at least a second after the previous one ended,
    and 40 pods start a handful of loops, not one each."""
    kube, tmp = cluster
    log = tmp / "autoscaler.log"
    process = start_alone(tmp)
    try:
        wait_for(lambda: loops(log) >= 1, 60, "the first loop")
        for i in range(40):
            huge = web_pod(i)
            huge["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "64"
            kube.create(huge)
            time.sleep(0.1)
        wait_for(lambda: log.read_text().count(POD_TRIGGER) >= 2, 10, "pod-triggered loops")
        time.sleep(1.5)
        assert not node_names(kube)
    finally:
        assert stop(process) == 0
    lines = [
        line
        for line in log.read_text().splitlines()
        if '] "loop_done"' in line or POD_TRIGGER in line
    ]
    gaps = [
        (stamp(line) - stamp(before)).total_seconds()
        for before, line in itertools.pairwise(lines)
        if POD_TRIGGER in line and '] "loop_done"' in before
    ]
    assert 2 <= len(gaps) <= 10, f"{len(gaps)} loops started by 40 pods in 4s"
    assert min(gaps) >= 0.95, f"a pod-triggered loop started {min(gaps)}s after the last"


def test_a_leader_that_loses_its_lease_while_waiting_exits_at_once(
    cluster: tuple[FakeKubeServer, Path],
) -> None:
    """The wait for an unschedulable pod (or the 10-minute interval) ends as soon as the
    Lease can no longer be renewed, and the process exits 1 to restart as a follower."""
    kube, tmp = cluster
    log = tmp / "autoscaler.log"
    process = start(
        tmp,
        "--leader-elect=true",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms",
        f"--address=127.0.0.1:{free_port()}",
        "--scan-interval=10m",
    )
    try:
        wait_for(lambda: loops(log) >= 1, 60, "the first loop")
        kube.add_fault(method="PUT", path="/leases/", status=500)
        failing = time.monotonic()
        assert process.wait(timeout=20) == 1
        assert time.monotonic() - failing < 15
        assert "leadership_lost" in log.read_text()
    finally:
        stop(process)
