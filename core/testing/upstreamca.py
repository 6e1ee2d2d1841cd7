"""Upstream Cluster Autoscaler (CA), built from its Go module for side-by-side runs.

The pinned release is ``RELEASE``: the git tag ``cluster-autoscaler-1.36.1`` of
kubernetes/autoscaler, commit ``COMMIT``. The module ``k8s.io/autoscaler/cluster-autoscaler``
has no Go-module tags (its release tags carry the ``cluster-autoscaler-`` prefix), so the
commit is pinned as the pseudo-version ``PSEUDO_VERSION`` (``v0.0.0-<committer time,
UTC>-<12 hex of the commit>``), and its nested ``apis`` module at the same commit.

A helper module of ours requires both and copies CA's ``replace`` lines (the Kubernetes
staging modules at v0.36.2 and two of its third-party pins; only the main module's
``replace`` lines apply in Go), with CA's ``go.sum``. ``go build -tags kwok`` then builds
CA with its kwok cloud provider only (``cloudprovider/router/router_kwok.go``), the way
its Makefile does (``-ldflags -s -X .../version.ClusterAutoscalerVersion=<release>``).

Where the source comes from. First the Go module proxy, by commit. The proxy this project
uses refuses this module at every version::

    $ go list -m -json k8s.io/autoscaler/cluster-autoscaler@35e8a280425c76a4040f57ae0fa232a952c02024
    go: k8s.io/autoscaler/cluster-autoscaler@35e8a280425c76a4040f57ae0fa232a952c02024:
    invalid version: reading https://proxy.golang.org/k8s.io/autoscaler/cluster-autoscaler/@v/
    35e8a280425c76a4040f57ae0fa232a952c02024.info: 403 Forbidden
            server response: This module version is not available.

(and the same 403 for ``@v0.0.0-20260722070747-35e8a280425c``, for ``.../apis`` at that
version and for ``@v/list``). When the proxy refuses, the module's files are taken from a
git repository of kubernetes/autoscaler that holds the commit (``source=`` or
``$CLUSTERSCALER_CA_SOURCE``: a clone or a bare mirror): ``git archive COMMIT
cluster-autoscaler`` is unpacked into the cache and the helper module replaces both modules
with that directory, at the same pseudo-version. Every other module (about 300, the
Kubernetes staging modules included) still comes from the proxy, checked against CA's
``go.sum``.

The binary goes to ``<cache>/upstream-ca/<release>_<commit12>/bin/cluster-autoscaler``
beside the control plane's (``controlplane.cache_root()``), with ``build.json`` saying what
was built, from where, with which Go and in how long. Nothing of upstream's is kept in the
repository.

The same helper module builds upstream's example external gRPC cloud provider service
(``cloudprovider/externalgrpc/examples/external-grpc-cloud-provider-service``: its
``wrapper`` package serves any of CA's cloud providers as the ``externalgrpc.proto``
``CloudProvider`` service), with ``-tags kwok`` so that it wraps CA's kwok provider, into
``bin/external-grpc-cloud-provider-service`` beside CA. Its ``main.go`` cannot serve kwok
as it is: it builds the provider with no informer factory
(``cloudBuilder.NewCloudProvider(autoscalingOptions, nil)``) and the kwok provider takes
its node lister from that factory, so the example panics at start::

    panic: runtime error: invalid memory address or nil pointer dereference
    k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok.BuildKwok(...)
        .../cloudprovider/kwok/kwok_provider.go:219

so the helper module has a ``main`` package of its own (``SERVICE_MAIN``): upstream's
example main with the same flags and the same mutual TLS, plus ``--kubeconfig``, giving the
provider a started informer factory; the service itself is upstream's ``wrapper`` package,
unchanged. Like the kwok provider in CA, it reads the cluster from ``$KUBECONFIG`` with
``KWOK_PROVIDER_MODE=local`` and its ConfigMaps from ``$POD_NAMESPACE``.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from clusterscaler.testing import controlplane
from clusterscaler.testing.controlplane import ControlPlaneError

RELEASE = "cluster-autoscaler-1.36.1"
VERSION = "1.36.1"
COMMIT = "35e8a280425c76a4040f57ae0fa232a952c02024"
COMMIT_TIME = "20260722070747"  # the commit's committer time, UTC (2026-07-22T07:07:47Z)
PSEUDO_VERSION = f"v0.0.0-{COMMIT_TIME}-{COMMIT[:12]}"
MODULE = "k8s.io/autoscaler/cluster-autoscaler"
APIS_MODULE = f"{MODULE}/apis"
SUBDIR = "cluster-autoscaler"  # the module's folder in kubernetes/autoscaler
BUILD_TAGS = "kwok"
SOURCE_ENV = "CLUSTERSCALER_CA_SOURCE"
BINARY = "cluster-autoscaler"
SERVICE_BINARY = "external-grpc-cloud-provider-service"
SERVICE_WRAPPER = (
    f"{MODULE}/cloudprovider/externalgrpc/examples/external-grpc-cloud-provider-service/wrapper"
)
SERVICE_MAIN_DIR = "externalgrpcservice"  # the main package's folder in the helper module


def build_dir() -> Path:
    return controlplane.cache_root() / "upstream-ca" / f"{RELEASE}_{COMMIT[:12]}"


def binary_path() -> Path:
    return build_dir() / "bin" / BINARY


def built() -> bool:
    return binary_path().exists()


def service_path() -> Path:
    """Upstream's example external gRPC cloud provider service, wrapping CA's kwok provider."""
    return build_dir() / "bin" / SERVICE_BINARY


def service_built() -> bool:
    return service_path().exists()


@dataclass
class BuildInfo:
    """What ``build`` wrote to ``build.json`` beside the binary."""

    release: str
    commit: str
    pseudo_version: str
    source: str  # "module proxy" or "git <path>"
    go_version: str
    build_seconds: float
    binary: str
    # The external gRPC provider service, built with CA (absent from a build.json of a CA
    # built before it).
    service_binary: str | None = None
    service_build_seconds: float | None = None

    @classmethod
    def load(cls) -> BuildInfo | None:
        path = build_dir() / "build.json"
        if not path.exists():
            return None
        return cls(**json.loads(path.read_text()))


# ---------------------------------------------------------------------------------------------
# The helper module


REPLACE_LINE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+(\S+))?\s*=>\s*(\S+)(?:\s+(\S+))?\s*$")


def replace_lines(ca_go_mod: str) -> list[str]:
    """CA's ``replace`` directives as ``old => new version`` lines, without those to local
    paths (``./apis``): the helper module pins ``apis`` at CA's commit instead."""
    lines: list[str] = []
    in_block = False
    for raw in ca_go_mod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if line.startswith("replace ("):
            in_block = True
            continue
        if in_block and line == ")":
            in_block = False
            continue
        if not (in_block or line.startswith("replace ")):
            continue
        match = REPLACE_LINE.match(line)
        if match is None:
            continue
        old, old_version, new, new_version = match.groups()
        if new.startswith(("./", "../", "/")) or new_version is None:
            continue
        left = f"{old} {old_version}" if old_version else old
        lines.append(f"{left} => {new} {new_version}")
    return lines


