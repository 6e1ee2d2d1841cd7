"""A real Kubernetes control plane on 127.0.0.1: build, start, stop.

kube-apiserver, kube-scheduler, kube-controller-manager and kubectl are built from the
``k8s.io/kubernetes`` module, etcd from ``go.etcd.io/etcd/server/v3`` and the kwok controller
from ``sigs.k8s.io/kwok``, at the versions pinned in ``VERSIONS``, through the Go module
proxy. Binaries go to a cache directory outside the checkout, keyed by those versions, so a
second build is instant. Nothing of theirs is kept in the repository.

One entry point, ``scripts/controlplane.sh`` (this file run as a script)::

    controlplane.sh build               build every binary, helm included (cached)
    controlplane.sh path NAME           print a binary's path on the last line (builds it first)
    controlplane.sh start DIR           start a cluster whose state lives in DIR; exit 0 when ready
    controlplane.sh stop DIR            stop exactly the processes `start` started
    controlplane.sh restart-apiserver DIR
    controlplane.sh restart-etcd DIR
    controlplane.sh compact-etcd DIR    compact etcd to its current revision (watches get 410)

``start`` writes ``DIR/kubeconfig`` (cluster-admin, a static token) and ``DIR/cluster.json``
(ports, pids, paths). The module uses only the standard library so that it runs before any
virtual environment exists; the pytest fixture in ``clusterscaler.testing.realcluster``
imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

# The one place where the versions live. Kubernetes' own go.mod pins the etcd it is tested
# with (go.etcd.io/etcd/server/v3 v3.6.8 for 1.36.3): keep the two in step.
VERSIONS: dict[str, str] = {
    "kubernetes": "v1.36.3",
    "etcd": "v3.6.8",
    "kwok": "v0.8.0",
}

# Tools the tests use beside the cluster, each cached under its own version (a new Helm does
# not rebuild the control plane). helm renders, lints and installs the chart of deploy/helm.
TOOLS: dict[str, str] = {
    "helm": "v3.22.0",
}
TOOL_MODULES = {
    "helm": ("helm.sh/helm/v3/cmd/helm", "helm.sh/helm/v3/internal/version.version"),
}

KUBE_BINARIES = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl")
BINARIES = (*KUBE_BINARIES, "etcd", "kwok")
ALL_BINARIES = (*BINARIES, *TOOLS)

ADMIN_TOKEN = "clusterscaler-admin-token"  # loopback only; the cluster lives for one test run
HOST = "127.0.0.1"
READY_TIMEOUT = 180.0


class ControlPlaneError(Exception):
    """A build or start failed; the message says which component and why."""


# ---------------------------------------------------------------------------------------------
# Where things live


def cache_root() -> Path:
    """``$CLUSTERSCALER_CACHE``, else ``$XDG_CACHE_HOME/clusterscaler``, else ``~/.cache/...``."""
    explicit = os.environ.get("CLUSTERSCALER_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "clusterscaler"


def build_dir() -> Path:
    key = "_".join(f"{name}-{version}" for name, version in sorted(VERSIONS.items()))
    return cache_root() / "controlplane" / key


def bin_dir() -> Path:
    return build_dir() / "bin"


def stages_dir() -> Path:
    return build_dir() / "stages"


def tool_path(name: str) -> Path:
    return cache_root() / "tools" / f"{name}-{TOOLS[name]}" / name


# ---------------------------------------------------------------------------------------------
# Build


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise ControlPlaneError(
            "go: not found on PATH; the control plane is built from Go modules "
            "(Go 1.26 or newer with the module proxy)"
        )
    return go


def _run(cmd: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(
        list(cmd), cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
        raise ControlPlaneError(f"{' '.join(cmd)} (in {cwd}) exited {proc.returncode}:\n{tail}")
    return proc.stdout


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["CGO_ENABLED"] = "0"
    env.setdefault("GOFLAGS", "-buildvcs=false")
    return env


def _module_dir(go: str, module: str, version: str, cwd: Path) -> Path:
    """Download ``module@version`` through the proxy and return its directory."""
    out = _run([go, "mod", "download", "-json", f"{module}@{version}"], cwd, _go_env())
    info = json.loads(out)
    if info.get("Error"):
        raise ControlPlaneError(f"module {module}@{version}: {info['Error']}")
    return Path(info["Dir"])


STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[A-Za-z0-9._-]+)\s*=>\s*\./staging/", re.MULTILINE)


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The staging modules that ``k8s.io/kubernetes`` replaces with ``./staging/src/...``.

    The module zip leaves ``staging/`` out and the proxy serves them as ``v0.<minor>.<patch>``,
    so a consumer module replaces each with that version (as upstream CA's go.mod does).
    """
    return sorted(set(STAGING_REPLACE.findall(kubernetes_go_mod)))


