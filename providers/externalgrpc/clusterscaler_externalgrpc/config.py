"""The externalgrpc cloud-config (`--cloud-config`): where the provider service listens and
how to reach it, with the keys upstream Cluster Autoscaler reads.

```yaml
address: external-grpc-provider.kube-system.svc:8086   # host:port or [host]:port
cert: /etc/ssl/client/tls.crt      # the client certificate (PEM); with it, TLS
key: /etc/ssl/client/tls.key       # its private key (PEM)
cacert: /etc/ssl/client/ca.crt     # the CA certificate that verifies the service (PEM)
grpc_timeout: 10s                  # deadline of every call; default 5s
```

As upstream: without `cert` the connection is plaintext (`key` and `cacert` alone are
ignored, with a warning here); with `cert`, `key` and `cacert` are required and the
service's certificate must be issued by `cacert` for the address's host. Keys match in any
case, as sigs.k8s.io/yaml matches them; an unknown key is a warning, not an error, so that a
file written for upstream always loads.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import structlog
import yaml
from clusterscaler.api import (
    DURATION_FORM,
    MAX_CONFIG_FILE_BYTES,
    ConfigurationError,
    YamlFileError,
    YamlValue,
    config_mapping,
    describe_value,
    load_yaml,
    parse_duration,
    read_file_bytes,
    read_yaml_file,
)

__all__ = ["DEFAULT_TIMEOUT", "ExternalGrpcConfig", "load_config", "parse_config", "split_host_port"]

log = structlog.get_logger()

DEFAULT_TIMEOUT = timedelta(seconds=5)
KEYS = ("address", "key", "cert", "cacert", "grpc_timeout")
_PREFIX = "externalgrpc provider: "
_EXPECTED = f"a YAML mapping with the keys {', '.join(KEYS)}"
_ADDRESS_FORM = "host:port or [host]:port, e.g. external-grpc-provider.kube-system.svc:8086"


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """The PEM contents of the client certificate, its key and the CA certificate."""

    cert: bytes
    key: bytes
    cacert: bytes


@dataclass(frozen=True, slots=True)
class ExternalGrpcConfig:
    """The parsed cloud-config. `tls` is None for a plaintext connection."""

    address: str
    host: str
    timeout: timedelta = DEFAULT_TIMEOUT
    tls: TlsFiles | None = None


def split_host_port(address: str) -> tuple[str, str]:
    """Go's `net.SplitHostPort`, which upstream applies to `address`: `host:port`,
    `[host]:port` (IPv6) or `[host%zone]:port`. Raises `ValueError` saying what is wrong."""
    if address.startswith("["):
        end = address.find("]")
        if end < 0:
            raise ValueError("missing ']'")
        host, rest = address[1:end], address[end + 1 :]
        if not rest.startswith(":"):
            raise ValueError("missing port after ']'")
        port = rest[1:]
    else:
        host, sep, port = address.rpartition(":")
        if not sep:
            raise ValueError("missing port")
        if ":" in host:
            raise ValueError("too many colons (an IPv6 host is written [host]:port)")
    # At most 5 ASCII digits before `int`: `isdigit` takes other scripts' digits, and `int`
    # refuses a number of more than 4,300.
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536):
        raise ValueError(f"port {describe_value(port)} is not a number from 1 to 65535")
    return host, port


def load_config(path: str) -> ExternalGrpcConfig:
    """Read and parse the cloud-config file at `path` (`--cloud-config`), and the TLS
    files it names. Raises `ConfigurationError` naming the file, the key and the expected
    form. Reads files only: nothing is dialled."""
    if not path.strip():
        raise ConfigurationError(
            "externalgrpc provider: --cloud-config: expected the path of a YAML file with "
            "the provider service's address (and cert, key, cacert for TLS; grpc_timeout), "
            "got an empty value"
        )
    source = f"--cloud-config={path}"
    try:
        parsed = read_yaml_file(
            os.path.expanduser(path), f"{_PREFIX}{source}", _EXPECTED,
            max_bytes=MAX_CONFIG_FILE_BYTES,
        )
    except YamlFileError as exc:
        raise ConfigurationError(str(exc)) from None
    return _config(parsed, source)


def parse_config(text: str, source: str) -> ExternalGrpcConfig:
    """Parse the YAML `text`; `source` names the file in errors."""
    try:
        parsed = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"{_PREFIX}{source}: not valid YAML: {exc}") from None
    return _config(parsed, source)


def _config(parsed: YamlValue, source: str) -> ExternalGrpcConfig:
    where = f"{_PREFIX}{source}"
    raw = config_mapping(parsed, where, _EXPECTED)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = str(key).lower()
        if name in KEYS:
            values[name] = value
        else:
            log.warning("externalgrpc_config_key_ignored", source=source, key=str(key),
                        known=list(KEYS))
    address = _string(values, "address", where)
    if not address:
        raise ConfigurationError(f"{where}: address: required, expected {_ADDRESS_FORM}")
    try:
        host, _ = split_host_port(address)
    except ValueError as exc:
        raise ConfigurationError(
            f"{where}: address: expected {_ADDRESS_FORM}, got {describe_value(address)} ({exc})"
        ) from None
    return ExternalGrpcConfig(
        address=address, host=host, timeout=_timeout(values, where), tls=_tls(values, where)
    )


def _string(values: dict[str, Any], key: str, where: str) -> str:
    value = values.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigurationError(
            f"{where}: {key}: expected a string, got {type(value).__name__} "
            f"{describe_value(value)}"
        )
    return value.strip()


def _timeout(values: dict[str, Any], where: str) -> timedelta:
    raw = values.get("grpc_timeout")
    if raw is None:
        return DEFAULT_TIMEOUT
    expected = f"a positive duration, {DURATION_FORM} (default 5s)"
    got = describe_value(raw)
    if not isinstance(raw, str):
        raise ConfigurationError(f"{where}: grpc_timeout: expected {expected}, got {got}")
    try:
        timeout = parse_duration(raw)
    except ValueError:
        raise ConfigurationError(f"{where}: grpc_timeout: expected {expected}, got {got}") from None
    if timeout <= timedelta(0):
        # Upstream would give every call a deadline already past.
        raise ConfigurationError(f"{where}: grpc_timeout: expected {expected}, got {got}")
    return timeout


def _tls(values: dict[str, Any], where: str) -> TlsFiles | None:
    cert = _string(values, "cert", where)
    key = _string(values, "key", where)
    cacert = _string(values, "cacert", where)
    if not cert:
        if key or cacert:
            log.warning(
                "externalgrpc_plaintext",
                reason="no cert in the cloud-config: key and cacert are ignored and the "
                "connection is not encrypted, as upstream",
            )
        return None
    for name, path in (("key", key), ("cacert", cacert)):
        if not path:
            raise ConfigurationError(
                f"{where}: {name}: required with cert, expected the path of a PEM file"
            )
    files = TlsFiles(
        cert=_read_pem(where, "cert", cert),
        key=_read_pem(where, "key", key),
        cacert=_read_pem(where, "cacert", cacert),
    )
    # As upstream's tls.X509KeyPair and AppendCertsFromPEM, refuse a pair that does not
    # match or a CA that does not parse now, rather than at the first call.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        # An encrypted key is refused, never asked for a password on the terminal.
        context.load_cert_chain(
            os.path.expanduser(cert), os.path.expanduser(key), password=lambda: b""
        )
    except (ssl.SSLError, OSError) as exc:
        raise ConfigurationError(
            f"{where}: cert, key: expected a PEM certificate and its private key, got "
            f"{describe_value(cert)} and {describe_value(key)} that do not form a pair ({exc})"
        ) from None
    try:
        context.load_verify_locations(cafile=os.path.expanduser(cacert))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigurationError(
            f"{where}: cacert: expected PEM CA certificates, got {describe_value(cacert)} ({exc})"
        ) from None
    return files


def _read_pem(where: str, key: str, path: str) -> bytes:
    label = f"{where}: {key}"
    try:
        data = read_file_bytes(os.path.expanduser(path), label, MAX_CONFIG_FILE_BYTES)
    # A path holding a null byte names no file: `read_file_bytes` says so too.
    except YamlFileError as exc:
        raise ConfigurationError(
            f"{label}: expected a readable PEM file, got {describe_value(path)} "
            f"({str(exc).removeprefix(label + ': ')})"
        ) from None
    if b"-----BEGIN " not in data:
        raise ConfigurationError(
            f"{where}: {key}: expected a PEM file, got {describe_value(path)} without one"
        )
    return data
