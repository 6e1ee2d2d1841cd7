"""pytest fixtures for tests on a real control plane (see ``clusterscaler.testing.controlplane``).

- ``real_cluster`` (session): etcd, kube-apiserver, kube-scheduler, kube-controller-manager
  and the kwok controller, built once (at collection, before any test's timeout starts) and
  started once per run on 127.0.0.1; stopped at the end of the session.
- ``kwok_cluster`` (function): the same cluster, emptied after the test of what tests add
  (kwok nodes, test namespaces, the autoscaler's objects in kube-system), so tests that
  scale node groups do not see each other's nodes.

Tests that use them carry the ``realcluster`` marker. The binaries come from the Go module
proxy: a machine without Go fails these tests with the build's error, it does not skip them.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.testing import controlplane

MARKER = "realcluster"


@dataclass
class RealCluster:
    """A running control plane: its directory, kubeconfig and a few admin helpers."""

    root: Path
    server: str
    namespaces: list[str] = field(default_factory=list)

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                kubeconfig: Path | None = None, timeout: float = 120) -> str:
        """Run the built kubectl as cluster-admin (or with ``kubeconfig``); return stdout."""
        cmd = [str(controlplane.binary("kubectl")),
               f"--kubeconfig={kubeconfig or self.kubeconfig}", *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True,
                              timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}"
            )
        return proc.stdout

    def apply(self, *documents: dict[str, Any] | str) -> None:
        """``kubectl apply`` of objects (dicts) or manifest text."""
        for doc in documents:
            text = json.dumps(doc) if isinstance(doc, dict) else doc
            self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=text)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def items(self, *args: str) -> list[dict[str, Any]]:
        return list(self.get(*args).get("items") or [])

    def namespace(self, prefix: str = "e2e") -> str:
        """A fresh namespace, deleted after the test (by ``kwok_cluster``)."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.kubectl("create", "namespace", name)
        self.namespaces.append(name)
        self.wait_for(lambda: bool(self.items("serviceaccounts", "-n", name)),
                      f"the default ServiceAccount of namespace {name}")
        return name

    def api_client(self, kubeconfig: Path | None = None) -> Any:
        """An official ``kubernetes.client.ApiClient`` (admin unless ``kubeconfig``)."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig or self.kubeconfig),
                                client_configuration=configuration)
        return client.ApiClient(configuration)

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path) -> Path:
        """A kubeconfig that authenticates as ServiceAccount ``namespace/name`` (TokenRequest)."""
        token = self.kubectl("create", "token", name, "-n", namespace, "--duration=2h").strip()
        doc = controlplane.kubeconfig_document(
            self.server, self.root / "pki" / "apiserver.crt", f"{namespace}-{name}", token
        )
        path.write_text(json.dumps(doc))
        return path

    def restart_apiserver(self) -> None:
        controlplane.restart(self.root, "kube-apiserver")

    def restart_etcd(self) -> None:
        controlplane.restart(self.root, "etcd")

    def compact_etcd(self) -> int:
        return controlplane.compact_etcd(self.root)

    def log(self, component: str) -> str:
        return (self.root / "logs" / f"{component}.log").read_text(errors="replace")

    @staticmethod
    def wait_for(check: Callable[[], bool], what: str, timeout: float = 60.0,
                 interval: float = 0.25) -> None:
        """Poll ``check`` until true; fail naming ``what`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")

    def reset(self) -> None:
        """Remove what tests add: test namespaces, then every node, the autoscaler's status
        and Lease."""
        for ns in self.namespaces:
            self.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found",
                         check=False)
            # Pods of nodes already gone have no kubelet (kwok) to confirm their deletion.
            self.kubectl("delete", "pods", "--all", "-n", ns, "--force", "--grace-period=0",
                         "--wait=false", check=False)
        gone = set(self.namespaces)
        self.wait_for(
            lambda: not gone & {n["metadata"]["name"] for n in self.items("namespaces")},
            f"namespaces {', '.join(sorted(gone))} to be deleted", timeout=90, interval=0.5,
        )
        self.namespaces = []
        self.kubectl("delete", "nodes", "--all", "--wait=false", check=False)
        self.kubectl("delete", "configmap", "-n", "kube-system", "--ignore-not-found",
                     "cluster-autoscaler-status", check=False)
        self.kubectl("delete", "lease", "-n", "kube-system", "--ignore-not-found",
                     "cluster-autoscaler", check=False)
        self.wait_for(lambda: not self.items("nodes"), "every node to be deleted")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: needs the real control plane (kube-apiserver, etcd, kube-scheduler, "
        "kube-controller-manager, kwok) built from Go modules; see docs/testing.md",
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the binaries before the first test, so a cold build is not charged to a test's
    timeout."""
    if any(item.get_closest_marker(MARKER) for item in session.items):
        controlplane.build()


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    root = tmp_path_factory.mktemp("controlplane")
    handle = controlplane.start(root)
    try:
        yield RealCluster(root=root, server=handle.server)
    finally:
        controlplane.stop(root)


@pytest.fixture
def kwok_cluster(real_cluster: RealCluster) -> Iterator[RealCluster]:
    yield real_cluster
    real_cluster.reset()
