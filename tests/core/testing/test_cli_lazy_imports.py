"""Commands that never talk to Kubernetes or a cloud must not import their SDKs.

The kubernetes client takes about a second to import and boto3 about 0.4 s: paid by every
`clusterscaler plugins` or `simulate` if a plugin entry module or a core module imported
them at load time. The providers' own modules (their services, caches and providers) are
imported by their factories too: every command loads every plugin module. Each command
runs in a fresh interpreter, as from the shell.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("kubernetes", "boto3", "botocore", "google", "azure", "grpc", "urllib3")
PROVIDER_MODULES = (
    "clusterscaler_aws.provider",
    "clusterscaler_aws.service",
    "clusterscaler_azure.provider",
    "clusterscaler_azure.service",
    "clusterscaler_gce.provider",
    "clusterscaler_machineapi.provider",
    "clusterscaler_machineapi.kubeapi",
    "clusterscaler_externalgrpc.provider",
)

# Runs one command in-process and reports its exit status, its output, the heavy SDKs and
# the providers' modules that ended up in `sys.modules`.
_PROBE = """
import contextlib, io, json, sys
from clusterscaler.commands.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(json.loads(sys.argv[1]))
    except SystemExit as exc:
        code = exc.code
heavy = json.loads(sys.argv[2])
# The light placeholders of the Kubernetes client's packages (`kube/lazyclient.py`) run
# none of its code: only its modules imported through them count.
from clusterscaler.kube.lazyclient import LIGHT_PACKAGES
loaded = sorted({m.split(".")[0] for m in sys.modules if m not in LIGHT_PACKAGES}
                & set(heavy))
providers = sorted(set(sys.modules) & set(json.loads(sys.argv[3])))
print(json.dumps({"code": code, "stdout": out.getvalue(), "loaded": loaded,
                  "providers": providers}))
"""


def _run(argv: list[str]) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(HEAVY),
         json.dumps(PROVIDER_MODULES)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize(
    ("argv", "expect_in_stdout"),
    [
        (["plugins", "--json"], '"cloudProviders"'),
        (["simulate", "--once", "--json"], "{"),
        (["--help"], "simulate"),
        (
            [
                "proportional",
                "calc",
                "--params",
                '{"linear": {"coresPerReplica": 2, "nodesPerReplica": 1}}',
                "--nodes",
                "4",
                "--cores",
                "13",
            ],
            '"replicas": 7',
        ),
    ],
    ids=["plugins", "simulate-once", "help", "proportional-calc"],
)
def test_offline_commands_leave_cloud_sdks_unimported(
    argv: list[str], expect_in_stdout: str
) -> None:
    report = _run(argv)
    assert report["code"] in (0, None)
    assert expect_in_stdout in str(report["stdout"])
    assert report["loaded"] == []
    assert report["providers"] == []


def test_probe_sees_an_sdk_a_command_imports() -> None:
    # The check itself must be able to fail: `run` loads the kubernetes client to read the
    # kubeconfig, and the probe reports it.
    report = _run(["run", "--kubeconfig", "/nonexistent/kubeconfig", "--cloud-provider", "sim"])
    assert report["code"] == 2
    assert "kubernetes" in report["loaded"]
