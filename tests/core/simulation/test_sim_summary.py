"""The summary of `clusterscaler simulate` agrees with its timeline: scale-ups and
scale-downs counted the same way (a node group per loop), requested nodes split into
provisioned, failed and still provisioning, removals counted per node, counts with the
right noun."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.offline.output import Summary, plural, render_summary

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "scenarios"


def run(capsys: pytest.CaptureFixture[str], name: str, *extra: str) -> list[dict[str, Any]]:
    code = main(["simulate", str(EXAMPLES / f"{name}.yaml"), "--json", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def events(lines: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [x for x in lines if x["type"] == "event" and x["action"] == action]


def nodes_in(row: dict[str, Any]) -> int:
    """A node-ready row names its node, or says `N nodes`."""
    first = row["detail"].split(" ")
    return int(first[0]) if len(first) == 2 and first[1] == "nodes" else 1


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.yaml")))
def test_summary_counts_what_the_timeline_shows(capsys: pytest.CaptureFixture[str], name: str) -> None:
    lines = run(capsys, name)
    summary = lines[-1]
    assert summary["type"] == "summary"
    ups = events(lines, "scale-up")
    downs = events(lines, "scale-down")
    assert summary["scaleUps"] == len({(r["time"], r["nodeGroup"]) for r in ups})
    assert summary["scaleDowns"] == len({(r["time"], r["nodeGroup"]) for r in downs})
    assert summary["nodesRemoved"] == len({r["detail"].split(" ")[0] for r in downs})
    assert summary["nodesFailed"] == len(events(lines, "cleanup"))
    assert summary["nodesProvisioned"] == sum(nodes_in(r) for r in events(lines, "node-ready"))
    requested = sum(
        int(b) - int(a) for a, _, b in (r["detail"].split(" for ")[0].split(" ") for r in ups)
    )
    assert summary["nodesRequested"] == requested
    assert requested == (
        summary["nodesProvisioned"] + summary["nodesFailed"] + summary["nodesProvisioning"]
    )


def test_failed_instances_are_not_counted_as_added(capsys: pytest.CaptureFixture[str]) -> None:
    # Both spot groups fail to provision: 2 of the 6 requested nodes (on-demand) arrive.
    lines = run(capsys, "spot-outage")
    summary = lines[-1]
    assert (summary["scaleUps"], summary["nodesRequested"]) == (3, 6)
    assert (summary["nodesProvisioned"], summary["nodesFailed"], summary["nodesProvisioning"]) == (2, 4, 0)
    assert main(["simulate", str(EXAMPLES / "spot-outage.yaml")]) == 0
    text = capsys.readouterr().out
    assert "scale-ups       3 (6 nodes requested: 2 provisioned, 4 failed)" in text


def test_nodes_still_provisioning_at_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    # The burst arrives at 1m and the group's nodes take 60s: none is ready at 1m30s.
    summary = run(capsys, "burst-scale-up", "--duration", "1m30s")[-1]
    assert (summary["nodesRequested"], summary["nodesProvisioned"], summary["nodesProvisioning"]) == (4, 0, 4)
    assert main(["simulate", str(EXAMPLES / "burst-scale-up.yaml"), "--duration", "1m30s"]) == 0
    assert "1 (4 nodes requested: 0 provisioned, 0 failed, 4 still provisioning)" in capsys.readouterr().out


def test_scale_downs_count_like_scale_ups(capsys: pytest.CaptureFixture[str]) -> None:
    # Five nodes of one group go in one loop: one scale-down, five nodes removed.
    summary = run(capsys, "scale-down")[-1]
    assert (summary["scaleDowns"], summary["nodesRemoved"]) == (1, 5)


def test_one_of_a_kind_is_singular(capsys: pytest.CaptureFixture[str]) -> None:
    assert (plural(0, "pod"), plural(1, "pod"), plural(2, "node")) == ("0 pods", "1 pod", "2 nodes")
    summary = Summary(
        duration=timedelta(minutes=5), loops=1, scale_ups=1, nodes_requested=1,
        nodes_provisioned=1, nodes_failed=0, nodes_provisioning=0, scale_downs=1,
        nodes_removed=1, node_hours={}, cost=0.0, pending_p50=None, pending_p95=None,
        pending_max=None, still_pending=1,
    )
    text = render_summary(summary)
    assert "in 1 loop\n" in text
    assert "(1 node requested: 1 provisioned, 0 failed)" in text
    assert "(1 node removed)" in text
    assert "still pending   1 pod\n" in text
    # In the timeline: the scale-down scenario drains one pod off its last node.
    lines = run(capsys, "scale-down")
    details = Counter(r["detail"].split(" (")[1] for r in events(lines, "scale-down"))
    assert details["drain, 1 pod evicted)"] == 1


def test_requested_nodes_count_from_the_request_on(capsys: pytest.CaptureFixture[str]) -> None:
    # Two nodes for 15 minutes, and four more requested at 1m (the burst): 14 minutes each.
    summary = run(capsys, "burst-scale-up")[-1]
    assert summary["nodeHours"] == {"general": round(2 * 15 / 60 + 4 * 14 / 60, 4)}
