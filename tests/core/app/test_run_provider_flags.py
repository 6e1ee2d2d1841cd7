"""`clusterscaler run` checks the cloud provider's flags (`--nodes`,
`--node-group-auto-discovery`, `--cloud-config`, ...) before it starts anything: a bad value
exits 2 naming the flag, the value and the expected form, without a single request to the
API server and without binding the metrics and health address."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from clusterscaler.commands.cli import main
from clusterscaler.testing.fakekube import FakeKubeServer

EXECUTABLE = str(Path(sys.executable).with_name("clusterscaler"))
AWS_NODES_FORM = "expected <min>:<max>:<asg-name> with 0 <= min <= max, e.g. 1:10:my-asg"
SIM_CONFIG = {
    "nodeGroups": [
        {
            "name": "general",
            "minSize": 0,
            "maxSize": 5,
            "template": {"status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}},
        }
    ]
}


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[FakeKubeServer]:
    with FakeKubeServer() as server:
        server.kubeconfig(tmp_path / "kubeconfig")
        yield server


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "bad-service.ini").write_text(
        '[ServiceOverride "1"]\nService = s3\nRegion = eu-west-1\nURL = http://127.0.0.1:1\n'
    )
    (tmp_path / "not-ini.conf").write_text("Region = eu-west-1\n")
    (tmp_path / "latin-1.ini").write_bytes(b"[Global]\n# caf\xe9\n")
    (tmp_path / "zone.ini").write_text("[Global]\nZone = eu-west-1a\n")
    (tmp_path / "sim-ok.yaml").write_text(yaml.safe_dump(SIM_CONFIG))
    bad = {"nodeGroups": [{**SIM_CONFIG["nodeGroups"][0], "minSize": 3, "maxSize": 1}]}
    (tmp_path / "sim-bad.yaml").write_text(yaml.safe_dump(bad))
    return tmp_path


# (provider, flags, region in the environment, message after "--cloud-provider=<provider>: ")
BAD_FLAGS = [
    pytest.param("aws", ["--nodes=1:10"], True, f"--nodes='1:10': {AWS_NODES_FORM}", id="aws-nodes-two-parts"),
    pytest.param("aws", ["--nodes=one:10:workers"], True, f"--nodes='one:10:workers': min and max must be integers; {AWS_NODES_FORM}", id="aws-nodes-not-integers"),
    pytest.param("aws", ["--nodes=5:1:workers"], True, f"--nodes='5:1:workers': max 1 is below min 5; {AWS_NODES_FORM}", id="aws-nodes-max-below-min"),
    pytest.param("aws", ["--nodes=1:3:workers", "--nodes=0:2:workers"], True, "--nodes='0:2:workers': ASG 'workers' is given more than once", id="aws-nodes-twice"),
    pytest.param("aws", ["--node-group-auto-discovery=mig:namePrefix=x"], True, "--node-group-auto-discovery='mig:namePrefix=x': unsupported discoverer 'mig'; the aws provider supports only asg:tag=", id="aws-discovery-discoverer"),
    pytest.param("aws", ["--node-group-auto-discovery=asg:tag=a,,b"], True, "--node-group-auto-discovery='asg:tag=a,,b': empty tag entry; expected asg:tag=", id="aws-discovery-empty-tag"),
    pytest.param("aws", [], True, "aws provider: no node groups; give --nodes=<min>:<max>:<asg-name> or --node-group-auto-discovery=asg:tag=", id="aws-no-groups"),
    pytest.param("aws", ["--nodes=1:3:w", "--cloud-config={tmp}/missing.ini"], True, "--cloud-config='{tmp}/missing.ini': cannot read the file: No such file or directory", id="aws-cloud-config-unreadable"),
    pytest.param("aws", ["--nodes=1:3:w", "--cloud-config={tmp}/latin-1.ini"], True, "--cloud-config='{tmp}/latin-1.ini': expected UTF-8 text, got byte 0xe9 at offset 14", id="aws-cloud-config-latin-1"),
    pytest.param("aws", ["--nodes=1:3:w", "--cloud-config=/dev/zero"], True, "--cloud-config='/dev/zero': expected a file of at most 16 MiB, got more", id="aws-cloud-config-endless"),
    pytest.param("aws", ["--nodes=1:3:w", "--cloud-config={tmp}/not-ini.conf"], True, "{tmp}/not-ini.conf: not a valid INI cloud-config", id="aws-cloud-config-not-ini"),
    pytest.param("aws", ["--nodes=1:3:w", "--cloud-config={tmp}/bad-service.ini"], True, "{tmp}/bad-service.ini: section [ServiceOverride \"1\"] field Service='s3'; expected one of autoscaling, ec2, eks", id="aws-cloud-config-service"),
    pytest.param("aws", ["--nodes=1:3:w"], False, "aws provider: no region; set AWS_REGION", id="aws-no-region"),
    pytest.param("machineapi", ["--node-group-auto-discovery=asg:tag=x"], False, "--node-group-auto-discovery='asg:tag=x': unsupported discoverer 'asg'; the machineapi provider supports only clusterapi:namespace=<ns>,clusterName=<name>,<label>=<value>,...", id="machineapi-discoverer"),
    pytest.param("clusterapi", ["--node-group-auto-discovery=clusterapi:namespace"], False, "--node-group-auto-discovery='clusterapi:namespace': 'namespace' must be key=value", id="clusterapi-alias-discovery-item"),
    pytest.param("machineapi", ["--cloud-config={tmp}/management.kubeconfig"], False, "--cloud-config='{tmp}/management.kubeconfig': expected the path of the management cluster's kubeconfig file; no such file", id="machineapi-cloud-config-missing"),
    pytest.param("sim", ["--nodes=1:3:w"], False, "--nodes='1:3:w': the sim provider does not read --nodes; its node groups are the nodeGroups of its cloud-config (--cloud-config)", id="sim-nodes"),
    pytest.param("sim", ["--node-group-auto-discovery=asg:tag=x"], False, "--node-group-auto-discovery='asg:tag=x': the sim provider does not read --node-group-auto-discovery", id="sim-discovery"),
    pytest.param("sim", [], False, "--cloud-config: the sim provider needs a cloud-config file declaring nodeGroups", id="sim-no-cloud-config"),
    pytest.param("sim", ["--cloud-config={tmp}/missing.yaml"], False, "--cloud-config '{tmp}/missing.yaml': cannot read the file", id="sim-cloud-config-unreadable"),
    pytest.param("sim", ["--cloud-config={tmp}/sim-bad.yaml"], False, "{tmp}/sim-bad.yaml: nodeGroups[0] (general): maxSize: expected an integer >= minSize (3), got 1", id="sim-cloud-config-invalid"),
]  # fmt: skip


def _require(provider: str) -> None:
    if provider == "aws":
        pytest.importorskip("clusterscaler_aws")
    if provider in ("machineapi", "clusterapi"):
        pytest.importorskip("clusterscaler_machineapi")


def _no_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)


@pytest.mark.parametrize(("provider", "flags", "region", "message"), BAD_FLAGS)
def test_bad_provider_flag_exits_2_before_anything_starts(
    kube: FakeKubeServer,
    files: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    flags: list[str],
    region: bool,
    message: str,
) -> None:
    _require(provider)
    from clusterscaler.commands.runtime import KubeRuntime

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the Kubernetes runtime was built despite a bad provider flag")

    monkeypatch.setattr(KubeRuntime, "from_options", started)
    _no_region(monkeypatch)
    if region:
        monkeypatch.setenv("AWS_REGION", "eu-west-1")
    code = main(
        [
            f"--kubeconfig={files / 'kubeconfig'}",
            f"--cloud-provider={provider}",
            "--address=127.0.0.1:1",
            *(flag.format(tmp=files) for flag in flags),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    expected = f"clusterscaler: error: --cloud-provider={provider}: {message.format(tmp=files)}"
    assert err.startswith(expected), err
    assert kube.requests == []


@pytest.mark.parametrize(
    ("provider", "flags"),
    [
        pytest.param("aws", ["--nodes=1:3:workers", "--cloud-config={tmp}/zone.ini"], id="aws-region-from-zone"),
        pytest.param("aws", ["--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled", "--cloud-config={tmp}/zone.ini"], id="aws-discovery"),
        pytest.param("machineapi", ["--node-group-auto-discovery=clusterapi:namespace=ns,clusterName=prod"], id="machineapi"),
        pytest.param("sim", ["--cloud-config={tmp}/sim-ok.yaml"], id="sim"),
    ],
)  # fmt: skip
def test_good_provider_flags_pass_the_check(
    files: Path, monkeypatch: pytest.MonkeyPatch, provider: str, flags: list[str]
) -> None:
    _require(provider)
    from clusterscaler.commands.cli import load_plugins, parse_autoscaler_args

    _no_region(monkeypatch)
    argv = [f"--cloud-provider={provider}", *(flag.format(tmp=files) for flag in flags)]
    host, registry = load_plugins(argv)
    options, _ = parse_autoscaler_args(argv, host, registry)
    registry.check_cloud_provider_options(options)


def test_the_process_exits_2_without_a_request_or_binding_its_address(
    kube: FakeKubeServer, tmp_path: Path
) -> None:
    """The real process, as a Deployment starts it: the fake API server records no request,
    and the --address port, held by this test, is not what the process complains about."""
    pytest.importorskip("clusterscaler_aws")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        done = subprocess.run(
            [
                EXECUTABLE,
                f"--kubeconfig={tmp_path / 'kubeconfig'}",
                "--cloud-provider=aws",
                "--nodes=1:x:workers",
                f"--address=127.0.0.1:{port}",
                "--leader-elect=true",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**env, "AWS_REGION": "eu-west-1"},
        )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        "clusterscaler: error: --cloud-provider=aws: --nodes='1:x:workers': min and max must "
        f"be integers; {AWS_NODES_FORM}\n"
    )
    assert kube.requests == []


def test_explain_of_a_live_cluster_checks_provider_flags_first(
    kube: FakeKubeServer, files: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("clusterscaler_aws")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    code = main(
        ["explain", f"--kubeconfig={files / 'kubeconfig'}", "--cloud-provider=aws", "--nodes=1:10"]
    )
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err == f"clusterscaler explain: error: --nodes='1:10': {AWS_NODES_FORM}\n"
    assert kube.requests == []
