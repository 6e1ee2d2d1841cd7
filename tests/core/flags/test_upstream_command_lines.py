"""Cluster Autoscaler command lines from upstream (its AWS example manifest, its Helm chart's
default rendering for aws and clusterapi, its FAQ) parse unchanged and start the autoscaler.

To start, the process gets only what the test machine needs around the command line: the
fake API server through `$KUBECONFIG` (a pod would use its service account), moto through
the AWS environment, `--address` on a free port (8085 may be taken here), and, where the
command line names no cloud provider, a cloud-config for the embedded `sim` provider.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.commands.cli import load_plugins, parse_autoscaler_args
from clusterscaler.testing.fakekube import FakeKubeServer, cluster_api_resources

HERE = Path(__file__).resolve().parent
LINES = yaml.safe_load((HERE / "upstream_command_lines.yaml").read_text())["command_lines"]
EXECUTABLE = str(Path(sys.executable).with_name("clusterscaler"))
SIM_CONFIG = {
    "nodeGroups": [
        {
            "name": "general",
            "minSize": 0,
            "maxSize": 3,
            "template": {"status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}},
        }
    ]
}


@pytest.mark.parametrize("name", sorted(LINES))
def test_parses_unchanged(name: str) -> None:
    args = LINES[name]["args"]
    host, registry = load_plugins(args)
    options, ns = parse_autoscaler_args(args, host, registry, warn=False)
    assert ns.startup_warnings == []  # every value is one we honour
    if "--v=4" in args:
        assert options.v == 4
    if "--stderrthreshold=info" in args:
        assert options.stderrthreshold == "INFO"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[FakeKubeServer]:
    # Serving Cluster API too, for --cloud-provider=clusterapi.
    with FakeKubeServer(resources=cluster_api_resources()) as server:
        server.kubeconfig(tmp_path / "kubeconfig")
        yield server


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def environment(provider: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "KUBERNETES_SERVICE"))
    }
    env["KUBECONFIG"] = str(tmp_path / "kubeconfig")
    env["PYTHONUNBUFFERED"] = "1"
    if provider == "aws":
        pytest.importorskip("clusterscaler_aws")
        env.update(
            AWS_ENDPOINT_URL=request.getfixturevalue("moto"),
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_REGION="eu-west-1",
            AWS_CONFIG_FILE="/nonexistent",
            AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
        )
    if provider == "clusterapi":
        pytest.importorskip("clusterscaler_machineapi")
    return env


def wait_for_line(log: Path, process: subprocess.Popen[bytes], text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = log.read_text()
        if text in content:
            return content
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} (exit {process.poll()}):\n{log.read_text()}")


@pytest.mark.parametrize("name", sorted(LINES))
def test_starts_the_autoscaler(
    name: str, kube: FakeKubeServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    line: dict[str, Any] = LINES[name]
    env = environment(line["provider"], tmp_path, request)
    extra = [f"--address=127.0.0.1:{free_port()}"]
    if line["provider"] == "default":
        (tmp_path / "groups.yaml").write_text(yaml.safe_dump(SIM_CONFIG))
        extra.append(f"--cloud-config={tmp_path / 'groups.yaml'}")
    log = tmp_path / "autoscaler.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [EXECUTABLE, *line["args"], *extra], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:
        content = wait_for_line(log, process, '] "loop_done"', 60)
    finally:
        if process.poll() is None:
            process.terminate()
        code = process.wait(timeout=60)
    assert "autoscaler_started" in content
    assert "flag_has_no_effect" not in content
    assert code == 0, log.read_text()
