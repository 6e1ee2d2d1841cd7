"""Logs of `simulate` and `explain` stay out of their output: on standard error, stamped
with the simulated time the timeline shows, never with the wall clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from clusterscaler.commands.cli import main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SPOT_OUTAGE = str(EXAMPLES / "scenarios" / "spot-outage.yaml")
# klog's header: severity, then month, day and time in local time.
STAMP = re.compile(r"^[IWEF](\d{4} \d{2}:\d{2}:\d{2}\.\d{6}) ", re.MULTILINE)


def klog_time(iso: str) -> str:
    """How a klog header shows the UTC time `iso`."""
    return datetime.fromisoformat(iso).astimezone().strftime("%m%d %H:%M:%S.%f")


def test_warnings_go_to_stderr_in_simulated_time(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", SPOT_OUTAGE]) == 0
    out, err = capsys.readouterr()
    assert not STAMP.search(out)
    # The spot groups back off when the loop removes their failed instances: at 1m10s and
    # 1m20s of the run, which starts at the virtual clock's fixed start.
    backoffs = [line for line in err.splitlines() if '] "node_group_backoff"' in line]
    assert [STAMP.search(line).group(1) for line in backoffs] == [  # type: ignore[union-attr]
        klog_time("2024-01-01T00:01:10Z"),
        klog_time("2024-01-01T00:01:20Z"),
    ]
    assert all(line.startswith("W") for line in backoffs)
    assert "00:01:10  cleanup     spot-zone-b" in out


def test_info_logs_are_not_split_onto_the_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    # --log-text-split-stream sends info lines to stdout in `run`; stdout is the timeline here.
    assert main(["simulate", SPOT_OUTAGE, "--v=2", "--duration=2m",
                 "--feature-gates=LoggingAlphaOptions=true", "--log-text-split-stream"]) == 0
    out, err = capsys.readouterr()
    assert not STAMP.search(out)
    assert re.search(r"^I\d{4} ", err, re.MULTILINE)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    assert set(STAMP.findall(err)) <= {klog_time((start.replace(minute=m, second=s)).isoformat())
                                       for m in range(3) for s in range(60)}  # fmt: skip


def test_explain_logs_in_the_snapshot_time(capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = str(EXAMPLES / "snapshots" / "small-cluster.json")
    config = str(EXAMPLES / "cloud-configs" / "general.yaml")
    assert main(["explain", "--snapshot", snapshot, "--cloud-config", config, "--v=2"]) == 0
    out, err = capsys.readouterr()
    assert not STAMP.search(out)
    # The loop's lines read the snapshot's time (its newest timestamp), not today's.
    assert set(STAMP.findall(err)) == {klog_time("2024-05-01T10:30:00Z")}
