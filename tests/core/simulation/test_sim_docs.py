"""docs/simulate.md and docs/explain.md stay true to the commands."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from clusterscaler.commands import explain
from clusterscaler.commands import simulate as command
from clusterscaler.commands.cli import main
from clusterscaler.interfaces.podfilter import BlockingPodReason
from clusterscaler.loop.decisions import NoScaleUpReason, UnremovableReason
from clusterscaler.offline import scenario

ROOT = Path(__file__).resolve().parents[3]
SIMULATE = (ROOT / "docs" / "simulate.md").read_text()
EXPLAIN = (ROOT / "docs" / "explain.md").read_text()


def own_flags(add_arguments) -> list[str]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return [
        opt for action in parser._actions for opt in action.option_strings if opt.startswith("--") and opt != "--help"
    ]


@pytest.mark.parametrize("flag", own_flags(command.add_arguments))
def test_simulate_flags_are_documented(flag: str) -> None:
    assert f"`{flag}`" in SIMULATE


@pytest.mark.parametrize("flag", own_flags(explain.add_arguments))
def test_explain_flags_are_documented(flag: str) -> None:
    assert f"`{flag}`" in EXPLAIN


@pytest.mark.parametrize("key", sorted(scenario._SCENARIO_KEYS | scenario._WORKLOAD_KEYS))
def test_scenario_fields_are_documented(key: str) -> None:
    assert f"`{key}" in SIMULATE


@pytest.mark.parametrize("action", scenario._EVENT_ACTIONS)
def test_event_actions_are_documented(action: str) -> None:
    assert f"`{action}:" in SIMULATE


@pytest.mark.parametrize("path", sorted(p.name for p in (ROOT / "examples" / "scenarios").glob("*.yaml")))
def test_every_example_scenario_is_documented(path: str) -> None:
    assert f"examples/scenarios/{path}" in SIMULATE


@pytest.mark.parametrize(
    "reason",
    [r.value for r in NoScaleUpReason]
    + [r.value for r in UnremovableReason if r is not UnremovableReason.NO_REASON]
    + [r.value for r in BlockingPodReason if r is not BlockingPodReason.NO_REASON],
)
def test_every_reason_is_explained(reason: str) -> None:
    assert f"`{reason}" in EXPLAIN


def test_documented_outputs_are_real(capsys: pytest.CaptureFixture[str]) -> None:
    examples = ROOT / "examples"
    assert main(["explain", "--snapshot", str(examples / "snapshots" / "small-cluster.json"),
                 "--cloud-config", str(examples / "cloud-configs" / "general.yaml")]) == 0
    assert capsys.readouterr().out.rstrip("\n") in EXPLAIN
    assert main(["simulate", str(examples / "scenarios" / "burst-scale-up.yaml")]) == 0
    out = capsys.readouterr().out
    table = SIMULATE.split("```text\n", 1)[1].split("```", 1)[0]
    assert table in out
