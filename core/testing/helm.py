"""Real Helm, for the chart of deploy/helm: render, lint and install it.

The ``helm`` binary is built from its Go module at the version pinned in
``controlplane.TOOLS`` (``scripts/controlplane.sh path helm``). Helm keeps its caches and
configuration under a directory of the clusterscaler cache, never in the user's home.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from clusterscaler.testing import controlplane

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "clusterscaler"


class HelmError(Exception):
    """helm exited non-zero; the message holds its command and output."""


def _env() -> dict[str, str]:
    home = controlplane.cache_root() / "helm-home"
    env = dict(os.environ)
    for name in ("CACHE", "CONFIG", "DATA"):
        env[f"HELM_{name}_HOME"] = str(home / name.lower())
    return env


def helm(*args: str, timeout: float = 300) -> str:
    """Run helm; return its standard output, or raise HelmError with its output."""
    cmd = [str(controlplane.binary("helm")), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=timeout,
                          check=False)
    if proc.returncode != 0:
        raise HelmError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def _with_values(values: Mapping[str, Any], run: Any) -> Any:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        json.dump(values, handle)  # JSON is YAML: numbers keep their type
    try:
        return run(handle.name)
    finally:
        os.unlink(handle.name)


def template(values: Mapping[str, Any], *, chart: Path = CHART,
             release: str = "cluster-autoscaler", namespace: str = "kube-system",
             extra: Sequence[str] = ()) -> list[dict[str, Any]]:
    """``helm template`` of ``chart`` with ``values``: the rendered objects, in helm's order."""
    text = render_text(values, chart=chart, release=release, namespace=namespace, extra=extra)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render_text(values: Mapping[str, Any], *, chart: Path = CHART,
                release: str = "cluster-autoscaler", namespace: str = "kube-system",
                extra: Sequence[str] = ()) -> str:
    """``helm template`` output as text (each object after a ``# Source:`` comment)."""
    return str(_with_values(values, lambda path: helm(
        "template", release, str(chart), "--namespace", namespace, "--values", path, *extra
    )))


def lint(values: Mapping[str, Any], *, chart: Path = CHART, strict: bool = True) -> str:
    """``helm lint`` (``--strict``: warnings fail too) of ``chart`` with ``values``."""
    flags = ["--strict"] if strict else []
    return str(_with_values(values, lambda path: helm(
        "lint", str(chart), "--values", path, *flags
    )))


def install(values: Mapping[str, Any], kubeconfig: Path, *, chart: Path = CHART,
            release: str = "cluster-autoscaler", namespace: str = "kube-system",
            extra: Sequence[str] = ()) -> str:
    """``helm install`` of ``chart`` into the cluster of ``kubeconfig``."""
    return str(_with_values(values, lambda path: helm(
        "install", release, str(chart), "--namespace", namespace, "--create-namespace",
        "--kubeconfig", str(kubeconfig), "--values", path, *extra
    )))
