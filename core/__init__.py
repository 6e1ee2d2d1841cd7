"""clusterscaler: a pluggable, explainable Kubernetes cluster autoscaler.

Plugins and cloud providers import everything they use, the `hookimpl` marker included,
from `clusterscaler.api`; the hooks are declared in `clusterscaler.interfaces.hookspecs`.
`clusterscaler.hookimpl` and `clusterscaler.hookspec` name the same two markers, for plugins
written as `from clusterscaler import hookimpl`; they are imported when first asked for, so
that `import clusterscaler` stays light.
"""

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterscaler.interfaces.hookspecs import hookimpl, hookspec

from clusterscaler.kube.lazyclient import install as _light_kubernetes_client

# Before anything of ours imports the Kubernetes client: its generated classes are then
# imported as they are used, not all at once (`clusterscaler.kube.lazyclient`).
_light_kubernetes_client()

PROJECT_NAME = "clusterscaler"
ENTRY_POINT_GROUP = "clusterscaler"

try:
    __version__ = version("clusterscaler")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = ["ENTRY_POINT_GROUP", "PROJECT_NAME", "__version__", "hookimpl", "hookspec"]


def __getattr__(name: str) -> object:
    if name in ("hookimpl", "hookspec"):
        from clusterscaler.interfaces import hookspecs

        return getattr(hookspecs, name)
    raise AttributeError(f"module 'clusterscaler' has no attribute {name!r}")
