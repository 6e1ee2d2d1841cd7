"""Leader election on a Lease, and client configuration."""

from __future__ import annotations

import dataclasses
import threading
import time
from datetime import timedelta

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.kube.client import (
    ClientSettings,
    KubeConfigError,
    TokenBucket,
    build_api_client,
    spare_capacity_client,
)
from clusterscaler.kube.leaderelection import LeaderElectionConfig, LeaderElector
from kubernetes import client

CONFIG = LeaderElectionConfig(
    name="cluster-autoscaler",
    namespace="kube-system",
    lease_duration=timedelta(seconds=15),
    renew_deadline=timedelta(seconds=10),
    retry_period=timedelta(seconds=2),
)


class Ticker:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def electors(fake_kube, tick: Ticker) -> tuple[LeaderElector, LeaderElector]:
    return (
        LeaderElector(fake_kube.api_client(), CONFIG, identity="a", clock=tick),
        LeaderElector(fake_kube.api_client(), CONFIG, identity="b", clock=tick),
    )


def holder(fake_kube) -> str:
    return fake_kube.get("leases", "cluster-autoscaler", "kube-system")["spec"]["holderIdentity"]


def test_only_one_candidate_acquires(fake_kube):
    tick = Ticker()
    a, b = electors(fake_kube, tick)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.is_leader and not b.is_leader
    assert holder(fake_kube) == "a"
    lease = fake_kube.get("leases", "cluster-autoscaler", "kube-system")["spec"]
    assert lease["leaseDurationSeconds"] == 15
    assert lease["leaseTransitions"] == 0


def test_takeover_only_after_lease_duration_without_renewal(fake_kube):
    tick = Ticker()
    a, b = electors(fake_kube, tick)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b observes a's record now
    tick.t += 14
    assert not b.try_acquire_or_renew()
    assert not a.is_leader  # a has not renewed for longer than the renew deadline
    tick.t += 2
    assert b.try_acquire_or_renew()
    assert holder(fake_kube) == "b"
    assert (
        fake_kube.get("leases", "cluster-autoscaler", "kube-system")["spec"]["leaseTransitions"]
        == 1
    )


def test_renewals_keep_the_lease(fake_kube):
    tick = Ticker()
    a, b = electors(fake_kube, tick)
    assert a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    for _ in range(10):
        tick.t += 2
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    assert holder(fake_kube) == "a"


def test_the_leader_renews_with_one_write_as_client_go_does(fake_kube):
    # client-go's leader writes the Lease it last wrote, reading it only when that write
    # fails: one request a renewal on the Lease's client, not two.
    tick = Ticker()
    a, _ = electors(fake_kube, tick)
    assert a.try_acquire_or_renew()
    requests: list[tuple[str, str]] = []
    fake_kube.on_request = lambda method, path: requests.append((method, path))
    for _ in range(5):
        tick.t += 2
        assert a.try_acquire_or_renew()
    assert [method for method, _ in requests] == ["PUT"] * 5
    assert holder(fake_kube) == "a"
    assert a.is_leader


def test_a_renewal_after_someone_else_wrote_the_lease_reads_it_first(fake_kube):
    tick = Ticker()
    a, b = electors(fake_kube, tick)
    assert a.try_acquire_or_renew()
    # Somebody else's write (here a label): the Lease a last wrote is stale, its PUT is 409.
    fake_kube.patch(
        "leases", "cluster-autoscaler", {"metadata": {"labels": {"team": "x"}}}, "kube-system"
    )
    requests: list[str] = []
    fake_kube.on_request = lambda method, path: requests.append(method)
    tick.t += 2
    assert a.try_acquire_or_renew()
    assert requests == ["PUT", "GET", "PUT"]
    lease = fake_kube.get("leases", "cluster-autoscaler", "kube-system")
    assert lease["metadata"]["labels"] == {"team": "x"}
    assert lease["spec"]["holderIdentity"] == "a"
    # A Lease taken over while a could not renew is not written back by a's fast path.
    tick.t += 20
    assert not a.is_leader
    assert b.try_acquire_or_renew() is False  # b observes the record now
    tick.t += 16
    assert b.try_acquire_or_renew()
    assert not a.try_acquire_or_renew()
    assert holder(fake_kube) == "b"