def _godebug_line(go_mod: str) -> str:
    match = re.search(r"^godebug .*$", go_mod, re.MULTILINE)
    return match.group(0) if match else ""


def _go_directive(go_mod: str) -> str:
    match = re.search(r"^go (\S+)$", go_mod, re.MULTILINE)
    return match.group(1) if match else "1.26.0"


def kubernetes_helper_go_mod(kubernetes_go_mod: str) -> str:
    """go.mod of our helper module that builds the Kubernetes binaries and etcd."""
    k8s = VERSIONS["kubernetes"]
    staging_version = "v0." + k8s.split(".", 1)[1]  # v1.36.3 -> v0.36.3
    lines = [
        "module clusterscaler.local/controlplane",
        "",
        f"go {_go_directive(kubernetes_go_mod)}",
        "",
        _godebug_line(kubernetes_go_mod),
        "",
        "require (",
        f"\tk8s.io/kubernetes {k8s}",
        f"\tgo.etcd.io/etcd/server/v3 {VERSIONS['etcd']}",
        ")",
        "",
        "replace (",
        *(f"\t{mod} => {mod} {staging_version}" for mod in staging_modules(kubernetes_go_mod)),
        ")",
        "",
    ]
    return "\n".join(lines)


TOOLS_GO = """//go:build tools

// Package tools names the main packages this helper module builds.
package tools

import (
\t_ "go.etcd.io/etcd/server/v3"
\t_ "k8s.io/kubernetes/cmd/kube-apiserver"
\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"
\t_ "k8s.io/kubernetes/cmd/kube-scheduler"
\t_ "k8s.io/kubernetes/cmd/kubectl"
)
"""


def _version_ldflags() -> str:
    k8s = VERSIONS["kubernetes"]
    major, minor = k8s.lstrip("v").split(".")[:2]
    pairs = {
        "gitVersion": k8s,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.{name}={value}" for name, value in pairs.items()]
    return " ".join(flags)


def _build_kubernetes(go: str, out: Path) -> None:
    src = build_dir() / "src" / "kubernetes"
    src.mkdir(parents=True, exist_ok=True)
    kube_dir = _module_dir(go, "k8s.io/kubernetes", VERSIONS["kubernetes"], src)
    go_mod = (kube_dir / "go.mod").read_text()
    if not staging_modules(go_mod):
        raise ControlPlaneError(f"{kube_dir}/go.mod: no `k8s.io/X => ./staging/...` replace lines")
    (src / "go.mod").write_text(kubernetes_helper_go_mod(go_mod))
    (src / "tools.go").write_text(TOOLS_GO)
    env = _go_env()
    _run([go, "mod", "tidy"], src, env)
    packages = [f"k8s.io/kubernetes/cmd/{name}" for name in KUBE_BINARIES]
    _run(
        [go, "build", "-trimpath", "-tags", "selinux,notest", "-ldflags", _version_ldflags(),
         "-o", str(out) + "/", *packages],
        src, env,
    )
    _run(
        [go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "etcd"),
         "go.etcd.io/etcd/server/v3"],
        src, env,
    )


def _build_kwok(go: str, out: Path) -> None:
    src = build_dir() / "src" / "kwok"
    src.mkdir(parents=True, exist_ok=True)
    env = _go_env()
    env["GOBIN"] = str(out)
    _run([go, "install", "-trimpath", "-ldflags", "-s -w",
          f"sigs.k8s.io/kwok/cmd/kwok@{VERSIONS['kwok']}"], src, env)
    kwok_dir = _module_dir(go, "sigs.k8s.io/kwok", VERSIONS["kwok"], src)
    stages = stages_dir()
    stages.mkdir(parents=True, exist_ok=True)
    for rel in ("node/fast", "node/heartbeat-with-lease", "pod/fast"):
        folder = kwok_dir / "kustomize" / "stage" / rel
        for stage in sorted(folder.glob("*.yaml")):
            if stage.name == "kustomization.yaml":
                continue
            target = stages / f"{rel.replace('/', '-')}-{stage.name}"
            target.write_text(stage.read_text())
            target.chmod(0o644)


