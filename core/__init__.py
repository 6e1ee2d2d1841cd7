"""clusterscaler: a pluggable, explainable Kubernetes cluster autoscaler.

Plugins import `hookimpl` from here to implement the hooks declared in
`clusterscaler.framework.hookspecs`.
"""

from importlib.metadata import PackageNotFoundError, version

import pluggy

PROJECT_NAME = "clusterscaler"
ENTRY_POINT_GROUP = "clusterscaler"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

try:
    __version__ = version("clusterscaler")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = ["ENTRY_POINT_GROUP", "PROJECT_NAME", "__version__", "hookimpl", "hookspec"]
