"""clusterscaler: a pluggable, explainable Kubernetes cluster autoscaler.

Plugins and cloud providers import everything they use, the `hookimpl` marker included,
from `clusterscaler.api`; the hooks are declared in `clusterscaler.interfaces.hookspecs`.
"""

from importlib.metadata import PackageNotFoundError, version

PROJECT_NAME = "clusterscaler"
ENTRY_POINT_GROUP = "clusterscaler"

try:
    __version__ = version("clusterscaler")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = ["ENTRY_POINT_GROUP", "PROJECT_NAME", "__version__"]
