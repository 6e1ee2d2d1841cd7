"""The control plane script's build recipe and its errors (no Go build, no cluster)."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest
from clusterscaler.testing import controlplane

KUBERNETES_GO_MOD = """module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgo.etcd.io/etcd/server/v3 v3.6.8 // indirect
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apimachinery => ./staging/src/k8s.io/apimachinery
\tk8s.io/cri-streaming => ./staging/src/k8s.io/cri-streaming
\tk8s.io/kube-scheduler => ./staging/src/k8s.io/kube-scheduler
)
"""


def test_staging_modules_are_read_from_the_go_mod() -> None:
    assert controlplane.staging_modules(KUBERNETES_GO_MOD) == [
        "k8s.io/api", "k8s.io/apimachinery", "k8s.io/cri-streaming", "k8s.io/kube-scheduler",
    ]


def test_helper_module_pins_every_staging_module_to_the_matching_version() -> None:
    text = controlplane.kubernetes_helper_go_mod(KUBERNETES_GO_MOD)
    version = controlplane.VERSIONS["kubernetes"]
    staging = "v0." + version.split(".", 1)[1]
    assert f"\tk8s.io/kubernetes {version}" in text
    assert f"\tgo.etcd.io/etcd/server/v3 {controlplane.VERSIONS['etcd']}" in text
    for module in controlplane.staging_modules(KUBERNETES_GO_MOD):
        assert f"\t{module} => {module} {staging}" in text
    # Only the main module's godebug line applies: it is copied.
    assert "godebug default=go1.26" in text
    assert "go 1.26.0" in text


def test_the_cache_is_keyed_by_every_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CLUSTERSCALER_CACHE", str(tmp_path))
    first = controlplane.bin_dir()
    monkeypatch.setitem(controlplane.VERSIONS, "kwok", "v0.0.1")
    assert controlplane.bin_dir() != first
    assert first.is_relative_to(tmp_path)


def test_a_missing_go_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CLUSTERSCALER_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(controlplane.ControlPlaneError, match="go: not found on PATH"):
        controlplane.build()


def test_an_unknown_binary_names_the_choices() -> None:
    with pytest.raises(controlplane.ControlPlaneError, match="kube-apiserver"):
        controlplane.binary("kubelet")


def test_stop_without_start_says_so(tmp_path: Path) -> None:
    with pytest.raises(controlplane.ControlPlaneError, match="was `start"):
        controlplane.stop(tmp_path)


def test_cli_reports_errors_with_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert controlplane.main(["stop", str(tmp_path)]) == 1
    assert "controlplane.sh stop:" in capsys.readouterr().err


def test_a_component_that_exits_shows_its_log(tmp_path: Path) -> None:
    cluster = controlplane.Cluster(str(tmp_path), 1, 2, 3)
    (tmp_path / "logs").mkdir()
    cluster.components["etcd"] = controlplane.Component("etcd", ["/bin/sh", "-c", "echo boom; exit 3"])
    controlplane._spawn(cluster, "etcd")
    with pytest.raises(controlplane.ControlPlaneError, match=r"(?s)etcd exited.*boom"):
        for _ in range(100):
            controlplane._check_alive(cluster, ["etcd"])
            time.sleep(0.05)


def test_stop_leaves_a_reused_pid_alone(tmp_path: Path) -> None:
    """A pid in cluster.json that now belongs to another program is not killed."""
    other = subprocess.Popen(["sleep", "30"])
    try:
        cluster = controlplane.Cluster(str(tmp_path), 1, 2, 3)
        cluster.components["etcd"] = controlplane.Component("etcd", ["/no/such/etcd"], other.pid)
        cluster.save()
        controlplane.stop(tmp_path)
        assert other.poll() is None
        assert json.loads((tmp_path / "cluster.json").read_text())["components"]["etcd"]["pid"] == 0
    finally:
        other.kill()
        other.wait()


def test_free_port_is_bindable() -> None:
    port = controlplane.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
