"""The container image of deploy/Dockerfile, built and started with buildah and podman.

``docker build -f deploy/Dockerfile .`` needs a Docker engine and the ``python:3.11-slim``
base from a registry. This module needs neither: it makes a stand-in for the base with
debootstrap (Debian's own Python of the same minor version, its venv and pip), imports it
under the base's name into a container storage of its own, builds the Dockerfile unchanged
with ``buildah bud`` and starts the image with ``podman run`` as a Deployment of deploy/
runs it: its own user, a read-only root filesystem with nothing writable mounted, every
capability dropped, no privilege escalation. The build stage's pip reaches the package index
as on any machine.

One entry point, ``scripts/image.sh`` (this file run as a script)::

    image.sh base       make the stand-in base (reused while its recipe is unchanged)
    image.sh build      build the image (reused while its build context is unchanged)
    image.sh check      build, then start it and check it (the ``image`` tests do the same)

Everything lives under ``$CLUSTERSCALER_CACHE/image`` (default ``~/.cache/clusterscaler``),
never in the checkout or in the machine's own container storage, so the stand-in never
passes for the real ``python:3.11-slim`` anywhere else. The tools are Debian's packages
``buildah podman runc debootstrap``. The module uses only the standard library so that it
runs before any virtual environment exists.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import fnmatch
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy" / "Dockerfile"
IMAGE = "localhost/clusterscaler:local"

# What stands in for each base image deploy/Dockerfile may name: a Debian release whose own
# python3 has the base's minor version. python:3.11-slim is Debian bookworm with CPython 3.11
# in /usr/local; Debian's 3.11 is in /usr, and python-is-python3 gives the `python` command
# the slim image has.
STAND_INS: dict[str, tuple[str, str]] = {
    "python:3.11-slim": ("bookworm", "3.11"),
}
STAND_IN_PACKAGES = ("python3", "python3-venv", "python3-pip", "python-is-python3",
                     "ca-certificates")
STAND_IN_ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "LANG=C.UTF-8")
RECIPE_LABEL = "io.clusterscaler.stand-in"
CONTEXT_LABEL = "io.clusterscaler.build-context"
DEFAULT_MIRROR = "http://deb.debian.org/debian"

# How deploy/ runs the container (securityContext of every Deployment and of the chart).
USER = "65534:65534"
PORT = 8085
# The bundle pip trusts on this machine, lent to the build's RUN steps (never kept in the
# image): where HTTPS goes through a proxy with its own certificate authority, the base's own
# bundle cannot reach the package index. A docker user in that place does the same with a
# build secret.
CA_BUNDLE_IN_IMAGE = "/etc/ssl/certs/ca-certificates.crt"
EXPECTED_PROVIDERS = {"aws", "azure", "gce", "kwok", "machineapi", "sim"}


class ImageError(Exception):
    """A tool is missing, or a build, start or check failed; the message says which and why."""


def cache_root() -> Path:
    """``$CLUSTERSCALER_CACHE``, else ``$XDG_CACHE_HOME/clusterscaler``, else ``~/.cache/...``
    (the same rule as ``controlplane.cache_root``, repeated so that this file runs alone)."""
    explicit = os.environ.get("CLUSTERSCALER_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "clusterscaler"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _run(cmd: Sequence[str], *, timeout: float = 1800, check: bool = True,
         quiet: bool = False) -> subprocess.CompletedProcess[str]:
    if not quiet:
        _say("+ " + " ".join(cmd))
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                              check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as err:
        raise ImageError(f"{' '.join(cmd)} did not finish in {timeout:.0f}s") from err
    if check and proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:])
        raise ImageError(f"{' '.join(cmd)} exited {proc.returncode}:\n{tail}")
    return proc


def _stream(cmd: Sequence[str], *, timeout: float = 1800) -> None:
    """Run a long step with its output passed on as it comes; raise ImageError with its last
    lines when it fails."""
    _say("+ " + " ".join(cmd))
    deadline = time.monotonic() + timeout
    tail: collections.deque[str] = collections.deque(maxlen=40)
    with subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", file=sys.stderr, flush=True)
            tail.append(line.rstrip("\n"))
            if time.monotonic() > deadline:
                proc.kill()
                raise ImageError(f"{' '.join(cmd)} did not finish in {timeout:.0f}s")
        code = proc.wait()
    if code != 0:
        raise ImageError(f"{' '.join(cmd)} exited {code}:\n" + "\n".join(tail))


# ---------------------------------------------------------------------------------------------
# The tools and their storage


@dataclass(frozen=True)
class Engine:
    """buildah and podman on one container storage under the cache."""

    buildah_bin: str
    podman_bin: str
    runtime: str
    driver: str
    root: Path
    runroot: Path

    def _storage(self) -> list[str]:
        return ["--root", str(self.root), "--runroot", str(self.runroot),
                "--storage-driver", self.driver]

    def buildah(self, *args: str) -> list[str]:
        return [self.buildah_bin, *self._storage(), *args]

    def podman(self, *args: str) -> list[str]:
        return [self.podman_bin, *self._storage(), "--runtime", self.runtime,
                "--cgroup-manager", "cgroupfs", *args]


def engine() -> Engine:
    """The tools, or an ImageError naming the packages to install."""
    found = {name: shutil.which(name) for name in ("buildah", "podman", "debootstrap")}
    # runc sets up containers on every cgroup layout; crun refuses a hybrid v1/v2 one.
    runtime = shutil.which("runc") or shutil.which("crun")
    missing = [name for name, path in found.items() if path is None]
    if runtime is None:
        missing.append("runc")
    if missing:
        raise ImageError(
            f"{', '.join(missing)}: not found on PATH; the image is built with Debian's "
            "packages: apt-get install -y buildah podman runc debootstrap"
        )
    # overlay where the kernel has it (layers are shared), else vfs (full copies, slower).
    with open("/proc/filesystems") as handle:
        driver = "overlay" if re.search(r"\boverlay$", handle.read(), re.MULTILINE) else "vfs"
    base = cache_root() / "image"
    return Engine(buildah_bin=str(found["buildah"]), podman_bin=str(found["podman"]),
                  runtime=str(runtime), driver=driver, root=base / f"storage-{driver}",
                  runroot=base / "run")


def _image_labels(eng: Engine, name: str) -> dict[str, str] | None:
    """The labels of a stored image, or None when there is no such image."""
    proc = _run(eng.buildah("inspect", "--type", "image", name), check=False, quiet=True)
    if proc.returncode != 0:
        return None
    config = json.loads(proc.stdout).get("OCIv1", {}).get("config", {})
    return dict(config.get("Labels") or {})


# ---------------------------------------------------------------------------------------------
# The stand-in base


def base_images(dockerfile: Path = DOCKERFILE) -> list[str]:
    """The images the Dockerfile's FROM lines name (not its own stages), in order."""
    stages: set[str] = set()
    bases: list[str] = []
    for line in dockerfile.read_text().splitlines():
        match = re.match(r"\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", line,
                         re.IGNORECASE)
        if not match:
            continue
        name, stage = match.group(1), match.group(2)
        if name.lower() not in stages and name not in bases:
            bases.append(name)
        if stage:
            stages.add(stage.lower())
    return bases