def helper_go_mod(ca_go_mod: str, local_source: str | None) -> str:
    """go.mod of our helper module that builds CA at ``PSEUDO_VERSION``.

    ``local_source`` is the folder (relative to the helper) holding the module's files when
    the proxy would not serve them; both modules are then replaced with it.
    """
    replaces = replace_lines(ca_go_mod)
    if local_source is not None:
        replaces += [f"{MODULE} => {local_source}", f"{APIS_MODULE} => {local_source}/apis"]
    godebug = re.search(r"^godebug .*$", ca_go_mod, re.MULTILINE)
    go_directive = re.search(r"^go (\S+)$", ca_go_mod, re.MULTILINE)
    return "\n".join([
        "module clusterscaler.local/upstreamca",
        "",
        f"go {go_directive.group(1) if go_directive else '1.26.0'}",
        "",
        godebug.group(0) if godebug else "",
        "",
        f"// {RELEASE} is commit {COMMIT} of kubernetes/autoscaler.",
        "require (",
        f"\t{MODULE} {PSEUDO_VERSION}",
        f"\t{APIS_MODULE} {PSEUDO_VERSION}",
        ")",
        "",
        "replace (",
        *(f"\t{line}" for line in replaces),
        ")",
        "",
    ])


def _ldflags() -> str:
    return f"-s -X {MODULE}/version.ClusterAutoscalerVersion={VERSION}"


