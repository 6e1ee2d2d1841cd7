"""docs/proportional.md stays true to the flags and parameters the code accepts."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

import pytest
from clusterscaler.proportional import params as params_module
from clusterscaler.proportional.cli import build_calc_parser, build_controller_parser, main
from clusterscaler.proportional.params import ParamsError, parse_configmap_data

DOC_DIR = Path(__file__).resolve().parents[3] / "docs"
DOC = (DOC_DIR / "proportional.md").read_text()


def visible_flags(parser: argparse.ArgumentParser) -> list[str]:
    return [
        option
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]


FLAGS = sorted(set(visible_flags(build_controller_parser()) + visible_flags(build_calc_parser())))


@pytest.mark.parametrize("flag", FLAGS)
def test_every_flag_is_documented(flag):
    assert f"`{flag}`" in DOC, f"docs/proportional.md does not document {flag}"


@pytest.mark.parametrize("key", sorted({*params_module._LINEAR_KEYS, *params_module._LADDER_KEYS}))
def test_every_parameter_is_documented(key):
    assert f"`{key}`" in DOC


ERRORS = re.findall(r"^ConfigMap \S+: invalid parameters: (.+)$", DOC, flags=re.MULTILINE)

# Inputs that produce each documented error message, in the order the doc lists them.
ERROR_INPUTS = [
    {"linear": json.dumps({"nodesPerReplica": 1, "min": 3, "max": 2})},
    {"ladder": json.dumps({"coresToReplicas": [[1, 1], [64, 3], [512]]})},
    {"linear": "{}", "ladder": "{}"},
]


def test_documented_errors_are_the_real_messages():
    assert len(ERRORS) == len(ERROR_INPUTS)
    for data, documented in zip(ERROR_INPUTS, ERRORS, strict=True):
        with pytest.raises(ParamsError) as info:
            parse_configmap_data(data)
        assert str(info.value) == documented


def documented_calc_runs() -> list[tuple[str, list[str], str]]:
    """Every `$ clusterscaler proportional calc ...` example with the output shown under it."""
    runs = []
    docs = ("proportional.md", "overprovisioning.md")
    for doc in docs:
        text = (DOC_DIR / doc).read_text()
        for block in re.findall(r"```sh\n(\$ clusterscaler proportional calc.*?)\n```", text, re.S):
            command, _, output = block.rpartition("\n")
            argv = shlex.split(command.removeprefix("$ ").replace("\\\n", " "))
            runs.append((doc, argv[2:], output))
    return runs


RUNS = documented_calc_runs()


def test_there_are_documented_runs():
    assert {doc for doc, _, _ in RUNS} == {"proportional.md", "overprovisioning.md"}


@pytest.mark.parametrize(
    ("argv", "output"), [r[1:] for r in RUNS], ids=[f"{r[0]}-{i}" for i, r in enumerate(RUNS)]
)
def test_documented_calc_output_is_real(capsys, argv, output):
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == output
