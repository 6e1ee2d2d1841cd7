from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from clusterscaler.proportional.cli import calc_main, main

LINEAR = '{"linear": {"coresPerReplica": 2, "nodesPerReplica": 1}}'


def run_calc(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = calc_main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


CALC_OK = [
    ("linear-readme", [LINEAR, "4", "13"], [], 7),
    (
        "linear-schedulable-counts-used",
        [LINEAR, "10", "40"],
        ["--schedulable-nodes", "3", "--schedulable-cores", "6"],
        3,
    ),
    (
        "linear-include-unschedulable",
        ['{"linear": {"nodesPerReplica": 1, "includeUnschedulableNodes": true}}', "10", "40"],
        ["--schedulable-nodes", "3", "--schedulable-cores", "6"],
        10,
    ),
    ("ladder-zero", ['{"ladder": {"nodesToReplicas": [[0, 0], [6, 1]]}}', "5", "20"], [], 0),
    (
        "configmap-string-form",
        ['{"ladder": "{\\"nodesToReplicas\\": [[0, 0], [6, 1]]}"}', "6", "24"],
        [],
        1,
    ),
]


@pytest.mark.parametrize(
    ("positional", "extra", "expected"),
    [c[1:] for c in CALC_OK],
    ids=[c[0] for c in CALC_OK],
)
def test_calc_prints_replicas_json(positional, extra, expected):
    params, nodes, cores = positional
    code, out, err = run_calc("--params", params, "--nodes", nodes, "--cores", cores, *extra)
    assert code == 0, err
    assert json.loads(out) == {"replicas": expected}
    assert out.strip() == json.dumps({"replicas": expected})


CALC_BAD = [
    ("bad-json", ["--params", "{", "--nodes", "1", "--cores", "1"], "invalid params: params"),
    (
        "invalid-linear",
        ["--params", '{"linear": {"min": 2}}', "--nodes", "1", "--cores", "1"],
        "invalid params: linear: expected coresPerReplica or nodesPerReplica",
    ),
    (
        "bad-step",
        ["--params", '{"ladder": {"coresToReplicas": [[1]]}}', "--nodes", "1", "--cores", "1"],
        "ladder.coresToReplicas[0]",
    ),
    (
        "unknown-mode",
        ["--params", '{"cubic": {}}', "--nodes", "1", "--cores", "1"],
        "cubic: unknown control mode",
    ),
    (
        "negative-nodes",
        ["--params", LINEAR, "--nodes", "-1", "--cores", "1"],
        "argument --nodes: expected an integer >= 0, got '-1'",
    ),
    (
        "word-cores",
        ["--params", LINEAR, "--nodes", "1", "--cores", "many"],
        "argument --cores: expected an integer >= 0, got 'many'",
    ),
    ("missing-cores", ["--params", LINEAR, "--nodes", "1"], "--cores"),
    (
        "schedulable-above-total",
        ["--params", LINEAR, "--nodes", "2", "--cores", "8", "--schedulable-nodes", "3"],
        "argument --schedulable-nodes: expected at most --nodes (2), got 3",
    ),
    (
        "schedulable-cores-above-total",
        ["--params", LINEAR, "--nodes", "2", "--cores", "8", "--schedulable-cores", "9"],
        "argument --schedulable-cores: expected at most --cores (8), got 9",
    ),
]


@pytest.mark.parametrize(
    ("argv", "message"), [c[1:] for c in CALC_BAD], ids=[c[0] for c in CALC_BAD]
)
def test_calc_errors_exit_2_with_message(argv, message):
    code, out, err = run_calc(*argv)
    assert code == 2
    assert out == ""
    assert message in err


def test_calc_warns_about_unknown_keys_on_stderr_only():
    code, out, err = run_calc(
        "--params", '{"linear": {"nodesPerReplica": 1, "mni": 3}}', "--nodes", "2", "--cores", "2"
    )
    assert code == 0
    assert json.loads(out) == {"replicas": 2}
    assert "ignoring unknown keys mni" in err


def test_main_dispatches_calc(capsys):
    assert main(["calc", "--params", LINEAR, "--nodes", "4", "--cores", "13"]) == 0
    assert json.loads(capsys.readouterr().out) == {"replicas": 7}


def test_calc_help_exits_0(capsys):
    assert main(["calc", "--help"]) == 0
    assert "--schedulable-nodes" in capsys.readouterr().out


def test_calc_as_a_process():
    # The exit status is what shell scripts and CI checks see.
    code = (
        "import sys; from clusterscaler.proportional.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    ok = subprocess.run(
        [sys.executable, "-c", code, "calc", "--params", LINEAR, "--nodes", "4", "--cores", "13"],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert (ok.returncode, json.loads(ok.stdout)) == (0, {"replicas": 7})
    bad = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "calc",
            "--params",
            '{"linear": {}}',
            "--nodes",
            "1",
            "--cores",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert bad.returncode == 2
    assert "linear" in bad.stderr


def test_calc_explain_shows_each_dimension():
    code, out, _ = run_calc(
        "--params",
        '{"linear": {"coresPerReplica": 2, "nodesPerReplica": 1, "max": 5}}',
        "--nodes",
        "10",
        "--cores",
        "40",
        "--schedulable-nodes",
        "4",
        "--schedulable-cores",
        "13",
        "--explain",
    )
    assert code == 0
    assert json.loads(out) == {
        "replicas": 5,
        "mode": "linear",
        "nodes": 4,
        "cores": 13,
        "includeUnschedulableNodes": False,
        "replicasFromNodes": 4,
        "replicasFromCores": 5,
        "decidedBy": "coresPerReplica",
    }


def test_calc_explain_names_prevent_single_point_failure_when_it_raised_the_result():
    code, out, _ = run_calc(
        "--params",
        '{"linear": {"nodesPerReplica": 16, "preventSinglePointFailure": true}}',
        "--nodes",
        "3",
        "--cores",
        "12",
        "--explain",
    )
    assert code == 0
    doc = json.loads(out)
    assert (doc["replicas"], doc["replicasFromNodes"], doc["decidedBy"]) == (
        2,
        1,
        "preventSinglePointFailure",
    )