def _qualified(name: str) -> str:
    """The name a registry-less store gives ``python:3.11-slim``, as docker resolves it."""
    first = name.split("/", 1)[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        return name
    return f"docker.io/{name}" if "/" in name else f"docker.io/library/{name}"


def debian_mirror() -> str:
    """``$CLUSTERSCALER_DEBIAN_MIRROR``, else the Debian archive this machine's apt uses."""
    explicit = os.environ.get("CLUSTERSCALER_DEBIAN_MIRROR")
    if explicit:
        return explicit
    found: list[str] = []
    sources = Path("/etc/apt/sources.list.d")
    for path in [Path("/etc/apt/sources.list"), *sorted(sources.glob("*.sources")),
                 *sorted(sources.glob("*.list"))]:
        with contextlib.suppress(OSError):
            text = path.read_text()
            found += re.findall(r"^URIs:\s*(\S+)", text, re.MULTILINE)
            found += re.findall(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)", text, re.MULTILINE)
    for uri in found:
        if uri.rstrip("/").endswith("/debian"):
            return uri.rstrip("/")
    return DEFAULT_MIRROR


def _recipe(suite: str, python: str) -> str:
    return f"debootstrap minbase {suite} python{python} " + ",".join(STAND_IN_PACKAGES)


def stand_in(eng: Engine, name: str) -> str:
    """Make the stand-in for base image ``name`` in the engine's storage (once per recipe);
    return its stored name."""
    if name not in STAND_INS:
        raise ImageError(
            f"deploy/Dockerfile: FROM {name}: no stand-in is known for this base (known: "
            f"{', '.join(sorted(STAND_INS))}); add one to STAND_INS in {Path(__file__).name}"
        )
    suite, python = STAND_INS[name]
    stored = _qualified(name)
    recipe = _recipe(suite, python)
    labels = _image_labels(eng, stored)
    if labels is not None and labels.get(RECIPE_LABEL) == recipe:
        return stored
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="stand-in-", dir=_made(cache_root() / "image")))
    try:
        rootfs = work / "rootfs"
        _stream(["debootstrap", "--variant=minbase", f"--include={','.join(STAND_IN_PACKAGES)}",
              suite, str(rootfs), debian_mirror()])
        found = _run(["chroot", str(rootfs), "python", "-c",
                      "import sys; print('%d.%d' % sys.version_info[:2])"]).stdout.strip()
        if found != python:
            raise ImageError(f"Debian {suite} has Python {found}; {name} needs {python}")
        # As the slim images: no package lists or downloaded packages.
        for leftover in ("var/lib/apt/lists", "var/cache/apt"):
            for child in (rootfs / leftover).glob("*"):
                if child.is_file():
                    child.unlink()
        tar = work / "rootfs.tar"
        _run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tar), "."])
        container = _run(eng.buildah("from", "scratch"), quiet=True).stdout.strip()
        try:
            _run(eng.buildah("add", container, str(tar), "/"))
            config: list[str] = []
            for env in STAND_IN_ENV:
                config += ["--env", env]
            _run(eng.buildah("config", *config, "--cmd", "python3",
                             "--label", f"{RECIPE_LABEL}={recipe}", container))
            _run(eng.buildah("commit", "--quiet", "--rm", container, stored))
        except BaseException:
            _run(eng.buildah("rm", container), check=False, quiet=True)
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _say(f"stand-in for {name} ({recipe}) made in {time.monotonic() - started:.0f}s")
    return stored


