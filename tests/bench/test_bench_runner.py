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
    # The whole `clusterscaler simulate` process, timed once per run, over the floor.
    assert len(row["seconds"]["processRuns"]) == 1
    assert row["seconds"]["process"] > row["seconds"]["total"]
    assert row["floorRatio"] == pytest.approx(row["seconds"]["process"] / row["seconds"]["floor"])
    assert row["peakRssBytes"] >= row["baseRssBytes"] > 0
    assert (tmp_path / "scale-down-2k-x0.0025-seed9" / "snapshot.json").is_file()


def test_a_decision_that_differs_from_the_expected_one_fails_the_run() -> None:
    measured = run.Measurement(name="scale-up-50k", total=[1.0], floor=[0.5], json_floor=[0.5])
    measured.expected = Expected(scale_up_nodes=1000)
    measured.decision = Decision(scale_up_nodes=999)
    measured.problems = check(measured.expected, measured.decision)
    assert not measured.ok
    table = run.render_table([measured], 1.0)
    assert "MISMATCH: scale-up: expected +1000 nodes, got +999" in table
    assert "< 3 s and < 3x json.load: MET" in table


def test_targets_are_judged_on_the_median_and_the_floor_ratio() -> None:
    half = [0.5, 0.5, 0.5]
    slow = run.Measurement(name="scale-up-50k", total=[2.0, 2.5, 9.0], json_floor=half)
    assert run.target_verdict(slow, 1.0).endswith("NOT MET")  # 2.5 s but 5x json.load
    fast = run.Measurement(name="scale-up-50k", total=[1.0, 1.2, 9.0], json_floor=half)
    assert run.target_verdict(fast, 1.0).endswith(": MET")
    assert "the target is for scale 1" in run.target_verdict(fast, 0.1)


def test_real_rows_judge_the_whole_process_over_the_msgspec_floor() -> None:
    within = run.Measurement(
        name="real-scale-up-50k", total=[0.5], loop=[0.3], floor=[1.0], process=[2.9, 3.0, 3.5]
    )
    assert run.target_verdict(within, 1.0) == "process <= 3x floor: MET"
    over = run.Measurement(
        name="real-scale-up-150k", total=[0.5], loop=[0.3], floor=[1.0], process=[2.6]
    )
    assert run.target_verdict(over, 1.0) == "process <= 2.5x floor: NOT MET"
    loop = run.Measurement(name="scale-down-2k-real", total=[9.0], loop=[3.0, 2.0, 3.1])
    assert run.target_verdict(loop, 1.0) == "loop <= 3 s: MET"


def test_two_rows_of_a_family_are_judged_from_the_smallest_in_every_run() -> None:
    small = run.Measurement(name="real-scale-up-10k", pods=10_000, loop=[1.0, 1.0, 1.0])
    # Per pod, run by run: x1.0, x1.2, x1.3 (the median, x1.2, would pass).
    large = run.Measurement(name="real-scale-up-150k", pods=150_000, loop=[15.0, 18.0, 19.5])
    head, line = run.scaling_verdicts({m.name: m for m in (small, large)})
    assert head.startswith("(21) real scale-up: 10,000 pods 100.0 us/pod loop")
    assert "x1.00, x1.20, x1.30 by run" in line
    assert line.endswith("NOT MET (2 runs out of 3)")
    large.loop = [15.0, 18.0, 18.7]
    _, line = run.scaling_verdicts({m.name: m for m in (small, large)})
    assert line.endswith(": MET (3 runs out of 3)")


def test_linearity_shows_the_memory_reference_beside_the_ratio() -> None:
    # The reference's growth is context for the reader; it does not change the verdict.
    small = run.Measurement(
        name="burst-pods-10k", pods=10_000, loop=[1.0, 1.0, 1.0], reference=[0.2, 0.1, 0.3]
    )
    large = run.Measurement(
        name="burst-pods-100k", pods=100_000, loop=[13.0, 13.0, 13.0], reference=[1.8, 2.0]
    )
    _, line = run.scaling_verdicts({m.name: m for m in (small, large)})
    assert line.endswith(
        "NOT MET (0 runs out of 3); memory reference (one pass building each pod's key) x1.80"
    )


