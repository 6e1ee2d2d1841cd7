"""`clusterscaler --version`: the version, the commit built from, the upstream release kept."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from clusterscaler import __version__, buildinfo
from clusterscaler.commands.cli import main


def test_version_names_the_commit_and_the_upstream_release(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"clusterscaler {__version__}"
    # This checkout's HEAD: the editable install asks git.
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).parent, check=True).stdout.strip()
    assert lines[1] == f"commit: {head}"
    assert re.fullmatch(r"upstream: Cluster Autoscaler \d+\.\d+\.\d+ .*chart cluster-autoscaler "
                        r"\d+\.\d+\.\d+ \(values\)", lines[2])


def test_a_built_wheel_reads_its_recorded_commit(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = tmp_path / "build.json"
    recorded.write_text(json.dumps({"commit": "0123abc"}))
    monkeypatch.setattr(buildinfo, "BUILD_FILE", recorded)
    assert buildinfo.commit() == "0123abc"
    recorded.write_text("not json")
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", buildinfo.commit())
