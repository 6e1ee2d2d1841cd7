"""`--cloud-config`: the file a provider reads its cloud's settings from, read the same
way by every provider that has one (an empty flag means no file; a file that cannot be
read, is larger than `MAX_CONFIG_FILE_BYTES` or is not UTF-8 text is a `ConfigurationError`
naming the flag and the path, in the words of `yamltext.read_text_file`), and the check
every provider makes of such a document once parsed: its top level is a mapping."""

from __future__ import annotations

from collections.abc import Mapping

from clusterscaler.interfaces.cloudprovider import ConfigurationError
from clusterscaler.model.yamltext import MAX_CONFIG_FILE_BYTES, YamlFileError, read_text_file


def read_cloud_config(path: str) -> str | None:
    """The text of the `--cloud-config` file at `path`, or None when the flag is empty."""
    if not path:
        return None
    try:
        return read_text_file(path, f"--cloud-config={path!r}", MAX_CONFIG_FILE_BYTES)
    except YamlFileError as exc:
        raise ConfigurationError(str(exc)) from None


def config_mapping(document: object, source: str, expected: str) -> Mapping[object, object]:
    """`document`, a parsed configuration (JSON or YAML), when its top level is a mapping;
    else a `ConfigurationError` naming `source`, the `expected` form and what it is instead
    (the type's name, or `an empty file` for the None an empty YAML file loads as)."""
    if not isinstance(document, Mapping):
        got = "an empty file" if document is None else type(document).__name__
        raise ConfigurationError(f"{source}: expected {expected}, got {got}")
    return document