def test_leader_that_cannot_renew_stops_leading_at_renew_deadline(fake_kube):
    tick = Ticker()
    a, _ = electors(fake_kube, tick)
    assert a.try_acquire_or_renew()
    fake_kube.add_fault(path="/leases/", status=503)
    tick.t += 9
    assert not a._attempt()
    assert a.is_leader
    tick.t += 1
    assert not a.is_leader


def test_racing_candidates_for_a_free_lease_one_wins(fake_kube):
    tick = Ticker()
    a, b = electors(fake_kube, tick)
    assert a.try_acquire_or_renew()
    assert a.release()
    assert holder(fake_kube) == ""
    # Both read the released lease; a writes first, b's write carries a stale resourceVersion.
    raced = []

    def a_writes_first(method, path):
        if method == "PUT" and not raced:
            raced.append(True)
            assert a.try_acquire_or_renew()

    fake_kube.on_request = a_writes_first
    assert not b.try_acquire_or_renew()
    assert holder(fake_kube) == "a"


def test_run_loop_hands_over_after_release(fake_kube):
    config = dataclasses.replace(
        CONFIG,
        lease_duration=timedelta(seconds=1.5),
        renew_deadline=timedelta(seconds=1),
        retry_period=timedelta(seconds=0.1),
    )
    a = LeaderElector(fake_kube.api_client(), config, identity="a")
    b = LeaderElector(fake_kube.api_client(), config, identity="b")
    a.start()
    assert a.wait_for_leadership(5)
    b.start()
    time.sleep(0.3)
    assert not b.is_leader
    a.stop()
    assert holder(fake_kube) in ("", "b")
    assert b.wait_for_leadership(5)
    assert holder(fake_kube) == "b"
    b.stop()


def test_config_validation_names_the_flags():
    with pytest.raises(ValueError, match="--leader-elect-lease-duration"):
        LeaderElectionConfig(
            lease_duration=timedelta(seconds=5), renew_deadline=timedelta(seconds=10)
        )
    with pytest.raises(ValueError, match="--leader-elect-retry-period"):
        LeaderElectionConfig(renew_deadline=timedelta(seconds=2), retry_period=timedelta(seconds=2))


def test_config_from_options_defaults_namespace_to_namespace_flag():
    options = dataclasses.replace(AutoscalingOptions(), namespace="autoscaling")
    config = LeaderElectionConfig.from_options(options)
    assert (config.name, config.namespace) == ("cluster-autoscaler", "autoscaling")
    assert config.lease_duration == timedelta(seconds=15)


# --------------------------------------------------------------------------- client


def test_kubeconfig_flag_configures_client(fake_kube, tmp_path):
    path = fake_kube.kubeconfig(tmp_path / "config")
    fake_kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    api = build_api_client(ClientSettings(kubeconfig=str(path)))
    assert [n.metadata.name for n in client.CoreV1Api(api).list_node().items] == ["n1"]
    assert api.user_agent == "cluster-autoscaler"


def test_kubernetes_flag_overrides_the_server(fake_kube, tmp_path):
    with type(fake_kube)() as other:
        path = other.kubeconfig(tmp_path / "config")
        fake_kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "right"}})
        api = build_api_client(ClientSettings(kubeconfig=str(path), kubernetes=fake_kube.url))
        assert [n.metadata.name for n in client.CoreV1Api(api).list_node().items] == ["right"]


