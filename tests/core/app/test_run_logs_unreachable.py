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
from datetime import datetime
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


def run_unreachable(tmp_path: Path, *flags: str) -> tuple[float, list[str]]:
    """When the autoscaler started (epoch seconds), and every line it wrote until it was
    stopped, 10 seconds later."""
    unreachable_kubeconfig(tmp_path / "kubeconfig")
    (tmp_path / "cloud.yaml").write_text(yaml.safe_dump(CLOUD_CONFIG))
    args = [
        f"--kubeconfig={tmp_path / 'kubeconfig'}",
        f"--cloud-config={tmp_path / 'cloud.yaml'}",
        f"--address=127.0.0.1:{free_port()}",
        *flags,
    ]
    started = time.time()
    with ClusterscalerProcess(args, log=tmp_path / "run.log") as run:
        time.sleep(FIRST_SECONDS)
        assert run.returncode is None, f"it stopped within {FIRST_SECONDS}s:\n{run.tail()}"
    assert run.returncode == 0, run.tail()
    return started, run.output().splitlines()


def klog_time(line: str) -> float:
    """The epoch seconds of a klog header (local time, no year: this year's)."""
    stamp = datetime.strptime(f"{datetime.now().year}{line[1:21]}", "%Y%m%d %H:%M:%S.%f")
    return stamp.timestamp()


def assert_quiet_but_telling(lines: list[str], times: list[float], started: float, unreachable: str) -> None:
    first = [line for line, at in zip(lines, times, strict=True) if at < started + FIRST_SECONDS]
    text = "\n".join(first)
    assert len(first) <= MOST_LINES, f"{len(first)} lines in {FIRST_SECONDS}s:\n{text}"
    # Not quiet for want of trying: the failures are there, once each, and their
    # repetitions are counted (the counts come at the latest when it stops).
    assert unreachable in text, text
    assert any("repeated" in line for line in lines), "\n".join(lines)


def test_text_lines_are_few_and_all_klog(tmp_path: Path) -> None:
    started, lines = run_unreachable(tmp_path)
    for line in lines:
        assert KLOG_HEADER.match(line), line
    assert_quiet_but_telling(lines, [klog_time(line) for line in lines], started, '"informer_error" resource="nodes"')
    assert any(re.search(r" repeated=\d+$", line) for line in lines)


@pytest.mark.parametrize("leader_elect", ["true", "false"])
def test_json_lines_are_few_and_all_json(tmp_path: Path, leader_elect: str) -> None:
    started, lines = run_unreachable(tmp_path, "--logging-format=json", f"--leader-elect={leader_elect}")
    entries = []
    for line in lines:
        entry = json.loads(line)
        assert isinstance(entry, dict) and {"ts", "msg"} <= entry.keys(), line
        # Milliseconds since the epoch, with the microseconds as the fraction (none when 0).
        assert isinstance(entry["ts"], int | float) and isinstance(entry["msg"], str), line
        entries.append(entry)
    times = [entry["ts"] / 1000 for entry in entries]
    assert all(started - 1 < at < started + 120 for at in times), times  # milliseconds indeed
    assert_quiet_but_telling(lines, times, started, '"msg":"informer_error"')
    assert any("repeated" in entry for entry in entries)
