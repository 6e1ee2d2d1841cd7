"""What `clusterscaler --version` says: the version, the commit it was built from, and the
upstream Cluster Autoscaler release whose flags, annotations, status and metrics it keeps.

The commit is recorded at build time: building the wheel writes it to `build.json` beside
this module (setup.py, from `git rev-parse HEAD` or `CLUSTERSCALER_COMMIT`). An editable
install of a checkout asks git instead, when asked.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from clusterscaler import __version__

# The upstream release tracked: its flags (docs/flags.md), and its Helm chart's values
# (deploy/helm/clusterscaler tracks charts/cluster-autoscaler 9.59.0).
UPSTREAM_CA_RELEASE = "1.36.1"
UPSTREAM_CHART_VERSION = "9.59.0"

BUILD_FILE = Path(__file__).with_name("build.json")


def commit() -> str:
    """The commit built from, or "unknown" (a build without git and without the variable)."""
    try:
        recorded = json.loads(BUILD_FILE.read_text()).get("commit")
        if isinstance(recorded, str) and recorded:
            return recorded
    except (OSError, ValueError):
        pass
    try:
        out = subprocess.run(
            ["git", "-C", str(Path(__file__).parent), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def version_text() -> str:
    return (
        f"clusterscaler {__version__}\n"
        f"commit: {commit()}\n"
        f"upstream: Cluster Autoscaler {UPSTREAM_CA_RELEASE} (flags, annotations, status, "
        f"events, metrics), chart cluster-autoscaler {UPSTREAM_CHART_VERSION} (values)"
    )