def _build_tool(go: str, name: str) -> Path:
    """``go install`` a tool at its pinned version, with that version stamped into it."""
    target = tool_path(name)
    if target.exists():
        return target
    package, version_var = TOOL_MODULES[name]
    version = TOOLS[name]
    target.parent.mkdir(parents=True, exist_ok=True)
    env = _go_env()
    env["GOBIN"] = str(target.parent)
    started = time.monotonic()
    _run([go, "install", "-trimpath", "-ldflags", f"-s -w -X {version_var}={version}",
          f"{package}@{version}"], target.parent, env)
    print(f"built {name} {version} into {target} in {time.monotonic() - started:.0f}s",
          file=sys.stderr)
    return target


def build(names: Sequence[str] = ALL_BINARIES) -> Path:
    """Build what is missing of ``names`` into the versioned cache; return the bin directory."""
    out = bin_dir()
    tools = [name for name in names if name in TOOLS]
    if tools:
        go = _go()
        for name in tools:
            _build_tool(go, name)
    missing = [name for name in names if name not in TOOLS and not (out / name).exists()]
    if not missing:
        return out
    go = _go()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if set(missing) & {*KUBE_BINARIES, "etcd"}:
        _build_kubernetes(go, out)
    if "kwok" in missing or not any(stages_dir().glob("*.yaml")):
        _build_kwok(go, out)
    print(f"built {', '.join(missing)} into {out} in {time.monotonic() - started:.0f}s",
          file=sys.stderr)
    return out


def binary(name: str) -> Path:
    if name in TOOLS:
        return _build_tool(_go(), name) if not tool_path(name).exists() else tool_path(name)
    if name not in BINARIES:
        raise ControlPlaneError(
            f"unknown binary {name!r}; expected one of {', '.join(ALL_BINARIES)}"
        )
    path = bin_dir() / name
    if not path.exists() or (name == "kwok" and not any(stages_dir().glob("*.yaml"))):
        build([name])
    return path


# ---------------------------------------------------------------------------------------------
# Start and stop


@dataclass
class Component:
    """One process of the cluster: how it was started and where it logs."""

    name: str
    args: list[str]
    pid: int = 0

    def log(self, root: Path) -> Path:
        return root / "logs" / f"{self.name}.log"


@dataclass
class Cluster:
    """What ``start`` wrote to ``DIR/cluster.json``; ``stop`` and the restarts read it back."""

    root: str
    etcd_port: int
    etcd_peer_port: int
    apiserver_port: int
    components: dict[str, Component] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return f"https://{HOST}:{self.apiserver_port}"

    @property
    def kubeconfig(self) -> Path:
        return Path(self.root) / "kubeconfig"

    def save(self) -> None:
        (Path(self.root) / "cluster.json").write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, root: Path) -> Cluster:
        path = root / "cluster.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ControlPlaneError(f"{path}: not found; was `start {root}` run?") from None
        components = {name: Component(**c) for name, c in data.pop("components").items()}
        return cls(components=components, **data)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ControlPlaneError("openssl: not found on PATH; it generates the service-account keys")
    _run([openssl, *args], cwd)


def _write_files(cluster: Cluster) -> None:
    root = Path(cluster.root)
    for sub in ("logs", "pki", "etcd"):
        (root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    pki = root / "pki"
    if not (pki / "sa.key").exists():
        _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
        _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    (root / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin,"system:masters"\n')
    scheduler = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(cluster.kubeconfig), "qps": 5000, "burst": 10000},
        "leaderElection": {"leaderElect": False},
    }
    (root / "scheduler.json").write_text(json.dumps(scheduler, indent=2))
    (root / "kwok.yaml").write_text(
        "\n---\n".join(p.read_text() for p in sorted(stages_dir().glob("*.yaml")))
    )


