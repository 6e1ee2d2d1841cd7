"""Fixtures for the aws provider: moto's server on 127.0.0.1 behind a small recording proxy
(see `aws_fakes`), a clean AWS per test, and a provider factory built as the CLI builds it."""

from __future__ import annotations

import dataclasses
import http.client
from collections.abc import Iterator

import pytest
from aws_fakes import REGION, AwsFixtures, ProviderFactory, ProxyState, make_handler
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler.testing.fakehttp import LocalServer
from clusterscaler_aws.plugin import build_provider
from clusterscaler_aws.provider import AwsCloudProvider
from moto.server import ThreadedMotoServer


@pytest.fixture(scope="session")
def moto_server() -> Iterator[tuple[str, int]]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    yield server.get_host_and_port()
    server.stop()


@pytest.fixture(scope="session")
def proxy_server(moto_server: tuple[str, int]) -> Iterator[tuple[ProxyState, str]]:
    state = ProxyState()
    server = LocalServer(make_handler(moto_server, state), name="moto-proxy")
    yield state, server.url
    server.stop()


@pytest.fixture
def proxy(
    moto_server: tuple[str, int],
    proxy_server: tuple[ProxyState, str],
    monkeypatch: pytest.MonkeyPatch,
) -> ProxyState:
    """A clean moto and a clean proxy; the environment points boto3 at the proxy."""
    host, port = moto_server
    reset = http.client.HTTPConnection(host, port, timeout=10)
    reset.request("POST", "/moto-api/reset")
    reset.getresponse().read()
    reset.close()
    state, url = proxy_server
    with state.lock:
        state.calls.clear()
        state.visible.clear()
        state.activities.clear()
        state.fail_actions.clear()
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    for var in ("AWS_ENDPOINT_URL_AUTO_SCALING", "AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL_EKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    return state


@pytest.fixture(scope="session")
def aws_session(proxy_server: tuple[ProxyState, str]) -> AwsFixtures:
    return AwsFixtures(*proxy_server)


@pytest.fixture
def aws(proxy: ProxyState, aws_session: AwsFixtures) -> AwsFixtures:
    return aws_session


@pytest.fixture
def make_provider(proxy: ProxyState) -> ProviderFactory:
    def make(
        *,
        nodes: list[str] | None = None,
        discovery: list[str] | None = None,
        static: bool = False,
        cloud_config: str = "",
    ) -> AwsCloudProvider:
        options = dataclasses.replace(
            AutoscalingOptions(),
            nodes=list(nodes or []),
            node_group_auto_discovery=list(discovery or []),
            cloud_config=cloud_config,
            extra={"aws_use_static_instance_list": static},
        )
        return build_provider(ProviderContext(options=options))

    return make
