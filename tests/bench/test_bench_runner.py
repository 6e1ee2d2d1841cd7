"""The benchmark runner runs a tiny scenario end to end in a worker process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import run
from bench.scenarios import Decision, Expected, check


def test_runner_measures_a_tiny_scale_down_and_checks_its_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 2,000 nodes at scale 0.0025: 5 nodes of 40 pods; 3 of them must be marked for removal.
    status = run.main(
        [
            "--only",
            "scale-down-2k",
            "--scale",
            "0.0025",
            "--repeat",
            "1",
            "--json",
            "--data-dir",
            str(tmp_path),
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert status == 0
    (row,) = doc["scenarios"]
    assert row["error"] == ""
    assert row["nodes"] == 5
    assert row["pods"] == 200
    assert row["matches"] is True
    assert row["decision"]["deleted_nodes"] == 3
    assert len(row["seconds"]["totalRuns"]) == 1
    assert row["seconds"]["floor"] > 0
    assert row["seconds"]["total"] >= row["seconds"]["floor"]
    assert row["peakRssBytes"] >= row["baseRssBytes"] > 0
    assert (tmp_path / "scale-down-2k-x0.0025-seed9" / "snapshot.json").is_file()


def test_a_decision_that_differs_from_the_expected_one_fails_the_run() -> None:
    measured = run.Measurement(name="scale-up-50k", total=[1.0], floor=[0.5])
    measured.expected = Expected(scale_up_nodes=1000)
    measured.decision = Decision(scale_up_nodes=999)
    measured.problems = check(measured.expected, measured.decision)
    assert not measured.ok
    table = run.render_table([measured], 1.0)
    assert "MISMATCH: scale-up: expected +1000 nodes, got +999" in table
    assert "< 3 s and < 3x floor: met" in table


def test_targets_are_judged_on_the_median_and_the_floor_ratio() -> None:
    slow = run.Measurement(name="scale-up-50k", total=[2.0, 2.5, 9.0], floor=[0.5, 0.5, 0.5])
    assert run.target_verdict(slow, 1.0).endswith("NOT MET")  # 2.5 s but 5x the floor
    fast = run.Measurement(name="scale-up-50k", total=[1.0, 1.2, 9.0], floor=[0.5, 0.5, 0.5])
    assert run.target_verdict(fast, 1.0).endswith(": met")
    assert "n/a" in run.target_verdict(fast, 0.1)
