"""`clusterscaler` as a process for end-to-end tests (`clusterscaler.testing.cliprocess`):
its output goes to the log, and a wait ends at once, naming what it waited for and with
the end of the output, when the process exits first."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from clusterscaler.testing.cliprocess import ClusterscalerProcess, clusterscaler_command


def test_the_command_runs_the_cli() -> None:
    proc = subprocess.run([*clusterscaler_command(), "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0 and "usage: clusterscaler" in proc.stdout


def test_a_wait_fails_when_the_process_exits_first(tmp_path: Path) -> None:
    log = tmp_path / "help.log"
    with ClusterscalerProcess(["--help"], log=log) as run, pytest.raises(AssertionError) as failure:
        run.wait_for("something that never happens", lambda: False, 60)
    message = str(failure.value)
    assert message.startswith("clusterscaler exited with 0 while waiting for something that never happens")
    assert "usage: clusterscaler" in message
    assert run.returncode == 0
    assert run.output() == log.read_text() and "usage: clusterscaler" in run.output()


def test_a_wait_that_holds_returns_without_a_tick(tmp_path: Path) -> None:
    ticks: list[int] = []
    with ClusterscalerProcess(["--help"], log=tmp_path / "help.log") as run:
        run.wait_for("nothing", lambda: True, 60, tick=lambda: ticks.append(1))
    assert ticks == []
    assert run.returncode is not None  # stopped at the end of the with-statement


def test_the_process_is_there_only_once_started(tmp_path: Path) -> None:
    run = ClusterscalerProcess(["--help"], log=tmp_path / "help.log")
    with pytest.raises(RuntimeError, match="not started"):
        _ = run.returncode
