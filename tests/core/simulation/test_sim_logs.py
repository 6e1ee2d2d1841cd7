"""Logs of `simulate` and `explain` stay out of their output: on standard error, stamped
with the simulated time the timeline shows, never with the wall clock."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clusterscaler.commands.cli import main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SPOT_OUTAGE = str(EXAMPLES / "scenarios" / "spot-outage.yaml")
STAMP = re.compile(r"timestamp='([^']+)'")


def test_warnings_go_to_stderr_in_simulated_time(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", SPOT_OUTAGE]) == 0
    out, err = capsys.readouterr()
    assert "level=" not in out and "timestamp=" not in out
    # The spot groups back off when the loop removes their failed instances: at 1m10s and
    # 1m20s of the run, which starts at the virtual clock's fixed start.
    backoffs = [line for line in err.splitlines() if "event='node_group_backoff'" in line]
    assert [STAMP.search(line).group(1) for line in backoffs] == [  # type: ignore[union-attr]
        "2024-01-01T00:01:10Z",
        "2024-01-01T00:01:20Z",
    ]
    assert "00:01:10  cleanup     spot-zone-b" in out


def test_info_logs_are_not_split_onto_the_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    # --log-text-split-stream sends info lines to stdout in `run`; stdout is the timeline here.
    assert main(["simulate", SPOT_OUTAGE, "--v=2", "--duration=2m",
                 "--feature-gates=LoggingAlphaOptions=true", "--log-text-split-stream"]) == 0
    out, err = capsys.readouterr()
    assert "level=" not in out
    assert "level='info'" in err
    assert all(s.startswith("2024-01-01T00:0") for s in STAMP.findall(err))


def test_explain_logs_in_the_snapshot_time(capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = str(EXAMPLES / "snapshots" / "small-cluster.json")
    config = str(EXAMPLES / "cloud-configs" / "general.yaml")
    assert main(["explain", "--snapshot", snapshot, "--cloud-config", config, "--v=2"]) == 0
    out, err = capsys.readouterr()
    assert "level=" not in out
    # The loop's lines read the snapshot's time (its newest timestamp), not today's.
    assert set(STAMP.findall(err)) == {"2024-05-01T10:30:00Z"}
