"""The GCE cloud-config file (`--cloud-config`, usually `gce.conf`), in the gcfg form the
Kubernetes GCE cloud provider reads.

```ini
[global]
project-id = my-project
local-zone = us-central1-b      ; where --node-group-auto-discovery looks for MIGs
regional = false                ; true: local-zone (or the metadata zone) names a region
multizone = false               ; true: discovery also looks in the region's other zones
network-name = default
node-tags = gke-my-cluster-node ; may be repeated
token-url = https://...         ; an alternative token source (GKE), with token-body
api-endpoint = https://compute.googleapis.com   ; private endpoints and emulators
```

Keys are case-insensitive, values may be quoted, `;` and `#` start comments and a boolean key
given without a value is true, as gcfg does. An unknown section or key is an error, as it is
for the Kubernetes GCE cloud provider. Project and location not given here come from the
metadata server (see `resolve_location`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from clusterscaler.api import ConfigurationError, describe_value, read_cloud_config

from clusterscaler_gce.refs import is_region, is_zone, zone_region

KNOWN_KEYS = (
    "alpha-features",
    "api-endpoint",
    "container-api-endpoint",
    "local-zone",
    "multizone",
    "network-name",
    "network-project-id",
    "node-instance-prefix",
    "node-tags",
    "project-id",
    "regional",
    "secondary-range-name",
    "subnetwork-name",
    "token-body",
    "token-url",
)
_MULTI_KEYS = frozenset({"node-tags", "alpha-features"})
_BOOL_KEYS = frozenset({"regional", "multizone"})
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
ENDPOINT_FORM = "scheme://host[:port] with an optional /compute/v1/ path, e.g. https://compute.googleapis.com"
DEFAULT_METADATA_HOST = "metadata.google.internal"


@dataclass(frozen=True, slots=True)
class CloudConfig:
    project_id: str = ""
    local_zone: str = ""
    regional: bool = False
    multizone: bool = False
    network_name: str = ""
    node_tags: tuple[str, ...] = ()
    token_url: str = ""
    token_body: str = ""
    api_endpoint: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def anonymous(self) -> bool:
        """A plain-http loopback endpoint (an emulator): no credentials are sent."""
        return self.api_endpoint.startswith("http://")


def _unquote(source: str, line_no: int, raw: str) -> str:
    text = raw.strip()
    if text.startswith('"'):
        if len(text) < 2 or not text.endswith('"'):
            raise ConfigurationError(f"{source}: line {line_no}: unterminated quoted value {describe_value(raw.strip())}")
        return text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    for marker in (" ;", " #", "\t;", "\t#"):
        cut = text.find(marker)
        if cut >= 0:
            text = text[:cut]
    return text.strip()


def parse_cloud_config(text: str, source: str = "cloud-config") -> CloudConfig:
    """Parse the gcfg text of a GCE cloud-config. `source` names the file in errors."""
    section = ""
    values: dict[str, list[str]] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in ";#":
            continue
        if stripped.startswith("["):
            if not stripped.endswith("]"):
                raise ConfigurationError(f"{source}: line {line_no}: section header {describe_value(stripped)}; expected [global]")
            section = stripped[1:-1].strip().lower()
            if section != "global":
                raise ConfigurationError(
                    f"{source}: line {line_no}: unknown section [{stripped[1:-1].strip()}]; "
                    "expected only [global]"
                )
            continue
        if section != "global":
            raise ConfigurationError(f"{source}: line {line_no}: {describe_value(stripped)} outside a section; expected it under [global]")
        key, sep, raw_value = stripped.partition("=")
        key = key.strip().lower()
        if key not in KNOWN_KEYS:
            raise ConfigurationError(
                f"{source}: line {line_no}: unknown key {describe_value(key)} in [global]; expected one of "
                + ", ".join(KNOWN_KEYS)
            )
        if not sep:
            if key not in _BOOL_KEYS:
                raise ConfigurationError(f"{source}: line {line_no}: key {describe_value(key)} has no value; expected {key} = <value>")
            value = "true"
        else:
            value = _unquote(source, line_no, raw_value)
        if key in values and key not in _MULTI_KEYS:
            raise ConfigurationError(f"{source}: line {line_no}: key {describe_value(key)} is given more than once")
        values.setdefault(key, []).append(value)

    def one(key: str) -> str:
        return values.get(key, [""])[-1]

    def flag(key: str) -> bool:
        raw = one(key).lower()
        if raw in _TRUE:
            return True
        if raw in _FALSE or raw == "":
            return False
        raise ConfigurationError(f"{source}: [global] {key} = {describe_value(one(key))}: expected true or false")

    local_zone = one("local-zone")
    regional = flag("regional")
    if local_zone and not (is_zone(local_zone) or (regional and is_region(local_zone))):
        expected = "a zone or, with regional = true, a region" if regional else "a zone such as us-central1-b"
        raise ConfigurationError(f"{source}: [global] local-zone = {describe_value(local_zone)}: expected {expected}")
    token_url = one("token-url")
    if token_url.lower() == "nil":
        token_url = ""
    if token_url and not token_url.startswith(("https://", "http://")):
        raise ConfigurationError(f"{source}: [global] token-url = {describe_value(token_url)}: expected an http(s) URL")
    endpoint = one("api-endpoint")
    return CloudConfig(
        project_id=one("project-id"),
        local_zone=local_zone,
        regional=regional,
        multizone=flag("multizone"),
        network_name=one("network-name"),
        node_tags=tuple(values.get("node-tags", [])),
        token_url=token_url,
        token_body=one("token-body"),
        api_endpoint=normalise_endpoint(endpoint, source) if endpoint else "",
        extra={k: tuple(v) for k, v in values.items() if k not in _NAMED},
    )


_NAMED = frozenset(
    {"project-id", "local-zone", "regional", "multizone", "network-name", "node-tags",
     "token-url", "token-body", "api-endpoint"}
)


def normalise_endpoint(value: str, source: str) -> str:
    """`https://host[:port][/compute/v1/]` -> `https://host[:port]`: the client adds the
    `/compute/v1/` path itself. Plain http is only accepted on loopback addresses, since it
    would send credentials in clear; there no credentials are sent at all."""
    parsed = urllib.parse.urlsplit(value.strip())
    problem = ""
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        problem = "not an http(s) URL"
    elif parsed.path.strip("/") not in ("", "compute/v1"):
        problem = f"unexpected path {describe_value(parsed.path)}"
    elif parsed.query or parsed.fragment:
        problem = "query or fragment given"
    elif parsed.scheme == "http" and not _is_loopback(parsed.hostname):
        problem = "plain http is only accepted for loopback addresses (emulators); use https"
    if problem:
        raise ConfigurationError(f"{source}: [global] api-endpoint = {describe_value(value)}: {problem}; expected {ENDPOINT_FORM}")
    return f"{parsed.scheme}://{parsed.netloc}"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_cloud_config(path: str) -> CloudConfig:
    """Read `--cloud-config`; an empty path means no file."""
    text = read_cloud_config(path)
    return CloudConfig() if text is None else parse_cloud_config(text, source=path)


# --- metadata-server defaults ---------------------------------------------------------------


def metadata_host(environ: Mapping[str, str] | None = None) -> str:
    """The metadata server, `GCE_METADATA_HOST` when set (as google-auth honours it)."""
    env = os.environ if environ is None else environ
    return env.get("GCE_METADATA_HOST", "").strip() or DEFAULT_METADATA_HOST


def read_metadata(path: str, *, host: str, timeout: float = 3.0) -> str:
    # Imported here: the plugin module loads this module for every command.
    import urllib.error
    import urllib.request

    url = f"http://{host}/computeMetadata/v1/{path}"
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return str(response.read().decode("utf-8")).strip()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ConfigurationError(f"metadata server {host}: GET {path} failed: {exc}") from exc


@dataclass(frozen=True, slots=True)
class Location:
    """Where auto-discovery looks: the project and the zones (and region, when regional)."""

    project: str
    location: str
    regional: bool

    @property
    def region(self) -> str:
        return self.location if self.regional else zone_region(self.location)


def resolve_location(config: CloudConfig, environ: Mapping[str, str] | None = None) -> Location:
    """Project and location from the cloud-config, or the metadata server for what it lacks;
    a `ConfigurationError` saying where to set them when neither has them."""
    project = config.project_id
    location = config.local_zone
    if not project or not location:
        host = metadata_host(environ)
        hint = (
            "set project-id and local-zone in the [global] section of --cloud-config, or run "
            "on a GCE instance whose metadata server answers"
        )
        try:
            if not project:
                project = read_metadata("project/project-id", host=host)
            if not location:
                zone_path = read_metadata("instance/zone", host=host)
                location = zone_path.rsplit("/", 1)[-1]
        except ConfigurationError as exc:
            raise ConfigurationError(f"gce provider: no project or location: {exc}; {hint}") from None
        if not is_zone(location):
            raise ConfigurationError(f"metadata server {host}: instance/zone = {location!r}: expected projects/<n>/zones/<zone>")
    if config.regional and is_zone(location):
        location = zone_region(location)
    return Location(project=project, location=location, regional=config.regional)


def fetch_alt_token(token_url: str, token_body: str, timeout: float = 30.0) -> tuple[str, str]:
    """POST `token_body` to `token_url` (GKE's alternative token source); returns
    (access token, expiry in RFC 3339)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        token_url, data=token_body.encode("utf-8"), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ConfigurationError(f"token-url {token_url}: fetching a token failed: {exc}") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("accessToken"), str):
        raise ConfigurationError(f"token-url {token_url}: the reply has no accessToken; expected JSON {{accessToken, expireTime}}")
    return payload["accessToken"], str(payload.get("expireTime", ""))