# The main package of the service: upstream's example main.go with its flags and its mutual
# TLS (the client's certificate required and verified against --ca-cert), serving CA's
# provider through upstream's wrapper; the provider gets a started informer factory, which
# upstream's main does not give it.
SERVICE_MAIN = """\
// Upstream's example external gRPC cloud provider service (its wrapper package), serving a
// cloud provider of cluster-autoscaler that is given a started informer factory.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	cloudBuilder "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/builder"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc/protos"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	coreoptions "k8s.io/autoscaler/cluster-autoscaler/core/options"
	"k8s.io/client-go/informers"
	kubeclient "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	klog "k8s.io/klog/v2"

	"WRAPPER"

	_ "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/router"
)

type multiStringFlag []string

func (f *multiStringFlag) String() string     { return "[" + strings.Join(*f, " ") + "]" }
func (f *multiStringFlag) Set(v string) error { *f = append(*f, v); return nil }

var (
	nodeGroups             multiStringFlag
	nodeGroupAutoDiscovery multiStringFlag

	address       = flag.String("address", ":8086", "The address to expose the grpc service.")
	keyCert       = flag.String("key-cert", "", "The path to the certificate key file. Empty string for insecure communication.")
	cert          = flag.String("cert", "", "The path to the certificate file. Empty string for insecure communication.")
	cacert        = flag.String("ca-cert", "", "The path to the ca certificate file. Empty string for insecure communication.")
	cloudProvider = flag.String("cloud-provider", cloudBuilder.DefaultCloudProvider(), "Cloud provider type.")
	cloudConfig   = flag.String("cloud-config", "", "The path to the cloud provider configuration file.")
	clusterName   = flag.String("cluster-name", "", "Autoscaled cluster name, if available")
	kubeconfig    = flag.String("kubeconfig", "", "The kubeconfig of the cluster the provider's informers watch (default: $KUBECONFIG).")
)

func main() {
	flag.Var(&nodeGroups, "nodes", "sets min,max size and other configuration data for a node group in a format accepted by cloud provider. Can be used multiple times. Format: <min>:<max>:<other...>")
	flag.Var(&nodeGroupAutoDiscovery, "node-group-auto-discovery", "One or more definition(s) of node group auto-discovery. Can be used multiple times.")
	klog.InitFlags(nil)
	flag.Parse()

	var s *grpc.Server
	if *keyCert == "" || *cert == "" || *cacert == "" {
		klog.V(1).Info("no cert specified, using insecure")
		s = grpc.NewServer()
	} else {
		certificate, err := tls.LoadX509KeyPair(*cert, *keyCert)
		if err != nil {
			klog.Fatalf("failed to read certificate files: %s", err)
		}
		certPool := x509.NewCertPool()
		bs, err := os.ReadFile(*cacert)
		if err != nil {
			klog.Fatalf("failed to read client ca cert: %s", err)
		}
		if !certPool.AppendCertsFromPEM(bs) {
			klog.Fatal("failed to append client certs")
		}
		s = grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
			ClientAuth:   tls.RequireAndVerifyClientCert,
			Certificates: []tls.Certificate{certificate},
			ClientCAs:    certPool,
		})))
	}

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		klog.Fatalf("failed to load the kubeconfig: %v", err)
	}
	informerFactory := informers.NewSharedInformerFactory(kubeclient.NewForConfigOrDie(restConfig), 0)

	options := &coreoptions.AutoscalerOptions{
		AutoscalingOptions: config.AutoscalingOptions{
			CloudProviderName:      *cloudProvider,
			CloudConfig:            *cloudConfig,
			NodeGroupAutoDiscovery: nodeGroupAutoDiscovery,
			NodeGroups:             nodeGroups,
			ClusterName:            *clusterName,
			UserAgent:              "user-agent",
		},
	}
	provider := cloudBuilder.NewCloudProvider(options, informerFactory)
	stop := make(chan struct{})
	informerFactory.Start(stop)
	informerFactory.WaitForCacheSync(stop)

	lis, err := net.Listen("tcp", *address)
	if err != nil {
		klog.Fatalf("failed to listen: %s", err)
	}
	protos.RegisterCloudProviderServer(s, wrapper.NewCloudProviderGrpcWrapper(provider))
	klog.V(1).Infof("Server ready at: %s", lis.Addr())
	if err := s.Serve(lis); err != nil {
		klog.Fatalf("failed to serve: %v", err)
	}
}
""".replace("WRAPPER", SERVICE_WRAPPER)


# ---------------------------------------------------------------------------------------------
# Where the module's files come from


def _from_proxy(go: str, cwd: Path) -> tuple[Path, Path] | str:
    """The module and ``apis`` directories from the proxy, or the proxy's refusal."""
    dirs: list[Path] = []
    for module in (MODULE, APIS_MODULE):
        proc = subprocess.run(
            [go, "mod", "download", "-json", f"{module}@{COMMIT}"], cwd=cwd,
            env=controlplane._go_env(), capture_output=True, text=True, check=False,
        )
        try:
            info = json.loads(proc.stdout)
        except ValueError:
            info = {"Error": (proc.stdout + proc.stderr).strip()}
        if proc.returncode != 0 or info.get("Error") or not info.get("Dir"):
            return f"go mod download {module}@{COMMIT}: {info.get('Error') or proc.stderr.strip()}"
        dirs.append(Path(info["Dir"]))
    return dirs[0], dirs[1]


