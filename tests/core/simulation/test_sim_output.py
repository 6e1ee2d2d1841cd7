"""The JSON contract of `simulate --once --json` / `explain --json`, explain's answers for
each rule, and the timeline, summary and plot renderers."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from clusterscaler.commands.explain import explain, render, report_json
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import ProviderProblem
from clusterscaler.interfaces.podfilter import BlockingPodReason
from clusterscaler.loop.decisions import (
    BlockingPod,
    ClusterHealth,
    DeletionKind,
    GroupRejection,
    LoopResult,
    NodeCounts,
    NodeDeletion,
    NodeGroupStatus,
    NoScaleUpReason,
    ScaleDownResult,
    ScaleDownStatus,
    ScaleUpDecision,
    ScaleUpOption,
    ScaleUpResult,
    ScaleUpStatus,
    UnneededNode,
    UnremovableNode,
    UnremovableReason,
)
from clusterscaler.model import ClusterObjects
from clusterscaler.offline.output import (
    Sample,
    Summary,
    TimelineRow,
    decision_json,
    pending_stats,
    percentile,
    plot,
    render_summary,
    render_timeline,
)
from clusterscaler.simulator.builders import make_node, make_pod

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)


def status(name: str) -> NodeGroupStatus:
    return NodeGroupStatus(name, 0, 10, 1, NodeCounts(), 0, True)


RESULT = LoopResult(
    time=NOW,
    health=ClusterHealth(True, NodeCounts()),
    node_groups=(status("general"), status("gpu")),
    scale_up=ScaleUpResult(
        status=ScaleUpStatus.SUCCESSFUL,
        decisions=(ScaleUpDecision("general", 2, 1, ("default/web-1", "default/web-2")),),
        options=(
            ScaleUpOption("general", 2, ("default/web-1", "default/web-2")),
            ScaleUpOption("gpu", 1, ("default/web-1",)),
        ),
        pods_remaining={
            "default/big": (
                GroupRejection("general", NoScaleUpReason.NOT_SCHEDULABLE, "Insufficient memory"),
                GroupRejection("gpu", NoScaleUpReason.MAX_SIZE_REACHED),
            )
        },
    ),
    scale_down=ScaleDownResult(
        status=ScaleDownStatus.NODE_DELETE_STARTED,
        unneeded=(
            # Removable ten minutes after becoming unneeded (the group's unneeded time).
            UnneededNode(
                "n-empty", "general", NOW - timedelta(minutes=20), True, 0.0,
                removable_at=NOW - timedelta(minutes=10),
            ),
            UnneededNode(
                "n-young", "general", NOW - timedelta(minutes=1), False, 0.2, {"default/a": "n2"},
                removable_at=NOW + timedelta(minutes=9),
            ),
        ),
        unremovable=(
            UnremovableNode(
                "n-system",
                UnremovableReason.BLOCKED_BY_POD,
                BlockingPod("kube-system/coredns", BlockingPodReason.UNMOVABLE_KUBE_SYSTEM_POD),
            ),
            UnremovableNode(
                "n-busy", UnremovableReason.NOT_UNDERUTILIZED, detail="cpu utilization 0.700 >= 0.5"
            ),
        ),
        deletions=(NodeDeletion("n-gone", "general", DeletionKind.DRAIN, ("default/x",)),),
    ),
)


def test_once_json_contract() -> None:
    doc = decision_json(RESULT)
    assert list(doc) == ["scaleUp", "scaleDown", "unschedulable", "unremovable"]
    assert doc["scaleUp"] == [
        {"nodeGroup": "general", "from": 1, "to": 3, "pods": ["default/web-1", "default/web-2"]}
    ]
    # The started deletion and the node unneeded for longer than --scale-down-unneeded-time;
    # the node unneeded for a minute is not acted on yet.
    assert doc["scaleDown"] == [
        {"node": "n-gone", "nodeGroup": "general", "empty": False},
        {"node": "n-empty", "nodeGroup": "general", "empty": True},
    ]
    assert doc["unschedulable"] == [
        {
            "pod": "default/big",
            "reasons": {
                "general": "pod does not fit the node group's template: Insufficient memory",
                "gpu": "max node group size reached",
            },
        }
    ]
    assert doc["unremovable"] == [
        {
            "node": "n-busy",
            "reason": "NotUnderutilized",
            "detail": "cpu utilization 0.700 >= 0.5",
            "blockingPod": None,
        },
        {
            "node": "n-system",
            "reason": "BlockedByPod",
            "detail": "",
            "blockingPod": {"pod": "kube-system/coredns", "reason": "UnmovableKubeSystemPod"},
        },
    ]


def test_explain_lists_every_removable_node_including_the_waiting_ones() -> None:
    nodes = [e["node"] for e in decision_json(RESULT, include_waiting=True)["scaleDown"]]
    assert nodes == ["n-gone", "n-empty", "n-young"]


def cluster() -> ClusterObjects:
    return ClusterObjects(
        nodes=[make_node(n, labels={"clusterscaler.io/node-group": "general"})
               for n in ("n-empty", "n-young", "n-system", "n-busy", "n-gone", "n-other")],
        pods=[
            make_pod("web-1", cpu="1", unschedulable=True),
            make_pod("web-2", cpu="1", unschedulable=True),
            make_pod("big", memory="1Ti", unschedulable=True),
            make_pod("cheap", cpu="1", unschedulable=True, priority=-100),
            make_pod("fresh", cpu="1", unschedulable=True, creation_time=NOW - timedelta(seconds=5),
                     annotations={"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": "1m"}),
            make_pod("preempting", cpu="1", unschedulable=True, nominated_node_name="n-busy"),
            make_pod("fits", cpu="1", unschedulable=True),
            make_pod("new", cpu="1"),
            make_pod("running", cpu="1", node_name="n-busy", phase="Running"),
        ],
    )


def verdicts(report, pod: str) -> dict[str, tuple[bool, str]]:
    (entry,) = [p for p in report.pods if p.pod == pod]
    return {v.node_group: (v.helps, v.why) for v in entry.verdicts}


EXPLAIN_CASES = [
    ("default/web-1", {"general": (True, "scale-up 1 -> 3"), "gpu": (True, "another node group was chosen")}),
    ("default/big", {"general": (False, "pod does not fit the node group's template: Insufficient memory"), "gpu": (False, "max node group size reached")}),
    ("default/cheap", {g: (False, "expendable: priority -100 is below --expendable-pods-priority-cutoff=-10") for g in ("general", "gpu")}),
    ("default/preempting", {g: (False, "waiting for preemption on node n-busy") for g in ("general", "gpu")}),
    ("default/fits", {"*": (False, "fits on an existing or upcoming node: no new node needed")}),
    ("default/new", {"*": (False, "not marked unschedulable by the scheduler (yet): the autoscaler waits")}),
]


@pytest.mark.parametrize(("pod", "expected"), EXPLAIN_CASES, ids=[c[0].split("/")[1] for c in EXPLAIN_CASES])
def test_explain_answers_per_pod_and_group(pod: str, expected: dict[str, tuple[bool, str]]) -> None:
    report = explain(RESULT, cluster(), AutoscalingOptions(), NOW)
    assert verdicts(report, pod) == expected


def test_explain_too_young_pods() -> None:
    report = explain(RESULT, cluster(), AutoscalingOptions(), NOW)
    why = verdicts(report, "default/fresh")["general"]
    assert why == (False, "too young: pending for 5s, scale-up waits 1m0s (--new-pod-scale-up-delay or the pod-scale-up-delay annotation)")


def test_explain_answers_per_node() -> None:
    report = explain(RESULT, cluster(), AutoscalingOptions(), NOW)
    nodes = {n.node: n for n in report.nodes}
    assert nodes["n-empty"].removable and "removable now" in nodes["n-empty"].reason
    assert nodes["n-young"].removable and "removable after 9m0s more unneeded" in nodes["n-young"].reason
    assert "drain 1 pod)" in nodes["n-young"].reason
    assert (nodes["n-system"].removable, nodes["n-system"].reason) == (False, "BlockedByPod")
    assert nodes["n-system"].blocking_pod == BlockingPod("kube-system/coredns", BlockingPodReason.UNMOVABLE_KUBE_SYSTEM_POD)
    assert nodes["n-busy"].reason == "NotUnderutilized"
    assert nodes["n-gone"].reason == "being deleted (drain)"
    assert nodes["n-other"].reason == "not evaluated: scale-down NodeDeleteStarted"
    text = render(report)
    assert "kube-system/coredns (UnmovableKubeSystemPod)" in text
    assert "NEW NODE HELPS" in text and "REMOVABLE" in text


def test_explain_json_has_the_once_keys_and_left_out_pods() -> None:
    doc = report_json(explain(RESULT, cluster(), AutoscalingOptions(), NOW))
    # simulate --once --json's keys, as they are, then explain's own.
    assert list(doc) == ["scaleUp", "scaleDown", "unschedulable", "unremovable", "pendingPods"]
    pods = [e["pod"] for e in doc["unschedulable"]]
    assert pods == sorted(pods)
    assert {"default/big", "default/cheap", "default/fresh", "default/preempting"} <= set(pods)
    assert "default/web-1" not in pods
    # explain lists every removable node, whatever the unneeded time.
    assert {e["node"] for e in doc["scaleDown"]} == {"n-gone", "n-empty", "n-young"}


def test_halted_loop_is_reported() -> None:
    halted = replace(RESULT, halted="cluster is unhealthy: 5 of 6 nodes unready")
    assert render(explain(halted, cluster(), AutoscalingOptions(), NOW)).startswith(
        "The loop stopped early: cluster is unhealthy"
    )


def test_percentiles_and_pending_stats() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2
    assert percentile([5], 95) == 5
    assert percentile(list(range(1, 101)), 95) == 95
    assert pending_stats([]) == (None, None, None)
    p50, p95, worst = pending_stats([timedelta(seconds=s) for s in (10, 20, 30, 40)])
    assert (p50, p95, worst) == (timedelta(seconds=20), timedelta(seconds=40), timedelta(seconds=40))


def test_timeline_and_summary_rendering() -> None:
    rows = [
        TimelineRow(timedelta(minutes=2), "event", "", "scale default/web to 30 replicas", {"general": 2}, 20),
        TimelineRow(timedelta(minutes=2, seconds=10), "scale-up", "general", "2 -> 5 for 20 pods", {"general": 2}, 20),
    ]
    text = render_timeline(rows)
    lines = text.splitlines()
    assert lines[0].split() == ["TIME", "ACTION", "GROUP", "DETAIL", "NODES", "PENDING"]
    assert lines[2].startswith("00:02:10  scale-up")
    assert lines[2].endswith("general=2  20")
    summary = Summary(
        duration=timedelta(hours=1), loops=360, scale_ups=1, nodes_requested=3, nodes_provisioned=3,
        nodes_failed=0, nodes_provisioning=0, scale_downs=1,
        nodes_removed=3, node_hours={"general": 3.5}, cost=0.665,
        pending_p50=timedelta(seconds=70), pending_p95=timedelta(seconds=80),
        pending_max=timedelta(seconds=81), still_pending=0, final_sizes={"general": 2},
    )
    out = render_summary(summary)
    assert "node-hours      3.50 (general 3.50)" in out
    assert "cost            0.67" in out
    assert "pod pending     p50 1m10s, p95 1m20s, max 1m21s" in out
    assert summary.to_json()["podPendingSeconds"] == {"p50": 70.0, "p95": 80.0, "max": 81.0}


def test_plot_writes_a_png(tmp_path: Path) -> None:
    samples = [
        Sample(timedelta(seconds=10 * i), {"general": 1 + i // 3, "gpu": i % 2}, max(0, 5 - i), 0.01 * i)
        for i in range(12)
    ]
    path = tmp_path / "out.png"
    plot(samples, path, title="test")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 5000


def test_progress_bar_on_a_terminal_only() -> None:
    import io

    from clusterscaler.offline.output import Progress

    stream = io.StringIO()
    bar = Progress(timedelta(minutes=10), stream=stream, enabled=True)
    bar.update(timedelta(minutes=5))
    bar.update(timedelta(minutes=5))  # unchanged: not redrawn
    assert stream.getvalue().count("\r") == 1
    assert "[###############...............]  50% simulated" in stream.getvalue()
    bar.done()
    assert stream.getvalue().endswith("\r")
    quiet = io.StringIO()
    # StringIO is not a terminal: nothing is drawn unless asked.
    Progress(timedelta(minutes=10), stream=quiet).update(timedelta(minutes=5))
    assert quiet.getvalue() == ""


def test_plot_to_an_unwritable_path(tmp_path: Path) -> None:
    from clusterscaler.offline.output import PlotError

    samples = [Sample(timedelta(0), {"g": 1}, 0, 0.0)]
    with pytest.raises(PlotError, match="cannot write the file"):
        plot(samples, tmp_path / "missing-dir" / "out.png")


def test_unneeded_nodes_kept_by_another_reason_are_not_acted_on() -> None:
    kept = UnremovableNode("n-empty", UnremovableReason.NODE_GROUP_MIN_SIZE_REACHED)
    waiting = UnremovableNode("n-young", UnremovableReason.NOT_UNNEEDED_LONG_ENOUGH)
    result = replace(
        RESULT,
        scale_down=replace(RESULT.scale_down, unremovable=(*RESULT.scale_down.unremovable, kept, waiting)),
    )
    doc = decision_json(result, include_waiting=True)
    assert [e["node"] for e in doc["scaleDown"]] == ["n-gone", "n-young"]
    assert {
        "node": "n-empty",
        "reason": "NodeGroupMinSizeReached",
        "detail": "",
        "blockingPod": None,
    } in doc["unremovable"]
    nodes = {n.node: n for n in explain(result, cluster(), AutoscalingOptions(), NOW).nodes}
    assert (nodes["n-empty"].removable, nodes["n-empty"].reason) == (False, "NodeGroupMinSizeReached")
    assert nodes["n-young"].removable


def test_explain_lists_node_group_problems() -> None:
    problem = ProviderProblem("vmss-gpu", "InvalidTag", "tag max: expected an integer, got 'ten'")
    result = replace(RESULT, problems=(problem,))
    text = render(explain(result, cluster(), AutoscalingOptions(), NOW))
    section = text.split("Node group problems\n", 1)[1]
    assert "vmss-gpu" in section and "InvalidTag" in section
    assert "tag max: expected an integer, got 'ten'" in section
    assert "Node group problems" not in render(explain(RESULT, cluster(), AutoscalingOptions(), NOW))
