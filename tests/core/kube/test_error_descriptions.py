"""`clusterscaler.framework.errors`: real API errors (from the fake API server), connection errors,
cloud provider errors and bugs described by CA's type, status and reason, never with HTTP
headers or bodies; and `run_loop`'s one line for a loop that ended early."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.run import run_loop
from clusterscaler.commands.runtime import KubeRuntime
from clusterscaler.framework.clusteractions import EvictionError, NodeNotFoundError
from clusterscaler.framework.errors import (
    ErrorInfo,
    ErrorType,
    LoopError,
    describe,
    describe_error,
    error_type_of,
    format_traceback,
)
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import (
    CloudProviderError,
    ConfigurationError,
    NodeGroupNotFoundError,
)
from clusterscaler.kube.actions import ConflictRetriesExhaustedError
from clusterscaler.kube.source import CacheNotSyncedError
from clusterscaler.loop.decisions import (
    ClusterHealth,
    DeletionKind,
    LoopResult,
    NodeCounts,
    NodeDeletion,
    ScaleDownResult,
    ScaleDownStatus,
)
from clusterscaler.report.metrics import Metrics
from clusterscaler.testing.fakekube import FakeKubeServer
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException
from structlog.testing import capture_logs

LEAKS = ("HTTP response headers", "HTTPHeaderDict", "HTTP response body", "Content-Type")


def api_error(kube: FakeKubeServer, status: int, message: str = "injected fault") -> ApiException:
    """The ApiException the official client raises for a real answer of `status`."""
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}})
    kube.add_fault(method="GET", path="^/api/v1/nodes/n1$", status=status, message=message)
    client = kube.api_client()
    try:
        k8s.CoreV1Api(client).read_node("n1")
    except ApiException as exc:
        assert "HTTP response headers" in str(exc)  # what must not reach a log line
        return exc
    finally:
        client.close()
    raise AssertionError("the fault did not fire")


def connection_error() -> BaseException:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    configuration = k8s.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    configuration.retries = False
    client = k8s.ApiClient(configuration)
    try:
        k8s.CoreV1Api(client).read_node("n1")
    except Exception as exc:
        return exc
    finally:
        client.close()
    raise AssertionError("nothing listens there, the call cannot succeed")


def test_api_error_is_an_api_call_error_with_status_reason_and_message(
    fake_kube: FakeKubeServer,
) -> None:
    exc = api_error(fake_kube, 500)
    info = describe(exc)
    assert info == ErrorInfo(ErrorType.API_CALL, "Internal Server Error", 500, "injected fault")
    assert str(info) == "HTTP 500 Internal Server Error: injected fault"
    assert describe_error(exc) == str(info)
    assert info.fields() == {
        "error_type": "apiCallError",
        "status": 500,
        "reason": "Internal Server Error",
        "message": "injected fault",
    }


def test_long_server_messages_are_cut(fake_kube: FakeKubeServer) -> None:
    info = describe(api_error(fake_kube, 403, "x" * 1000 + "\nsecond line"))
    assert info.status == 403
    assert len(info.message) == 200 and info.message.endswith("...")


def test_answers_built_from_api_errors_keep_their_status(fake_kube: FakeKubeServer) -> None:
    cause = api_error(fake_kube, 503)
    try:
        raise EvictionError("default/web", "HTTP 503", retryable=True) from cause
    except EvictionError as exc:
        assert describe(exc) == describe(cause)
    assert describe(NodeNotFoundError("node n1 not found")) == ErrorInfo(
        ErrorType.API_CALL, "NodeNotFoundError", 404, "node n1 not found"
    )
    assert describe(ConflictRetriesExhaustedError("n1 conflicted")).type is ErrorType.API_CALL


def test_connection_errors_are_errors_talking_to_the_remote_end() -> None:
    exc = connection_error()
    info = describe(exc)
    assert info.type is ErrorType.API_CALL and info.status is None
    assert describe(exc, remote=ErrorType.CLOUD_PROVIDER).type is ErrorType.CLOUD_PROVIDER
    assert describe(TimeoutError("timed out")).type is ErrorType.API_CALL


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (CloudProviderError("node group ng: delete failed"), ErrorType.CLOUD_PROVIDER),
        (ConfigurationError("bad tag"), ErrorType.CONFIGURATION),
        (NodeGroupNotFoundError("ng is gone"), ErrorType.NODE_GROUP_DOES_NOT_EXIST),
        (KeyError("spec"), ErrorType.INTERNAL),
    ],
)
def test_types_of_the_other_errors(exc: BaseException, expected: ErrorType) -> None:
    info = describe(exc)
    assert info.type is expected
    assert info.reason == type(exc).__name__
    assert describe(exc, default=ErrorType.TRANSIENT).type is (
        ErrorType.TRANSIENT if expected is ErrorType.INTERNAL else expected
    )


def test_a_bugs_traceback_shows_api_errors_without_headers(fake_kube: FakeKubeServer) -> None:
    api = api_error(fake_kube, 500)
    try:
        try:
            raise api
        except ApiException:
            {}["missing"]  # a bug while handling the API error
    except KeyError as exc:
        bug = exc
    text = format_traceback(bug)
    # (A 500 is the client's ServiceException, an ApiException.)
    assert f"{type(api).__name__}: HTTP 500 Internal Server Error: injected fault" in text
    assert "The above exception led to the following one" in text
    assert "KeyError: 'missing'" in text
    assert "test_a_bugs_traceback_shows_api_errors_without_headers" in text
    for leak in LEAKS:
        assert leak not in text
    assert "traceback" in describe(bug).fields(bug)
    assert "traceback" not in describe(api).fields(api)


def test_loop_errors_carry_their_type_to_the_metrics() -> None:
    errors = (
        LoopError("node group ng: increase_size(1) failed", ErrorType.CLOUD_PROVIDER),
        LoopError("bad annotation", ErrorType.CONFIGURATION),
        "free text",
    )
    assert [error_type_of(e) for e in errors] == [
        ErrorType.CLOUD_PROVIDER,
        ErrorType.CONFIGURATION,
        ErrorType.INTERNAL,
    ]
    # Still plain text wherever a result is shown or serialised.
    assert errors[0] == "node group ng: increase_size(1) failed"
    result = LoopResult(
        time=datetime(2026, 3, 1, tzinfo=UTC),
        health=ClusterHealth(True, NodeCounts()),
        errors=errors,
    )
    assert result.to_dict()["errors"] == list(errors)
    metrics = Metrics()
    failed = NodeDeletion("n1", "ng", DeletionKind.EMPTY, error="x", error_type=ErrorType.API_CALL)
    metrics.record_loop(
        dataclasses.replace(
            result,
            scale_down=ScaleDownResult(ScaleDownStatus.NODE_DELETE_STARTED, deletions=(failed,)),
        )
    )
    samples = {
        s.labels["type"]: s.value
        for family in metrics.registry.collect()
        if family.name == "cluster_autoscaler_errors"
        for s in family.samples
        # Every type exists from the start, at zero (CA's InitMetrics).
        if s.name.endswith("_total") and s.value
    }
    assert samples == {
        "cloudProviderError": 1.0,
        "configurationError": 1.0,
        "internalError": 1.0,
        "apiCallError": 1.0,
    }


class Failing:
    """An autoscaler whose loop raises `exc`, then lets the process stop."""

    def __init__(self, exc: BaseException, runtime: KubeRuntime) -> None:
        self.exc = exc
        self.runtime = runtime

    def run_once(self, now: Any) -> LoopResult:
        self.runtime.shutdown.set()
        raise self.exc


@pytest.fixture
def runtime(fake_kube: FakeKubeServer, tmp_path: Path) -> Iterator[KubeRuntime]:
    options = dataclasses.replace(
        AutoscalingOptions(),
        kubeconfig=str(fake_kube.kubeconfig(tmp_path / "kubeconfig")),
        leader_elect=False,
    )
    runtime = KubeRuntime.from_options(options, serve=False)
    yield runtime
    runtime.stop()


@pytest.mark.parametrize(
    ("make", "error_type", "traceback"),
    [
        (lambda kube: api_error(kube, 500), "apiCallError", False),
        (lambda kube: CacheNotSyncedError("caches have not synced yet: pods"), "transientError", False),
        (lambda kube: CloudProviderError("listing instances failed"), "cloudProviderError", False),
        (lambda kube: KeyError("spec"), "internalError", True),
    ],
    ids=["api-error", "caches-not-synced", "cloud-error", "bug"],
)
def test_a_loop_ended_early_is_one_line_and_one_count(
    fake_kube: FakeKubeServer,
    runtime: KubeRuntime,
    make: Any,
    error_type: str,
    traceback: bool,
) -> None:
    exc = make(fake_kube)
    with capture_logs() as logs:
        code = run_loop(Failing(exc, runtime), runtime, AutoscalingOptions())  # type: ignore[arg-type]
    assert code == 0
    [line] = [e for e in logs if e["log_level"] in ("warning", "error")]
    assert line["event"] == "loop_failed"
    assert line["error_type"] == error_type
    assert ("traceback" in line) is traceback
    assert "exc_info" not in line and "exception" not in line
    for leak in LEAKS:
        assert leak not in repr(line)
    value = runtime.metrics.registry.get_sample_value(
        "cluster_autoscaler_errors_total", {"type": error_type}
    )
    assert value == 1.0
