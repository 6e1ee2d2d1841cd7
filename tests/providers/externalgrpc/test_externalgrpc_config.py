"""The externalgrpc cloud-config (upstream's keys), the provider's `check_options`, and TLS
against a service that requires a client certificate."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from clusterscaler.api import ConfigurationError, ProviderContext
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler_externalgrpc.config import load_config, parse_config, split_host_port
from clusterscaler_externalgrpc.plugin import build_provider, check_options
from clusterscaler_externalgrpc.provider import ExternalGrpcCloudProvider, ServiceError
from externalgrpc_fakes import FakeService, Pki, Served, make_pki, serve
from externalgrpckit import write_config


def _options(path: str, **extra: object) -> AutoscalingOptions:
    return dataclasses.replace(
        AutoscalingOptions(), cloud_provider="externalgrpc", cloud_config=path, **extra
    )


@pytest.mark.parametrize(
    ("address", "host"),
    [
        ("provider.kube-system.svc:8086", "provider.kube-system.svc"),
        ("127.0.0.1:443", "127.0.0.1"),
        ("[::1]:8086", "::1"),
        ("[fe80::1%eth0]:8086", "fe80::1%eth0"),
    ],
)
def test_addresses_as_go_splits_them(address: str, host: str) -> None:
    assert split_host_port(address)[0] == host
    assert parse_config(f"address: '{address}'", "test").host == host


def test_defaults_and_keys_in_any_case() -> None:
    config = parse_config("Address: provider:8086\nGRPC_Timeout: 1m30s\n", "test")

    assert (config.address, config.timeout, config.tls) == ("provider:8086", timedelta(seconds=90), None)
    assert parse_config("address: provider:8086", "test").timeout == timedelta(seconds=5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a YAML mapping with the keys address, key, cert, cacert, grpc_timeout, got an empty file"),
        ("- a\n- b", "expected a YAML mapping .* got list"),
        ("address: [unclosed", "not valid YAML"),
        ("grpc_timeout: 5s", "address: required, expected host:port or \\[host\\]:port"),
        ("address: provider", "address: expected host:port .* got 'provider' \\(missing port\\)"),
        ("address: 'dns:///provider:80'", "address: .*too many colons"),
        ("address: provider:http", "address: .*port 'http' is not a number"),
        ("address: 8086", "address: expected a string, got int 8086"),
        ("address: p:1\ngrpc_timeout: 10", "grpc_timeout: expected a positive duration, a Go duration such as 10s.* got 10"),
        ("address: p:1\ngrpc_timeout: soon", "grpc_timeout: expected .* got 'soon'"),
        ("address: p:1\ngrpc_timeout: 0s", "grpc_timeout: expected a positive"),
        ("address: p:1\ncert: /nonexistent/tls.crt", "key: required with cert"),
    ],
    ids=lambda v: v[:30],
)
def test_bad_cloud_configs_name_the_key_and_expected_form(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=f"externalgrpc provider: cc.yaml: {message}"):
        parse_config(text, "cc.yaml")


def test_missing_or_unreadable_cloud_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="--cloud-config: expected the path of a YAML file"):
        check_options(_options(""))
    with pytest.raises(ConfigurationError, match=r"^externalgrpc provider: --cloud-config=/nonexistent/cc.yaml: cannot read the file: No such file or directory$"):
        check_options(_options("/nonexistent/cc.yaml"))


def test_tls_files_are_checked_before_anything_is_dialled(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    other = make_pki(tmp_path, prefix="other-")
    base = {"address": "localhost:8086", "cert": str(pki.client_cert), "key": str(pki.client_key),
            "cacert": str(pki.ca)}

    assert load_config(write_config(tmp_path, base)).tls is not None
    cases = {
        "cacert": ({"cacert": str(tmp_path / "missing.crt")}, "cacert: expected a readable PEM file"),
        "not-pem": ({"cacert": write_config(tmp_path, {"a": 1})}, "cacert: expected a PEM file"),
        "mismatch": ({"key": str(other.client_key)}, "cert, key: expected a PEM certificate and its private key"),
    }
    for change, message in cases.values():
        with pytest.raises(ConfigurationError, match=message):
            load_config(write_config(tmp_path, {**base, **change}))


def test_unknown_keys_and_tls_without_cert_are_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = parse_config("address: p:1\ncacert: /etc/ca.crt\nretries: 3\n", "cc.yaml")

    assert config.tls is None
    out = capsys.readouterr().out
    assert "externalgrpc_config_key_ignored" in out and "retries" in out
    assert "externalgrpc_plaintext" in out


def test_the_provider_is_registered_with_its_check() -> None:
    registry = collect_registry(build_plugin_manager())
    entry = registry.cloud_providers["externalgrpc"]

    assert entry.source.distribution == "clusterscaler-externalgrpc"
    with pytest.raises(ConfigurationError, match="--cloud-config"):
        registry.check_cloud_provider_options(_options(""))


# --------------------------------------------------------------------------- TLS


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path)


@pytest.fixture
def tls_service(pki: Pki) -> Iterator[Served]:
    running = serve(FakeService(), pki.server_credentials())
    running.service.add_group("secure", 0, 3)
    yield running
    running.server.stop(grace=None)


def _provider(tmp_path: Path, **config: str) -> ExternalGrpcCloudProvider:
    path = write_config(tmp_path, {"grpc_timeout": "3s", **config})
    return build_provider(ProviderContext(options=_options(path)))


def test_mutual_tls_with_the_client_certificate(tls_service: Served, pki: Pki, tmp_path: Path) -> None:
    port = tls_service.address.rsplit(":", 1)[1]
    provider = _provider(
        tmp_path, address=f"localhost:{port}", cert=str(pki.client_cert), key=str(pki.client_key),
        cacert=str(pki.ca),
    )
    try:
        assert [g.id for g in provider.node_groups()] == ["secure"]
    finally:
        provider.cleanup()


def test_a_service_certificate_from_another_ca_is_refused(tls_service: Served, pki: Pki, tmp_path: Path) -> None:
    other = make_pki(tmp_path, prefix="other-")
    provider = _provider(
        tmp_path, address=tls_service.address, cert=str(pki.client_cert),
        key=str(pki.client_key), cacert=str(other.ca),
    )

    with pytest.raises(ServiceError, match=r"Refresh on 127.0.0.1:[0-9]+: UNAVAILABLE") as caught:
        provider.refresh()
    assert caught.value.code == "UNAVAILABLE"
    assert tls_service.service.count("Refresh") == 0


def test_a_plaintext_client_is_refused_by_a_tls_service(tls_service: Served, tmp_path: Path) -> None:
    provider = _provider(tmp_path, address=tls_service.address)

    with pytest.raises(ServiceError, match="UNAVAILABLE"):
        provider.refresh()
    assert tls_service.service.count("Refresh") == 0
