"""A one-shot command run as the process (`main()` with the process's own arguments) holds
the cyclic collector off and freezes what it built before the interpreter exits; its output
is that of the same command run in-process, where the collector is left as it was."""

from __future__ import annotations

import contextlib
import gc
import io
import subprocess
import sys
from pathlib import Path

import pytest
from clusterscaler.commands.cli import main

ROOT = Path(__file__).resolve().parents[3]
EKS_SNAPSHOT = str(ROOT / "examples" / "snapshots" / "eks-cluster.json")
EKS_GROUPS = str(ROOT / "examples" / "cloud-configs" / "eks-nodegroups.yaml")

CASES = [
    ["simulate", "--snapshot", EKS_SNAPSHOT, "--cloud-config", EKS_GROUPS, "--once", "--json"],
    ["simulate", "--snapshot", EKS_SNAPSHOT, "--cloud-config", EKS_GROUPS, "--once"],
    ["explain", "--snapshot", EKS_SNAPSHOT, "--cloud-config", EKS_GROUPS, "--json"],
    ["plugins", "--json"],
]


def in_process(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


@pytest.mark.parametrize("argv", CASES, ids=["simulate-once-json", "simulate-once",
                                              "explain-json", "plugins-json"])
def test_the_process_prints_what_the_command_prints_in_process(
    argv: list[str], tmp_path: Path
) -> None:
    frozen = gc.get_freeze_count()
    code, stdout = in_process(argv)
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen

    done = subprocess.run([sys.executable, "-m", "clusterscaler", *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout) == (code, stdout), done.stderr
    assert stdout


def test_the_process_runs_its_exit_handlers_and_flushes_its_files(tmp_path: Path) -> None:
    # A log file written through `logging` is flushed and closed by its exit handler.
    log_file = tmp_path / "simulate.log"
    argv = ["simulate", "--snapshot", EKS_SNAPSHOT, "--cloud-config", EKS_GROUPS, "--once",
            "--json", "--v=2", "--logtostderr=false", f"--log-file={log_file}"]
    done = subprocess.run([sys.executable, "-m", "clusterscaler", *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert '"scaleUp"' in done.stdout
    assert log_file.read_text(encoding="utf-8").strip()
