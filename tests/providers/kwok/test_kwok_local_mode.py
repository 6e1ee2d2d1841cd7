"""`KWOK_PROVIDER_MODE=local`: the provider's client comes from the kubeconfig files of
`KUBECONFIG` (or `~/.kube/config`), as upstream's default loading rules take them, read and
checked as the autoscaler's own client reads them: a malformed file is a configuration
error (exit status 2) naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterscaler.api import AutoscalingOptions, ConfigurationError, ProviderContext
from clusterscaler_kwok.plugin import build_provider

PREFIX = "kwok provider: KWOK_PROVIDER_MODE=local: "
FINE = ("apiVersion: v1\ncurrent-context: a\nusers: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://203.0.113.1'}}]\n")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Local mode, in a home without a kubeconfig and no KUBECONFIG, in a pod (the
    in-cluster account is there, and must not be taken)."""
    monkeypatch.setenv("KWOK_PROVIDER_MODE", "local")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    (tmp_path / ".kube").mkdir()
    return tmp_path


def build() -> object:
    return build_provider(ProviderContext(options=AutoscalingOptions(cloud_provider="kwok")))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # The client's loader let it through as `AttributeError: 'str' object has no
        # attribute 'path'`, naming no file.
        (FINE.replace("{token: t}", "admin"), "users[0].user: expected an object, got 'admin'"),
        ("a: [1,\n", "expected a kubeconfig in YAML, got text that is not valid YAML: did not "
         "find expected node content at line 2, column 1"),
        ("clusters: x # caf\xe9\n", "expected UTF-8 text, got byte 0xe9 at offset 17"),
    ],
    ids=["field", "not-yaml", "latin-1"],
)
def test_a_malformed_kubeconfig_is_refused_naming_the_file(
    home: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    path = home / "kind.yaml"
    path.write_bytes(text.encode("latin-1"))
    monkeypatch.setenv("KUBECONFIG", str(path))
    with pytest.raises(ConfigurationError) as caught:
        build()
    assert str(caught.value).startswith(f"{PREFIX}KUBECONFIG {str(path)!r}: {message}"), caught.value


def test_the_home_kubeconfig_is_checked_too(home: Path) -> None:
    config = home / ".kube" / "config"
    config.write_text(FINE.replace("{token: t}", "admin"))
    with pytest.raises(ConfigurationError) as caught:
        build()
    assert str(caught.value) == (
        f"{PREFIX}kubeconfig {str(config)!r}: users[0].user: expected an object, got 'admin'"
    )


def test_without_a_kubeconfig_it_says_where_it_looked(home: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        build()
    assert str(caught.value) == (
        f"{PREFIX}no kubeconfig: set KUBECONFIG or write ~/.kube/config "
        f"(no file {str(home / '.kube' / 'config')!r})"
    )


def test_in_a_pod_the_client_is_the_kubeconfig_s_not_the_in_cluster_one(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clusterscaler_kwok.plugin import _api_client

    (home / "kind.yaml").write_text(FINE)
    monkeypatch.setenv("KUBECONFIG", str(home / "kind.yaml"))
    context = ProviderContext(options=AutoscalingOptions(cloud_provider="kwok"))
    assert _api_client(context).configuration.host == "https://203.0.113.1"