def kubeconfig_document(server: str, ca_file: Path, user: str, token: str) -> dict[str, object]:
    """A kubeconfig that trusts the apiserver's self-signed certificate and sends ``token``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "controlplane", "cluster": {
            "server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "controlplane", "user": user}}],
        "current-context": user,
    }


def _write_kubeconfig(cluster: Cluster) -> None:
    # The apiserver writes its serving certificate (and the CA that signed it) into
    # --cert-dir when it starts: the kubeconfig trusts that file.
    ca_file = Path(cluster.root) / "pki" / "apiserver.crt"
    doc = kubeconfig_document(cluster.server, ca_file, "admin", ADMIN_TOKEN)
    cluster.kubeconfig.write_text(json.dumps(doc, indent=2))


def _component_args(cluster: Cluster) -> dict[str, list[str]]:
    root = Path(cluster.root)
    bins = bin_dir()
    etcd_url = f"http://{HOST}:{cluster.etcd_port}"
    peer_url = f"http://{HOST}:{cluster.etcd_peer_port}"
    kubeconfig = str(cluster.kubeconfig)
    return {
        "etcd": [
            str(bins / "etcd"), "--name=controlplane", f"--data-dir={root / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=controlplane={peer_url}", "--unsafe-no-fsync",
            "--quota-backend-bytes=8589934592", "--log-level=warn",
        ],
        "kube-apiserver": [
            str(bins / "kube-apiserver"), f"--etcd-servers={etcd_url}",
            f"--cert-dir={root / 'pki'}", f"--secure-port={cluster.apiserver_port}",
            f"--bind-address={HOST}", f"--advertise-address={HOST}",
            "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
            "--authorization-mode=RBAC", f"--token-auth-file={root / 'tokens.csv'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={root / 'pki' / 'sa.pub'}",
            f"--service-account-signing-key-file={root / 'pki' / 'sa.key'}",
            # Throttling off: benchmarks load the apiserver far beyond its defaults.
            "--max-requests-inflight=0", "--max-mutating-requests-inflight=0",
            "--enable-priority-and-fairness=false",
            "--watch-cache=true", "--event-ttl=1h", "--v=1",
        ],
        "kube-controller-manager": [
            str(bins / "kube-controller-manager"), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            f"--bind-address={HOST}", "--secure-port=0", "--leader-elect=false",
            f"--service-account-private-key-file={root / 'pki' / 'sa.key'}",
            "--use-service-account-credentials=true",
            "--kube-api-qps=5000", "--kube-api-burst=10000",
            # The persistent-volume binder stays on: it binds pre-bound claims and
            # completes the bindings kube-scheduler's VolumeBinding starts (static local
            # volumes need no kubelet; the differential test's workloads use them).
            "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,"
            "-attachdetach,-ttl",
            "--v=1",
        ],
        "kube-scheduler": [
            str(bins / "kube-scheduler"), f"--config={root / 'scheduler.json'}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            f"--bind-address={HOST}", "--secure-port=0", "--v=1",
        ],
        "kwok": [
            str(bins / "kwok"), f"--kubeconfig={kubeconfig}", f"--config={root / 'kwok.yaml'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.128.0.0/10", f"--node-ip={HOST}", "--node-lease-duration-seconds=40",
            f"--server-address={HOST}:{free_port()}", "--v=1",
        ],
    }


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _spawn(cluster: Cluster, name: str) -> None:
    root = Path(cluster.root)
    component = cluster.components[name]
    log = component.log(root).open("ab")
    proc = subprocess.Popen(
        component.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        cwd=root, start_new_session=True,
    )
    log.close()
    component.pid = proc.pid
    cluster.save()
    # /proc shows the new program a moment after Popen returns.
    deadline = time.monotonic() + 5
    while not _alive(component) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)


def _alive(component: Component) -> bool:
    """Whether ``component.pid`` is still the process we started (not a reused pid)."""
    if component.pid <= 0:
        return False
    try:
        cmdline = Path(f"/proc/{component.pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{component.pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(component.pid, os.WNOHANG)
        return False
    return bool(cmdline) and cmdline[0].decode(errors="replace") == component.args[0]


def _check_alive(cluster: Cluster, names: Sequence[str]) -> None:
    for name in names:
        component = cluster.components[name]
        if not _alive(component):
            raise ControlPlaneError(
                f"{name} exited; last lines of {component.log(Path(cluster.root))}:\n"
                + _log_tail(component.log(Path(cluster.root)))
            )


def _get(cluster: Cluster, path: str) -> tuple[int, bytes]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(
        cluster.server + path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def _wait(cluster: Cluster, what: str, names: Sequence[str],
          probe: str, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    last = (0, b"")
    while time.monotonic() < deadline:
        _check_alive(cluster, names)
        last = _get(cluster, probe)
        if last[0] == 200:
            return
        time.sleep(0.25)
    raise ControlPlaneError(
        f"{what}: {cluster.server}{probe} answered {last[0] or 'nothing'} after {timeout:.0f}s: "
        f"{last[1][:500].decode(errors='replace')}"
    )


def _wait_etcd(cluster: Cluster) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    url = f"http://{HOST}:{cluster.etcd_port}/health"
    while time.monotonic() < deadline:
        _check_alive(cluster, ["etcd"])
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if json.loads(response.read()).get("health") == "true":
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.2)
    raise ControlPlaneError(f"etcd: {url} not healthy after {READY_TIMEOUT:.0f}s")


ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def start(root: Path) -> Cluster:
    """Start a cluster whose state lives in ``root``; return once it is ready."""
    root = root.resolve()
    build()
    root.mkdir(parents=True, exist_ok=True)
    if (root / "cluster.json").exists():
        previous = Cluster.load(root)
        running = [n for n, c in previous.components.items() if _alive(c)]
        if running:
            raise ControlPlaneError(
                f"{root}: a cluster is already running there ({', '.join(running)}); "
                f"run `stop {root}` first"
            )
    cluster = Cluster(str(root), free_port(), free_port(), free_port())
    for port in (cluster.etcd_port, cluster.etcd_peer_port, cluster.apiserver_port):
        if not _port_free(port):
            raise ControlPlaneError(f"port {HOST}:{port} is in use")
    _write_files(cluster)
    cluster.components = {
        name: Component(name, args) for name, args in _component_args(cluster).items()
    }
    try:
        _spawn(cluster, "etcd")
        _wait_etcd(cluster)
        _spawn(cluster, "kube-apiserver")
        _wait(cluster, "kube-apiserver", ["etcd", "kube-apiserver"], "/readyz")
        _write_kubeconfig(cluster)
        for name in ORDER[2:]:
            _spawn(cluster, name)
        _wait(cluster, "default ServiceAccount", ORDER,
              "/api/v1/namespaces/default/serviceaccounts/default")
        _check_alive(cluster, ORDER)
    except BaseException:
        stop(root)
        raise
    return cluster


def _terminate(component: Component, timeout: float = 5.0) -> None:
    if not _alive(component):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(component.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(component):
        time.sleep(0.1)
    if _alive(component):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(component.pid, signal.SIGKILL)
        while _alive(component):
            time.sleep(0.05)


def stop(root: Path) -> None:
    """Stop exactly the processes ``start`` started in ``root`` (their pids in cluster.json)."""
    cluster = Cluster.load(root.resolve())
    for name in reversed(ORDER):
        component = cluster.components.get(name)
        if component is not None:
            _terminate(component)
            component.pid = 0
    cluster.save()


def restart(root: Path, name: str) -> Cluster:
    """Stop one component and start it again with the same arguments and data."""
    cluster = Cluster.load(root.resolve())
    _terminate(cluster.components[name])
    _spawn(cluster, name)
    if name == "etcd":
        _wait_etcd(cluster)
    _wait(cluster, f"{name} restarted", ORDER, "/readyz")
    return cluster


def compact_etcd(root: Path) -> int:
    """Compact etcd's history up to its current revision (what the apiserver does every
    five minutes), so that watches resuming from an older resourceVersion get 410 Gone.
    Returns the revision compacted to."""
    cluster = Cluster.load(root.resolve())
    base = f"http://{HOST}:{cluster.etcd_port}/v3/kv"

    def post(path: str, body: dict[str, object]) -> dict[str, object]:
        request = urllib.request.Request(
            base + path, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return dict(json.loads(response.read()))

    header = post("/range", {"key": "Lw==", "limit": 1})["header"]  # key "/"
    revision = int(header["revision"])  # type: ignore[index]
    post("/compaction", {"revision": revision, "physical": True})
    return revision


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="controlplane.sh", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build every binary into the versioned cache")
    path_cmd = sub.add_parser("path", help="print a binary's path (building it first)")
    path_cmd.add_argument("name", choices=[*ALL_BINARIES, "stages"])
    for command in ("start", "stop", "restart-apiserver", "restart-etcd", "compact-etcd"):
        sub.add_parser(command).add_argument("dir", type=Path)
    sub.add_parser("versions", help="print the pinned versions as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            print(build())
        elif args.command == "path":
            print(stages_dir() if args.name == "stages" else binary(args.name))
        elif args.command == "versions":
            print(json.dumps({**VERSIONS, **TOOLS}))
        elif args.command == "start":
            cluster = start(args.dir)
            print(f"ready: {cluster.server}; kubeconfig {cluster.kubeconfig}")
        elif args.command == "stop":
            stop(args.dir)
        elif args.command == "restart-apiserver":
            restart(args.dir, "kube-apiserver")
        elif args.command == "restart-etcd":
            restart(args.dir, "etcd")
        elif args.command == "compact-etcd":
            print(f"compacted to revision {compact_etcd(args.dir)}")
    except ControlPlaneError as err:
        print(f"controlplane.sh {args.command}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
