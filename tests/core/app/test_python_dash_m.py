"""`python -m clusterscaler` is the `clusterscaler` console script: same output, same exit
status."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = Path(sys.executable).parent / "clusterscaler"
EKS_SNAPSHOT = str(ROOT / "examples" / "snapshots" / "eks-cluster.json")
EKS_GROUPS = str(ROOT / "examples" / "cloud-configs" / "eks-nodegroups.yaml")

CASES = [
    (["--version"], 0, "clusterscaler "),
    (["--no-such-flag"], 2, "clusterscaler: error:"),
    (["--cloud-provider=nonexistent"], 2, "expected one of the installed cloud providers"),
    (["explain", "--snapshot", "/nonexistent/snapshot.json", "--cloud-config", EKS_GROUPS], 2,
     "clusterscaler explain: error: --snapshot"),
    (["simulate", "--snapshot", EKS_SNAPSHOT, "--cloud-config", EKS_GROUPS, "--once", "--json"],
     0, '"nodeGroup": "memory"'),
]


# The klog header's pid differs between two processes; the rest of each line must not.
KLOG_PID = re.compile(r"^([IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +)\d+ ", re.MULTILINE)


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60,
                          check=False)
    done.stderr = KLOG_PID.sub(r"\1PID ", done.stderr)
    return done


@pytest.mark.parametrize(
    ("argv", "status", "expected"), CASES, ids=["version", "bad-flag", "bad-provider",
                                                "missing-snapshot", "simulate-once"]
)
def test_module_behaves_like_the_console_script(
    argv: list[str], status: int, expected: str, tmp_path: Path
) -> None:
    assert SCRIPT.exists(), f"console script {SCRIPT} is not installed"
    module = run([sys.executable, "-m", "clusterscaler", *argv], tmp_path)
    script = run([str(SCRIPT), *argv], tmp_path)

    assert module.returncode == status, module.stderr
    assert expected in module.stdout + module.stderr
    assert (module.returncode, module.stdout, module.stderr) == (
        script.returncode,
        script.stdout,
        script.stderr,
    )
