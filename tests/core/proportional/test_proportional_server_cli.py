from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from clusterscaler.proportional.cli import UsageError, main, parse_controller_args
from clusterscaler.proportional.server import HealthServer, PollHealth
from clusterscaler.proportional.targets import Target


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_health_endpoints_follow_the_last_poll():
    health = PollHealth()
    server = HealthServer("127.0.0.1:0", health)
    server.start()
    try:
        base = f"http://{server.address}"
        assert get(f"{base}/healthz") == (200, "ok\n")
        assert get(f"{base}/last-poll") == (200, "ok\n")
        assert health.record(RuntimeError("ConfigMap kube-system/x not found")) == 1
        assert health.record(RuntimeError("still not found")) == 2
        status, body = get(f"{base}/last-poll")
        assert status == 500
        assert body == "Encountered error at last poll cycle: still not found\n"
        assert get(f"{base}/healthz")[0] == 200
        assert health.record(None) == 0
        assert get(f"{base}/last-poll") == (200, "ok\n")
        assert get(f"{base}/metrics")[0] == 404
    finally:
        server.stop()


REQUIRED = ["--target=deployment/coredns", "--configmap=dns-autoscaler", "--namespace=kube-system"]


def test_controller_flags_parse_like_upstream():
    config = parse_controller_args(
        [
            "--target=Deployment/coredns,replicaset/extra",
            "--configmap=dns-autoscaler",
            "--namespace=kube-system",
            '--default-params={"linear": {"coresPerReplica": 256, "nodesPerReplica": 16}}',
            "--poll-period-seconds=30",
            "--nodelabels=pool=system,arch=amd64",
            "--max-sync-failures=3",
            "--logtostderr=true",
            "--v=2",
            "--address=127.0.0.1:9090",
        ],
        {},
    )
    assert config.targets == (Target("deployments", "coredns"), Target("replicasets", "extra"))
    assert config.default_params == {"linear": '{"coresPerReplica":256,"nodesPerReplica":16}'}
    assert config.poll_period_seconds == 30
    assert config.node_labels == {"pool": "system", "arch": "amd64"}
    assert config.max_sync_failures == 3
    assert (config.verbosity, config.address) == (2, "127.0.0.1:9090")


def test_namespace_falls_back_to_my_pod_namespace():
    argv = ["--target=deployment/coredns", "--configmap=cm"]
    assert parse_controller_args(argv, {"MY_POD_NAMESPACE": "dns"}).namespace == "dns"
    assert (
        parse_controller_args([*argv, "--namespace=x"], {"MY_POD_NAMESPACE": "dns"}).namespace
        == "x"
    )


BAD_FLAGS = [
    ("no-target", ["--configmap=cm", "--namespace=ns"], "--target"),
    (
        "target-kind",
        [*REQUIRED, "--target=pod/coredns"],
        "argument --target: expected <kind>/<name>",
    ),
    ("target-no-name", [*REQUIRED, "--target=deployment/"], "'deployment/'"),
    ("no-configmap", ["--target=deployment/x", "--namespace=ns"], "argument --configmap"),
    ("no-namespace", ["--target=deployment/x", "--configmap=cm"], "argument --namespace"),
    (
        "poll-zero",
        [*REQUIRED, "--poll-period-seconds=0"],
        "argument --poll-period-seconds: expected an integer >= 1, got '0'",
    ),
    ("poll-word", [*REQUIRED, "--poll-period-seconds=ten"], "got 'ten'"),
    (
        "max-failures-negative",
        [*REQUIRED, "--max-sync-failures=-1"],
        "argument --max-sync-failures: expected an integer >= 0",
    ),
    (
        "nodelabels",
        [*REQUIRED, "--nodelabels=pool"],
        "argument --nodelabels: expected a comma separated list of key=value",
    ),
    (
        "default-params-json",
        [*REQUIRED, "--default-params={"],
        "argument --default-params: expected JSON",
    ),
    (
        "default-params-invalid",
        [*REQUIRED, '--default-params={"linear": {"min": 3, "max": 1, "nodesPerReplica": 1}}'],
        "linear.max",
    ),
    ("address", [*REQUIRED, "--address=8080"], "argument --address: expected [host]:port"),
    (
        "logtostderr",
        [*REQUIRED, "--logtostderr=maybe"],
        "argument --logtostderr: expected true or false",
    ),
    ("unknown", [*REQUIRED, "--frobnicate"], "unrecognized arguments: --frobnicate"),
    (
        "kubeconfig-missing",
        [*REQUIRED, "--kubeconfig=/nonexistent/kubeconfig"],
        "argument --kubeconfig: expected a kubeconfig file, got '/nonexistent/kubeconfig'",
    ),
    (
        "kubernetes-url",
        [*REQUIRED, "--kubernetes=10.0.0.1:6443"],
        "argument --kubernetes/--master: expected an API server URL",
    ),
]


@pytest.mark.parametrize(
    ("argv", "message"), [c[1:] for c in BAD_FLAGS], ids=[c[0] for c in BAD_FLAGS]
)
def test_bad_controller_flags(argv, message):
    with pytest.raises(UsageError, match=None) as info:
        parse_controller_args(argv, {})
    assert message in str(info.value)


def test_main_exits_2_on_bad_flags(capsys):
    assert main([*REQUIRED, "--poll-period-seconds=0"]) == 2
    err = capsys.readouterr().err
    assert "argument --poll-period-seconds: expected an integer >= 1, got '0'" in err


def test_main_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("clusterscaler proportional ")
