"""`--cloud-config`: the file a provider reads its cloud's settings from, read the same
way by every provider that has one (an empty flag means no file; a file that cannot be
read is a `ConfigurationError` naming the flag and the path)."""

from __future__ import annotations

from clusterscaler.interfaces.cloudprovider import ConfigurationError


def read_cloud_config(path: str) -> str | None:
    """The text of the `--cloud-config` file at `path`, or None when the flag is empty."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigurationError(f"--cloud-config={path!r}: cannot be read: {exc}") from exc