def _git(source: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    git = shutil.which("git")
    if git is None:
        raise ControlPlaneError("git: not found on PATH; it reads CA's source from " + str(source))
    return subprocess.run([git, "-C", str(source), *args], capture_output=True, check=False)


def _from_git(source: Path, target: Path) -> None:
    """Unpack ``SUBDIR`` at ``COMMIT`` from the git repository ``source`` into ``target``."""
    found = _git(source, "cat-file", "-e", f"{COMMIT}^{{commit}}")
    if found.returncode != 0:
        raise ControlPlaneError(
            f"{source}: no commit {COMMIT} ({RELEASE}); expected a clone or mirror of "
            "kubernetes/autoscaler that holds that release"
        )
    archive = _git(source, "archive", "--format=tar", COMMIT, SUBDIR)
    if archive.returncode != 0:
        raise ControlPlaneError(
            f"git archive {COMMIT} {SUBDIR} in {source}: {archive.stderr.decode(errors='replace')}"
        )
    if target.exists():
        shutil.rmtree(target)
    staging = target.parent / (target.name + ".unpack")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(staging, filter="data")
    (staging / SUBDIR).rename(target)
    staging.rmdir()


# ---------------------------------------------------------------------------------------------
# Build


def build(source: Path | None = None, *, force: bool = False) -> Path:
    """Build CA and the external gRPC provider service into the cache (each unless it is
    there and not ``force``); return CA's binary.

    ``source``: a git repository of kubernetes/autoscaler, used when the proxy refuses the
    module (default ``$CLUSTERSCALER_CA_SOURCE``).
    """
    out = binary_path()
    service = service_path()
    build_ca = force or not out.exists()
    build_service = force or not service.exists()
    if not (build_ca or build_service):
        return out

    go = controlplane._go()
    root = build_dir()
    helper = root / "src"
    helper.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    fetched = _from_proxy(go, helper)
    local: str | None = None
    if isinstance(fetched, tuple):
        module_dir, apis_dir = fetched
        origin = "module proxy"
    else:
        given = source or (Path(os.environ[SOURCE_ENV]) if os.environ.get(SOURCE_ENV) else None)
        if given is None:
            raise ControlPlaneError(
                f"the module proxy refused CA ({fetched}); give a git repository of "
                f"kubernetes/autoscaler holding {RELEASE} (commit {COMMIT}) with --ca-source "
                f"or ${SOURCE_ENV}"
            )
        module_dir = helper / SUBDIR
        _from_git(given.resolve(), module_dir)
        apis_dir = module_dir / "apis"
        local = f"./{SUBDIR}"
        origin = f"git {given.resolve()}"

    ca_go_mod = (module_dir / "go.mod").read_text()
    (helper / "go.mod").write_text(helper_go_mod(ca_go_mod, local))
    sums: dict[str, None] = {}
    for folder in (module_dir, apis_dir):
        for line in (folder / "go.sum").read_text().splitlines():
            if line.strip():
                sums[line.strip()] = None
    (helper / "go.sum").write_text("\n".join(sums) + "\n")

    env = controlplane._go_env()
    out.parent.mkdir(parents=True, exist_ok=True)
    info = BuildInfo.load()
    if build_ca or info is None:
        # -mod=mod: the module graph is CA's own go.mod (plus our replace lines); go resolves
        # only what the kwok build imports, not the forty other providers' SDKs that `tidy`
        # would.
        controlplane._run(
            [go, "build", "-mod=mod", "-trimpath", "-tags", BUILD_TAGS, "-ldflags", _ldflags(),
             "-o", str(out), MODULE],
            helper, env,
        )
        seconds = time.monotonic() - started
        go_version = controlplane._run([go, "env", "GOVERSION"], helper, env).strip()
        info = BuildInfo(RELEASE, COMMIT, PSEUDO_VERSION, origin, go_version, round(seconds, 1),
                         str(out))
        print(f"built {BINARY} {RELEASE} ({PSEUDO_VERSION}) from {origin} into {out} "
              f"in {seconds:.0f}s", file=sys.stderr)
    if build_service or info.service_binary is None:
        service_started = time.monotonic()
        main_dir = helper / SERVICE_MAIN_DIR
        main_dir.mkdir(exist_ok=True)
        (main_dir / "main.go").write_text(SERVICE_MAIN)
        controlplane._run(
            [go, "build", "-mod=mod", "-trimpath", "-tags", BUILD_TAGS, "-ldflags", _ldflags(),
             "-o", str(service), f"./{SERVICE_MAIN_DIR}"],
            helper, env,
        )
        seconds = time.monotonic() - service_started
        info.service_binary = str(service)
        info.service_build_seconds = round(seconds, 1)
        print(f"built {SERVICE_BINARY} ({RELEASE}, -tags {BUILD_TAGS}) into {service} "
              f"in {seconds:.0f}s", file=sys.stderr)
    (root / "build.json").write_text(json.dumps(asdict(info), indent=2) + "\n")
    return out