def _made(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---------------------------------------------------------------------------------------------
# The build


def _ignore_patterns(root: Path) -> list[str]:
    path = root / ".dockerignore"
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _ignored(rel: PurePosixPath, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatchcase(part, pattern[3:]) for part in rel.parts):
                return True
        elif any(fnmatch.fnmatchcase("/".join(rel.parts[:i]), pattern.strip("/"))
                 for i in range(1, len(rel.parts) + 1)):
            return True
    return False


def context_digest(dockerfile: Path = DOCKERFILE, root: Path = REPO) -> str:
    """A digest of what a build reads: the Dockerfile, .dockerignore and every file its
    COPY lines take from the context ``root`` (less what .dockerignore leaves out)."""
    patterns = _ignore_patterns(root)
    digest = hashlib.sha256()
    text = dockerfile.read_text()
    digest.update(hashlib.sha256(text.encode()).digest())
    digest.update(hashlib.sha256("\n".join(patterns).encode()).digest())
    sources: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 3 or words[0].upper() not in ("COPY", "ADD"):
            continue
        if any(word.startswith("--from") for word in words[1:]):
            continue
        sources += [word for word in words[1:-1] if not word.startswith("--")]
    files: set[Path] = set()
    for source in sources:
        matches = sorted(root.glob(source)) if any(c in source for c in "*?[") else [
            root / source]
        for match in matches:
            candidates = [match] if match.is_file() else sorted(match.rglob("*"))
            files.update(path for path in candidates if path.is_file())
    for path in sorted(files):
        rel = PurePosixPath(path.relative_to(root).as_posix())
        if _ignored(rel, patterns):
            continue
        digest.update(f"{rel}\0{path.stat().st_mode & 0o111:o}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@dataclass(frozen=True)
class Built:
    """The image in the engine's storage, built from ``commit`` ("" when not in git)."""

    engine: Engine
    image: str
    commit: str
    seconds: float
    reused: bool


def head_commit(root: Path = REPO) -> str:
    """The checkout's commit, passed to the build as deploy/Dockerfile's CLUSTERSCALER_COMMIT
    (the context has no .git); "" outside git."""
    git = shutil.which("git")
    if git is None:
        return ""
    proc = _run([git, "-C", str(root), "rev-parse", "HEAD"], check=False, quiet=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def build(*, rebuild: bool = False) -> Built:
    """Build deploy/Dockerfile as ``IMAGE`` on the stand-in bases; reuse the stored image
    when the build context and the bases are unchanged (and not ``rebuild``)."""
    eng = engine()
    started = time.monotonic()
    bases = [stand_in(eng, name) for name in base_images()]
    commit = head_commit()
    key = hashlib.sha256(f"{context_digest()}\0{commit}".encode())
    for base in bases:
        key.update(_run(eng.buildah("inspect", "--type", "image", "--format", "{{.FromImageID}}",
                                    base), quiet=True).stdout.strip().encode())
    context = key.hexdigest()
    labels = _image_labels(eng, IMAGE)
    if not rebuild and labels is not None and labels.get(CONTEXT_LABEL) == context:
        _say(f"{IMAGE} is up to date with the build context")
        return Built(eng, IMAGE, commit, time.monotonic() - started, reused=True)
    volumes: list[str] = []
    bundle = Path(os.environ.get("SSL_CERT_FILE") or CA_BUNDLE_IN_IMAGE)
    if bundle.is_file():
        volumes = ["--volume", f"{bundle.resolve()}:{CA_BUNDLE_IN_IMAGE}:ro"]
    built_at = time.monotonic()
    # chroot isolation runs the RUN steps without a runtime or cgroups (it builds wherever
    # buildah runs); the host network is the one pip reaches the package index through.
    _stream(eng.buildah("bud", "--pull=never", "--isolation", "chroot", "--network", "host",
                        *volumes, "--build-arg", f"CLUSTERSCALER_COMMIT={commit}",
                        "--label", f"{CONTEXT_LABEL}={context}",
                        "-f", str(DOCKERFILE), "-t", IMAGE, str(REPO)))
    # The image it replaced is left without a name: remove it so the storage stays small.
    _run(eng.buildah("rmi", "--prune"), check=False, quiet=True)
    _say(f"{IMAGE} built in {time.monotonic() - built_at:.0f}s")
    return Built(eng, IMAGE, commit, time.monotonic() - started, reused=False)


# ---------------------------------------------------------------------------------------------
# Starting it


def run_options() -> list[str]:
    """``podman run`` options for the securityContext of deploy/'s Deployments.

    ``--read-only-tmpfs=false``: the Deployments mount nothing writable, not even /tmp.
    Limits: podman's defaults for a root container (1048576 open files, 4194304 processes)
    can be set only with CAP_SYS_RESOURCE, which a sandboxed machine may not grant; the
    container keeps this process's open-file limit and a process limit it cannot exceed.
    """
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    nproc = 4096
    return ["--network", "none", "--read-only", "--read-only-tmpfs=false", "--cap-drop", "all",
            "--security-opt", "no-new-privileges", "--ulimit", f"nofile={nofile}:{nofile}",
            "--ulimit", f"nproc={nproc}:{nproc}"]


def run(built: Built, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``podman run --rm`` the image with ``args`` (after its entrypoint); not checked."""
    return _run(built.engine.podman("run", "--rm", *run_options(), built.image, *args),
                timeout=timeout, check=False)


def _checked(built: Built, *args: str) -> str:
    proc = run(built, *args)
    if proc.returncode != 0:
        raise ImageError(f"clusterscaler {' '.join(args)} in {built.image} exited "
                         f"{proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


@contextlib.contextmanager
def serving(built: Built, *args: str) -> Iterator[str]:
    """Start ``clusterscaler run`` detached in the image; yield the container's id; remove it."""
    proc = _run(built.engine.podman("run", "--detach", *run_options(), built.image, "run",
                                    *args))
    container = proc.stdout.strip().splitlines()[-1]
    try:
        yield container
    finally:
        _run(built.engine.podman("rm", "--force", "--time", "5", container), check=False,
             quiet=True)


def exec_python(built: Built, container: str, code: str,
                *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code args...`` in the container, as the image's user."""
    return _run(built.engine.podman("exec", container, "python", "-c", code, *args),
                check=False, quiet=True)


def logs(built: Built, container: str) -> str:
    proc = _run(built.engine.podman("logs", container), check=False, quiet=True)
    return proc.stdout + proc.stderr


# Read inside the serving container by its own Python (the venv's, first on PATH); the port
# is its argument.
PROBE = r"""
import importlib.util, json, sys, urllib.request
def get(path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:" + sys.argv[1] + path, timeout=5) as response:
            return response.status, response.read().decode()
    except OSError as err:
        return None, str(err)
ids = {}
for line in open("/proc/1/status"):
    key, _, value = line.partition(":")
    if key in ("Uid", "Gid"):
        ids[key] = [int(v) for v in value.split()]
writes = {}
for path in ("/probe", "/tmp/probe", "/var/tmp/probe", sys.prefix + "/probe"):
    try:
        open(path, "w").close()
        writes[path] = "written"
    except OSError as err:
        writes[path] = err.strerror
health, _ = get("/health-check")
status, metrics = get("/metrics")
print(json.dumps({"ids": ids, "writes": writes, "health": health,
                  "metrics": status == 200 and "cluster_autoscaler_" in metrics,
                  "pip": importlib.util.find_spec("pip") is not None}))
"""


# ---------------------------------------------------------------------------------------------
# The checks: each returns what it saw, or raises ImageError


def _version() -> str:
    with open(REPO / "pyproject.toml", "rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


def check_config(built: Built) -> str:
    """The image runs ``clusterscaler`` as the numeric user 65534:65534 and exposes 8085."""
    proc = _run(built.engine.podman("image", "inspect", built.image), quiet=True)
    config = json.loads(proc.stdout)[0].get("Config", {})
    problems = []
    if config.get("User") != USER:
        problems.append(f"User is {config.get('User')!r}, want {USER!r}")
    if config.get("Entrypoint") != ["clusterscaler"]:
        problems.append(f"Entrypoint is {config.get('Entrypoint')!r}, want ['clusterscaler']")
    if f"{PORT}/tcp" not in (config.get("ExposedPorts") or {}):
        problems.append(f"ExposedPorts {config.get('ExposedPorts')!r} lack {PORT}/tcp")
    if problems:
        raise ImageError(f"{built.image}: " + "; ".join(problems))
    return f"user {USER}, entrypoint clusterscaler, port {PORT}"


def check_help(built: Built) -> str:
    out = _checked(built, "--help")
    if not out.startswith("usage: clusterscaler"):
        raise ImageError(f"clusterscaler --help in {built.image} printed:\n{out[:2000]}")
    return f"--help: {len(out.splitlines())} lines"


def check_version(built: Built) -> str:
    """The version first, the commit the image was built from, the upstream release."""
    out = _checked(built, "--version")
    lines = out.strip().splitlines()
    want = [f"clusterscaler {_version()}", f"commit: {built.commit or 'unknown'}"]
    if lines[:2] != want or not any(line.startswith("upstream: Cluster Autoscaler ")
                                    for line in lines):
        raise ImageError(f"clusterscaler --version in {built.image} printed {out!r}; want "
                         f"{want} first, then the upstream Cluster Autoscaler release")
    return "--version: " + " | ".join(lines)


def check_plugins(built: Built) -> str:
    data = json.loads(_checked(built, "plugins", "--json"))
    providers = set(data.get("cloudProviders") or {})
    if not providers >= EXPECTED_PROVIDERS:
        raise ImageError(f"{built.image} lacks cloud providers "
                         f"{sorted(EXPECTED_PROVIDERS - providers)} (has {sorted(providers)})")
    return f"plugins: providers {', '.join(sorted(providers))}"


def check_simulate(built: Built) -> str:
    """The built-in demo's first loop, on a read-only root as user 65534."""
    data = json.loads(_checked(built, "simulate", "--once", "--json"))
    missing = {"scaleUp", "scaleDown", "unschedulable", "unremovable"} - set(data)
    if missing:
        raise ImageError(f"simulate --once --json in {built.image} lacks {sorted(missing)}: "
                         f"{data}")
    return f"simulate: {len(data['unremovable'])} unremovable nodes in the demo's first loop"


def check_serving(built: Built, timeout: float = 90) -> str:
    """``clusterscaler run`` as deploy/ starts it, with no API server to reach: it serves
    /health-check and /metrics on 8085 as user 65534, every write to its root filesystem
    fails, the environment has no pip, and its log shows no write error."""
    args = ("--cloud-provider=kwok", "--kubernetes=http://127.0.0.1:9", f"--address=:{PORT}")
    with serving(built, *args) as container:
        deadline = time.monotonic() + timeout
        seen: dict[str, object] = {}
        while time.monotonic() < deadline:
            proc = exec_python(built, container, PROBE, str(PORT))
            if proc.returncode == 0:
                seen = json.loads(proc.stdout)
                if seen["health"] == 200 and seen["metrics"]:
                    break
            time.sleep(1)
        text = logs(built, container)
    if seen.get("health") != 200 or not seen.get("metrics"):
        raise ImageError(f"clusterscaler run in {built.image} served no /health-check and "
                         f"/metrics on {PORT} within {timeout:.0f}s: {seen}\nlog:\n{text[-3000:]}")
    problems = []
    ids = seen["ids"]
    if ids != {"Uid": [65534] * 4, "Gid": [65534] * 4}:
        problems.append(f"process 1 runs with {ids}, want 65534 for every id")
    writes = seen["writes"]
    assert isinstance(writes, dict)
    written = {path: result for path, result in writes.items()
               if result != "Read-only file system"}
    if written:
        problems.append(f"the root filesystem is not read-only: {written}")
    if seen["pip"]:
        problems.append("pip is importable in the image's environment")
    for needle in ("Read-only file system", "Permission denied", "Traceback"):
        if needle in text:
            problems.append(f"the log says {needle!r}")
    if problems:
        raise ImageError(f"clusterscaler run in {built.image}: " + "; ".join(problems)
                         + f"\nlog:\n{text[-3000:]}")
    return (f"run: /health-check 200 and /metrics on {PORT}, uid/gid 65534, "
            f"{len(writes)} writes refused (read-only), no pip")


Check = Callable[[Built], str]
CHECKS: tuple[Check, ...] = (check_config, check_help, check_version, check_plugins, check_simulate,
          check_serving)


def check(*, rebuild: bool = False) -> list[str]:
    """Build (or reuse) the image and run every check; return what each saw."""
    built = build(rebuild=rebuild)
    started = time.monotonic()
    results = []
    for each in CHECKS:
        result = each(built)
        _say(f"ok {result}")
        results.append(result)
    _say(f"checked in {time.monotonic() - started:.0f}s")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="image.sh", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("base", help="make the stand-in base images (reused while unchanged)")
    for command, text in (("build", "build the image of deploy/Dockerfile"),
                          ("check", "build the image, start it and check it")):
        sub.add_parser(command, help=text).add_argument(
            "--rebuild", action="store_true", help="build even when the context is unchanged")
    args = parser.parse_args(argv)
    try:
        if args.command == "base":
            eng = engine()
            for name in base_images():
                print(f"{name}: {stand_in(eng, name)}")
        elif args.command == "build":
            built = build(rebuild=args.rebuild)
            print(f"{built.image} in {built.engine.root}")
        else:
            check(rebuild=args.rebuild)
            print(f"{IMAGE}: every check passed")
    except ImageError as err:
        print(f"image.sh {args.command}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
