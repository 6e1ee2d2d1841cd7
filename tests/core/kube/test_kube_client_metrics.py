"""Every request of the Kubernetes clients is counted as client-go counts it, in the
`rest_client_*` series CA's /metrics carries: dashboards and alerts on the autoscaler's
API traffic (its 5xx, its throttling by --kube-client-qps) keep working."""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterscaler.kube.client import ClientSettings, build_api_client, observe_all_clients
from clusterscaler.report.metrics import Metrics
from clusterscaler.testing.faults import FaultKind
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families


def samples(metrics: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
        if s.name == name
    }


def test_requests_are_counted_by_code_method_and_host(fake_kube, tmp_path: Path) -> None:
    metrics = Metrics()
    kubeconfig = fake_kube.kubeconfig(tmp_path / "kubeconfig")
    api = build_api_client(ClientSettings(kubeconfig=str(kubeconfig), qps=0),
                           metrics.observe_request)
    core = k8s.CoreV1Api(api)
    core.list_node()
    with pytest.raises(k8s.ApiException):
        core.read_node("missing")
    fake_kube.add_fault(method="GET", path="/api/v1/nodes", kind=FaultKind.DROP, times=10)
    with pytest.raises(Exception):  # noqa: B017 - urllib3's error once its retries are spent
        core.list_node()
    host = fake_kube.url.split("://", 1)[1]
    counts = samples(metrics, "rest_client_requests_total")
    assert counts[(("code", "200"), ("host", host), ("method", "GET"))] == 1
    assert counts[(("code", "404"), ("host", host), ("method", "GET"))] == 1
    assert counts[(("code", "<error>"), ("host", host), ("method", "GET"))] == 1
    durations = samples(metrics, "rest_client_request_duration_seconds_count")
    assert durations[(("host", host), ("verb", "GET"))] == 3


def test_the_wait_for_a_token_is_observed(fake_kube, tmp_path: Path) -> None:
    """Two tokens a second, one saved up: the third of three requests waits about a
    second, which rest_client_rate_limiter_duration_seconds shows."""
    metrics = Metrics()
    kubeconfig = fake_kube.kubeconfig(tmp_path / "kubeconfig")
    api = build_api_client(ClientSettings(kubeconfig=str(kubeconfig), qps=2, burst=1),
                           metrics.observe_request)
    core = k8s.CoreV1Api(api)
    for _ in range(3):
        core.list_node()
    host = fake_kube.url.split("://", 1)[1]
    waited = samples(metrics, "rest_client_rate_limiter_duration_seconds_sum")
    assert 0.6 <= waited[(("host", host), ("verb", "GET"))] <= 3.0
    counts = samples(metrics, "rest_client_rate_limiter_duration_seconds_count")
    assert counts[(("host", host), ("verb", "GET"))] == 3


def test_a_client_built_without_an_observer_counts_in_the_process_observer(
    fake_kube, tmp_path: Path
) -> None:
    """The kwok provider outside a cluster builds its own client, as upstream's does: its
    node deletions count in /metrics as CA's client-go counts every client's."""
    metrics = Metrics()
    kubeconfig = fake_kube.kubeconfig(tmp_path / "kubeconfig")
    observe_all_clients(metrics.observe_request)
    try:
        api = build_api_client(ClientSettings(kubeconfig=str(kubeconfig), qps=0))
    finally:
        observe_all_clients(None)
    k8s.CoreV1Api(api).list_node()
    unobserved = build_api_client(ClientSettings(kubeconfig=str(kubeconfig), qps=0))
    k8s.CoreV1Api(unobserved).list_node()
    host = fake_kube.url.split("://", 1)[1]
    assert samples(metrics, "rest_client_requests_total") == {
        (("code", "200"), ("host", host), ("method", "GET")): 1.0
    }


def test_a_failing_observer_never_fails_the_request(fake_kube, tmp_path: Path) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("metrics broke")

    kubeconfig = fake_kube.kubeconfig(tmp_path / "kubeconfig")
    api = build_api_client(ClientSettings(kubeconfig=str(kubeconfig), qps=0), broken)
    assert k8s.CoreV1Api(api).list_node().items == []
