"""Running a bench worker (`python -m <module> --worker DIR`) in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class WorkerOutcome:
    """The worker's JSON document (its last line of output), or why there is none."""

    doc: dict[str, Any] | None = None
    error: str = ""
    traceback: str = ""


def run_worker(
    module: str, directory: Path, repeat: int, profile_dir: Path | None, timeout: float
) -> WorkerOutcome:
    """Run `python -m module --worker directory --repeat N` from the repository root."""
    args = ["--worker", str(directory), "--repeat", str(repeat)]
    if profile_dir is not None:
        args += ["--profile", str(profile_dir)]
    return run_module(module, args, timeout)


def run_module(module: str, args: list[str], timeout: float) -> WorkerOutcome:
    """Run `python -m module ARGS` from the repository root; its last line of output is
    the document."""
    cmd = [sys.executable, "-m", module, *args]
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "PYTHONPATH": path}
    try:
        proc = subprocess.run(
            cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return WorkerOutcome(error=f"timed out after {timeout:g} s")
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return WorkerOutcome(
            error=f"worker exited with {proc.returncode}: {lines[-1] if lines else ''}",
            traceback="\n".join(lines[-30:]),
        )
    return WorkerOutcome(doc=json.loads(proc.stdout.strip().splitlines()[-1]))