def _burst(loop_50k: list[float], loop_100k: list[float], calls_100k: int) -> list[str]:
    rows = [
        # Inside the caches the smallest row is faster per pod: x1.4 to the largest.
        run.Measurement(name="burst-pods-10k", pods=10_000, loop=[1.0, 1.0], loop_calls=80_000),
        run.Measurement(name="burst-pods-50k", pods=50_000, loop=loop_50k),
        run.Measurement(
            name="burst-pods-100k", pods=100_000, loop=loop_100k, loop_calls=calls_100k
        ),
    ]
    return run.scaling_verdicts({m.name: m for m in rows})


def test_three_rows_are_judged_past_the_caches_and_on_the_work() -> None:
    head, verdict, inside = _burst([6.5, 7.0], [14.0, 14.0], calls_100k=820_000)
    assert head.startswith("(3) burst: 10,000 pods 100.0 us/pod loop")
    assert verdict == (
        "  target 3 (linear): loop per-pod cost from 50,000 pods x1.08, x1.00 by run "
        "(<= x1.25: 2 runs out of 2); function calls per pod from 10,000 pods 8.0 -> 8.2 "
        "(x1.02, <= x1.1): MET"
    )
    assert inside == (
        "  from 10,000 pods, inside the caches: loop per-pod cost x1.40, x1.40 by run "
        "(<= x1.25: 0 runs out of 2)"
    )


def test_past_the_caches_one_slow_run_fails_the_target() -> None:
    _, verdict, _ = _burst([7.0, 7.0], [14.0, 19.0], calls_100k=820_000)
    assert "x1.00, x1.36 by run (<= x1.25: 1 runs out of 2)" in verdict
    assert verdict.endswith(": NOT MET")


def test_work_growing_per_pod_fails_the_target_whatever_the_time() -> None:
    # 9.6 calls a pod at the largest row against 8.0: the loop does more per pod.
    _, verdict, _ = _burst([7.0, 7.0], [14.0, 14.0], calls_100k=960_000)
    assert "8.0 -> 9.6 (x1.20, <= x1.1): NOT MET" in verdict
    _, verdict, _ = _burst([7.0, 7.0], [14.0, 14.0], calls_100k=0)
    assert verdict.endswith("function calls per pod not counted: NOT MET")


def test_a_pair_is_measured_again_in_turns_in_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = run.main([
        "--only", "dra-claims-10k", "--only", "dra-plain-10k", "--scale", "0.01",
        "--repeat", "2", "--json", "--data-dir", str(tmp_path),
    ])
    doc = json.loads(capsys.readouterr().out)
    assert status == 0
    (measured,) = doc["pairMeasurements"]
    assert (measured["row"], measured["baseline"]) == ("dra-claims-10k", "dra-plain-10k")
    assert measured["error"] == "" and measured["consistent"] is True
    # Two rounds after the first, each side's loop timed once per round.
    assert len(measured["rowCpu"]) == len(measured["baselineCpu"]) == len(measured["ratios"]) == 2
    assert measured["firstRowCpu"] > 0 and measured["firstBaselineCpu"] > 0
    (line,) = doc["pairs"]
    assert line.startswith("dra-claims-10k / dra-plain-10k") and "loop CPU in turns" in line


def test_a_pair_is_judged_on_its_loops_in_turns_not_on_the_rows_own_runs() -> None:
    (pair,) = run.PAIRS
    # The rows' own runs, minutes apart on a loaded machine, say x3; the loops in turns x1.5.
    results = {
        pair.row: run.Measurement(name=pair.row, loop=[0.3] * 3, loop_cpu=[0.3] * 3),
        pair.baseline: run.Measurement(name=pair.baseline, loop=[0.1] * 3, loop_cpu=[0.1] * 3),
    }
    met = run.PairMeasurement(pair, row_cpu=[0.15, 0.16, 0.3], baseline_cpu=[0.1, 0.1, 0.1],
                              first_row_cpu=0.3, first_baseline_cpu=0.1)
    (line,) = run.pair_verdicts(results, [met])
    assert "median x1.60 (<= x2): MET" in line and "the rows' own runs x3.00 by CPU" in line
    missed = run.PairMeasurement(pair, row_cpu=[0.25, 0.21, 0.1], baseline_cpu=[0.1, 0.1, 0.1])
    (line,) = run.pair_verdicts(results, [missed])
    assert "median x2.10 (<= x2): NOT MET" in line