def test_in_cluster_configuration(fake_kube, tmp_path, monkeypatch):
    token = tmp_path / "token"
    token.write_text("sa-token")
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr("kubernetes.config.incluster_config.SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr("kubernetes.config.incluster_config.SERVICE_CERT_FILENAME", str(ca))
    api = build_api_client(ClientSettings())
    assert api.configuration.host == "https://10.0.0.1:443"
    assert any(str(v).endswith("sa-token") for v in api.configuration.api_key.values())


@pytest.mark.parametrize(
    ("settings", "flag"),
    [
        ({"qps": -1}, "--kube-client-qps"),
        ({"burst": 0}, "--kube-client-burst"),
        ({"kubernetes": "10.0.0.1:6443"}, "--kubernetes"),
        ({"kubeconfig": "/nonexistent/kubeconfig"}, "--kubeconfig"),
    ],
    ids=["negative-qps", "zero-burst", "url-without-scheme", "missing-kubeconfig"],
)
def test_bad_client_settings_name_the_flag(settings, flag):
    with pytest.raises(KubeConfigError, match=flag):
        build_api_client(ClientSettings(**settings))


def test_token_bucket_allows_burst_then_paces_at_qps():
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(qps=5, burst=3, clock=lambda: now[0], sleep=sleep)
    waits = [bucket.acquire() for _ in range(5)]
    assert waits[:3] == [0, 0, 0]
    assert waits[3] == pytest.approx(0.2)
    assert waits[4] == pytest.approx(0.2)


def test_a_spare_token_goes_to_the_requests_in_line_first():
    """`acquire_spare` takes only a token nobody waits for: requests arriving while it
    waits go first, at the bucket's pace, and it gets the first token left over."""
    now = [0.0]
    competitor_waits: list[float] = []
    arrivals = [2]
    competing = [False]

    def sleep(seconds: float) -> None:
        if competing[0]:
            return  # a competitor's wait: its token is reserved, the clock is the spare's
        if arrivals[0]:
            arrivals[0] -= 1
            competing[0] = True
            competitor_waits.append(bucket.acquire())
            competing[0] = False
        now[0] += seconds

    bucket = TokenBucket(qps=5, burst=1, clock=lambda: now[0], sleep=sleep)
    assert bucket.acquire_spare() == 0  # a free token: at once
    waited = bucket.acquire_spare()
    # Two requests arrived while it waited: each got the next token, 0.2 s after it
    # arrived, as if the spare one were not there; the spare one got the third.
    assert competitor_waits == [pytest.approx(0.2), pytest.approx(0.2)]
    assert waited == pytest.approx(0.6)
    assert bucket.acquire_spare() == pytest.approx(0.2)  # nobody in line: the next token


def test_a_spare_capacity_client_waits_for_the_clients_own_requests(fake_kube, tmp_path):
    """Events go through a client sharing the loop client's --kube-client-qps: while the
    loop's requests use every token, an event waits for them instead of delaying them."""
    settings = ClientSettings(kubeconfig=str(fake_kube.kubeconfig(tmp_path / "config")),
                              qps=2, burst=1)
    api = build_api_client(settings)
    spare = spare_capacity_client(api, settings)
    assert spare is not api
    starts: list[float] = []

    def busy() -> None:
        for _ in range(4):  # tokens at 0, 0.5, 1.0 and 1.5 s
            starts.append(time.monotonic())
            client.CoreV1Api(api).list_node()

    worker = threading.Thread(target=busy)
    began = time.monotonic()
    worker.start()
    time.sleep(0.1)
    client.CoreV1Api(spare).list_namespaced_event("default")
    spare_done = time.monotonic() - began
    worker.join()
    # Behind the four (the last took its token at 1.5 s), not between them.
    assert spare_done >= 1.9, (spare_done, [round(t - began, 2) for t in starts])
    # A client not built here has no bucket to share: it is used as it is.
    foreign = object()
    assert spare_capacity_client(foreign, settings) is foreign  # type: ignore[arg-type]


def test_client_requests_are_rate_limited(fake_kube, tmp_path):
    path = fake_kube.kubeconfig(tmp_path / "config")
    api = build_api_client(ClientSettings(kubeconfig=str(path), qps=20, burst=1))
    core = client.CoreV1Api(api)
    started = time.monotonic()
    for _ in range(5):
        core.list_node()
    assert time.monotonic() - started >= 0.19


def test_a_hung_request_times_out_instead_of_blocking(fake_kube, tmp_path):
    path = fake_kube.kubeconfig(tmp_path / "config")
    api = build_api_client(
        ClientSettings(kubeconfig=str(path), qps=100, request_timeout=(2.0, 0.5))
    )
    hang = fake_kube.add_fault(method="GET", path="/api/v1/nodes", delay=3.0)
    started = time.monotonic()
    # urllib3 retries a read timeout a few times, each bounded by the timeout.
    with pytest.raises(Exception, match=r"(?i)read timed out"):
        client.CoreV1Api(api).list_node()
    assert time.monotonic() - started < 2.9
    fake_kube.remove_fault(hang)
    # A request that sets its own timeout keeps it.
    fake_kube.add_fault(method="GET", path="/api/v1/nodes", delay=1.0, times=1)
    assert client.CoreV1Api(api).list_node(_request_timeout=(2, 5)).items == []


def test_malformed_lease_does_not_stop_the_candidate(fake_kube):
    fake_kube.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "cluster-autoscaler", "namespace": "kube-system"},
            # Neither a ValueError-raising string nor a list: a type the code never expects.
            "spec": {"holderIdentity": "other", "leaseTransitions": {"not": "a number"}},
        }
    )
    tick = Ticker()
    a, _ = electors(fake_kube, tick)
    assert not a._attempt()
    fake_kube.patch(
        "leases",
        "cluster-autoscaler",
        {"spec": {"leaseDurationSeconds": 15, "leaseTransitions": 0, "holderIdentity": ""}},
        "kube-system",
    )
    assert a._attempt()
    assert holder(fake_kube) == "a"


