"""The log contracts of `clusterscaler run`, with the API server unreachable (a kubeconfig
for a closed port on 127.0.0.1): at most 60 lines, standard output and error together, in
its first 10 seconds; in the text format every line starts with klog's header; in the JSON
format every line is one JSON object with at least `ts` and `msg`.

The informers, the leader election and the HTTP retries all fail over and over there: the
repetitions are counted, not written, and the counts come when the burst ends (at the
latest when the process stops)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import yaml
from clusterscaler.testing.cliprocess import ClusterscalerProcess
from clusterscaler.testing.controlplane import free_port

KLOG_HEADER = re.compile(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ [^ ]+:\d+\] ")
FIRST_SECONDS = 10.0
MOST_LINES = 60
CLOUD_CONFIG = {
    "nodeGroups": [
        {
            "name": "general",
            "minSize": 0,
            "maxSize": 3,
            "template": {"status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}},
        }
    ]
}


def unreachable_kubeconfig(path: Path) -> None:
    closed = free_port()  # bound for a moment, then closed: nothing listens there
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "gone", "cluster": {"server": f"https://127.0.0.1:{closed}",
                                                          "insecure-skip-tls-verify": True}}],
                "users": [{"name": "gone", "user": {"token": "unused"}}],
                "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "gone"}}],
                "current-context": "gone",
            }
        )
    )  # fmt: skip


def run_unreachable(tmp_path: Path, *flags: str) -> tuple[str, str]:
    """What the autoscaler wrote in its first 10 seconds, and in all until it stopped."""
    unreachable_kubeconfig(tmp_path / "kubeconfig")
    (tmp_path / "cloud.yaml").write_text(yaml.safe_dump(CLOUD_CONFIG))
    args = [
        f"--kubeconfig={tmp_path / 'kubeconfig'}",
        f"--cloud-config={tmp_path / 'cloud.yaml'}",
        f"--address=127.0.0.1:{free_port()}",
        *flags,
    ]
    with ClusterscalerProcess(args, log=tmp_path / "run.log") as run:
        started = time.monotonic()
        time.sleep(FIRST_SECONDS)
        first = run.output()
        assert run.returncode is None, f"it stopped within {FIRST_SECONDS}s:\n{run.tail()}"
        assert time.monotonic() - started < FIRST_SECONDS + 1, "the machine was too busy to read in time"
    assert run.returncode == 0, run.tail()
    return first, run.output()


def assert_quiet_but_telling(first: str, everything: str, unreachable: str) -> None:
    lines = first.splitlines()
    assert len(lines) <= MOST_LINES, f"{len(lines)} lines in {FIRST_SECONDS}s:\n{first}"
    # Not quiet for want of trying: the failures are there, once each, and their
    # repetitions are counted.
    assert unreachable in first, first
    assert "repeated" in everything, everything


def test_text_lines_are_few_and_all_klog(tmp_path: Path) -> None:
    first, everything = run_unreachable(tmp_path)
    assert_quiet_but_telling(first, everything, '"informer_error" resource="nodes"')
    for line in everything.splitlines():
        assert KLOG_HEADER.match(line), line
    assert re.search(r' repeated=\d+$', everything, re.MULTILINE), everything


@pytest.mark.parametrize("leader_elect", ["true", "false"])
def test_json_lines_are_few_and_all_json(tmp_path: Path, leader_elect: str) -> None:
    first, everything = run_unreachable(
        tmp_path, "--logging-format=json", f"--leader-elect={leader_elect}"
    )
    assert_quiet_but_telling(first, everything, '"msg":"informer_error"')
    for line in everything.splitlines():
        entry = json.loads(line)
        assert isinstance(entry, dict) and {"ts", "msg"} <= entry.keys(), line
        # Milliseconds since the epoch, with the microseconds as the fraction (none when 0).
        assert isinstance(entry["ts"], int | float) and entry["ts"] > 1e12, line
        assert isinstance(entry["msg"], str), line
    assert any("repeated" in json.loads(line) for line in everything.splitlines())
