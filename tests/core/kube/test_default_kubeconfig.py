"""Without `--kubeconfig`, out of a pod: the kubeconfig files of `$KUBECONFIG`, else
`~/.kube/config`, are checked as a `--kubeconfig` is, and read as client-go reads them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.kube.client import ClientSettings, KubeConfigError, build_api_client

ROOT = Path(__file__).resolve().parents[3]
RUN = ["run", "--cloud-provider=sim",
       f"--cloud-config={ROOT / 'examples' / 'cloud-configs' / 'general.yaml'}"]
WRONG_USER = ("apiVersion: v1\ncurrent-context: a\nusers: [{name: u, user: admin}]\n"
              "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
              "clusters: [{name: c, cluster: {server: 'https://203.0.113.1'}}]\n")
FINE = ("apiVersion: v1\ncurrent-context: a\nusers: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://203.0.113.1'}}]\n")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home without a kubeconfig, out of a pod, with no KUBECONFIG."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    (tmp_path / ".kube").mkdir()
    return tmp_path


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("argv", [RUN, ["simulate", "--from-cluster"]],
                         ids=["run", "simulate-from-cluster"])
def test_a_malformed_home_kubeconfig_exits_2_naming_the_file_and_field(
    argv: list[str], home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--kubeconfig` was checked, `~/.kube/config` not: its user that is a string escaped
    the client's loader as `AttributeError: 'str' object has no attribute 'path'`."""
    config = home / ".kube" / "config"
    config.write_text(WRONG_USER)
    assert main(argv) == 2
    assert error_line(capsys).endswith(
        f"kubeconfig '{config}': users[0].user: expected an object, got 'admin'")


def test_a_malformed_entry_of_kubeconfig_is_named_with_its_place_in_the_list(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "good").write_text(FINE)
    (home / "bad").write_text(WRONG_USER)
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(
        [str(home / "missing"), str(home / "good"), str(home / "bad")]))
    assert main(RUN) == 2
    assert error_line(capsys).endswith(
        f"KUBECONFIG entry 3 of 3 '{home / 'bad'}': users[0].user: expected an object, "
        "got 'admin'")


def test_a_kubeconfig_that_is_not_yaml_is_named(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "config").write_text("clusters: [unclosed\n")
    monkeypatch.setenv("KUBECONFIG", str(home / "config"))
    assert main(RUN) == 2
    assert (f"KUBECONFIG '{home / 'config'}': expected a kubeconfig in YAML, got text that is "
            "not valid YAML: ") in error_line(capsys)


def test_the_files_of_kubeconfig_are_merged_as_client_go_merges_them(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A context may name a cluster and a user of another file; the current context is
    the first file's (the second's `current-context` does not override it)."""
    (home / "contexts").write_text(
        "current-context: first\ncontexts:\n- {name: first, context: {cluster: one, user: u}}\n"
        "- {name: second, context: {cluster: two, user: u}}\n")
    (home / "clusters").write_text(
        "current-context: second\nusers: [{name: u, user: {token: t}}]\nclusters:\n"
        "- {name: one, cluster: {server: 'https://192.0.2.1'}}\n"
        "- {name: two, cluster: {server: 'https://192.0.2.2'}}\n")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(
        [str(home / "contexts"), str(home / "clusters")]))
    assert build_api_client(ClientSettings()).configuration.host == "https://192.0.2.1"


def test_a_reference_to_nothing_in_the_merged_files_names_the_file_holding_it(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "contexts").write_text(
        "current-context: first\ncontexts:\n- {name: first, context: {cluster: three}}\n")
    (home / "clusters").write_text(
        "clusters:\n- {name: one, cluster: {server: 'https://192.0.2.1'}}\n")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(
        [str(home / "contexts"), str(home / "clusters")]))
    with pytest.raises(KubeConfigError) as caught:
        build_api_client(ClientSettings())
    assert str(caught.value) == (
        f"KUBECONFIG entry 1 of 2 '{home / 'contexts'}': contexts[0].context.cluster: "
        "expected the name of one of the clusters (one), got 'three'")


def test_no_kubeconfig_at_all_says_what_to_give_and_where_it_looked(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(KubeConfigError) as caught:
        build_api_client(ClientSettings())
    assert str(caught.value) == (
        "no Kubernetes configuration: pass --kubeconfig or --kubernetes, set KUBECONFIG, or "
        f"run in a pod with a service account (no file '{home / '.kube' / 'config'}')")
    monkeypatch.setenv("KUBECONFIG", str(home / "missing"))
    with pytest.raises(KubeConfigError, match=r"\(no file of KUBECONFIG='.*/missing' exists\)$"):
        build_api_client(ClientSettings())