def test_kubeconfig_that_is_not_yaml_is_a_named_error(tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [unclosed\n  - : :\n")
    with pytest.raises(KubeConfigError, match=r"--kubeconfig .*: .*expected a kubeconfig"):
        build_api_client(ClientSettings(kubeconfig=str(bad)))


@pytest.mark.parametrize(
    ("text", "message"),
    [("apiVersion: v1\nclusters: 7\n", "clusters: expected a list of named clusters, got 7"),
     ("apiVersion: v1\ncurrent-context: a\ncontexts: [7]\n",
      "contexts[0]: expected an object, got 7"),
     ("- a\n- b\n", "(document): expected an object, got ['a', 'b']"),
     ("contexts:\n- name: a\n  context: {cluster: [x]}\ncurrent-context: a\n",
      "contexts[0].context.cluster: expected a string, got ['x']"),
     ("users:\n- name: u\n  user: admin\n", "users[0].user: expected an object, got 'admin'"),
     ("clusters:\n- name: c\n  cluster: {server: https://h, certificate-authority-data: '%'}\n",
      "clusters[0].cluster.certificate-authority-data: expected base64 of PEM data, got '%'"),
     ("current-context: b\ncontexts:\n- {name: a, context: {cluster: c}}\n",
      "current-context: expected the name of one of the contexts (a), got 'b'"),
     ("current-context: a\ncontexts:\n- {name: a, context: {cluster: c, user: v}}\n"
      "clusters:\n- {name: c, cluster: {server: 'https://h'}}\n",
      "contexts[0].context.user: expected the name of one of the users (none), got 'v'"),
     ("users:\n- name: u\n  user: {exec: {command: x, env: [{name: A, value: 1}]}}\n",
      "users[0].user.exec.env[0].value: expected a string, got 1"),
     ("current-context: a\ncontexts:\n- {name: a, context: {cluster: c}}\n"
      "clusters:\n- {name: b, cluster: {server: 'https://h'}}\n- {name: c}\n",
      "clusters[1].cluster.server: required by the current context, expected the API "
      "server's URL"),
     ("current-context: a\ncontexts:\n- {name: a, context: {cluster: ''}}\n"
      "clusters:\n- {name: b, cluster: {server: 'https://h'}}\n",
      "contexts[0].context.cluster: expected the name of one of the clusters (b), got ''")],
    ids=["clusters-int", "context-int", "list", "cluster-name-list", "user-string",
         "ca-data-not-base64", "current-context-missing", "user-missing", "exec-env-int",
         "no-server", "cluster-blank"],
)
def test_kubeconfig_of_another_shape_is_a_named_error(tmp_path, text, message):
    """The client's loader checks no shape: `clusters: 7` escaped as TypeError, a traceback
    and exit status 1 instead of 2; caught, it still named no field (`TypeError: 'int'
    object is not iterable`). Each is refused naming the file and the field."""
    bad = tmp_path / "kubeconfig"
    bad.write_text(text)
    with pytest.raises(KubeConfigError) as caught:
        build_api_client(ClientSettings(kubeconfig=str(bad)))
    assert str(caught.value) == f"--kubeconfig {str(bad)!r}: {message}"
