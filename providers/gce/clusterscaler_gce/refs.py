"""Names of GCE objects: MIG and instance references, their URLs and provider IDs.

A MIG is named by project, location and name. The location is a zone (`us-central1-b`) for a
zonal MIG and a region (`us-central1`) for a regional one; zones always end in `-<letter>`,
regions never do, so the location tells which kind a MIG is.

The node group id is the MIG's URL as Cluster Autoscaler spells it,
`https://www.googleapis.com/compute/v1/projects/<p>/zones/<z>/instanceGroups/<name>`
(`regions/<r>` for a regional MIG), and a node's provider ID is `gce://<p>/<zone>/<instance>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterscaler.api import ConfigurationError

URL_PREFIX = "https://www.googleapis.com/compute/v1/projects/"
PROVIDER_ID_PREFIX = "gce://"
_REGION = re.compile(r"^[a-z]+(?:-[a-z]+)*[0-9]+$")
_ZONE = re.compile(r"^[a-z]+(?:-[a-z]+)*[0-9]+-[a-z][a-z0-9]*$")
# GCE resource names: lowercase letter, then letters, digits and dashes, at most 63.
_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
# Project ids, including the legacy `domain.com:project` form.
_PROJECT = re.compile(r"^(?:[a-z0-9.-]+:)?[a-z][-a-z0-9]{4,28}[a-z0-9]$")
_URL = re.compile(
    r"^(?:https?://[^/]+)?/?(?:compute/(?:v1|beta|alpha)/)?projects/(?P<project>[^/]+)/"
    r"(?P<kind>zones|regions)/(?P<location>[^/]+)/(?P<resource>[A-Za-z]+)/(?P<name>[^/?#]+)$"
)
MIG_FORM = (
    "a MIG URL (https://www.googleapis.com/compute/v1/projects/<project>/zones/<zone>/"
    "instanceGroups/<name>, or regions/<region>/ for a regional MIG) or <project>/<zone>/<name>"
)


def is_zone(location: str) -> bool:
    return bool(_ZONE.match(location))


def is_region(location: str) -> bool:
    return bool(_REGION.match(location))


def zone_region(zone: str) -> str:
    """`us-central1-b` -> `us-central1`."""
    if not is_zone(zone):
        raise ConfigurationError(f"zone {zone!r}: expected a region followed by -<letter>, e.g. us-central1-b")
    return zone.rsplit("-", 1)[0]


@dataclass(frozen=True, slots=True, order=True)
class MigRef:
    """One MIG: `location` is its zone, or its region when `regional`."""

    project: str
    location: str
    name: str

    @property
    def regional(self) -> bool:
        return is_region(self.location)

    @property
    def region(self) -> str:
        return self.location if self.regional else zone_region(self.location)

    @property
    def url(self) -> str:
        kind = "regions" if self.regional else "zones"
        return f"{URL_PREFIX}{self.project}/{kind}/{self.location}/instanceGroups/{self.name}"

    def __str__(self) -> str:
        return f"{self.project}/{self.location}/{self.name}"


@dataclass(frozen=True, slots=True, order=True)
class InstanceRef:
    project: str
    zone: str
    name: str

    @property
    def url(self) -> str:
        return f"{URL_PREFIX}{self.project}/zones/{self.zone}/instances/{self.name}"

    @property
    def provider_id(self) -> str:
        return f"{PROVIDER_ID_PREFIX}{self.project}/{self.zone}/{self.name}"


def parse_mig(value: str, source: str) -> MigRef:
    """A MIG from a URL (instanceGroups or instanceGroupManagers, zonal or regional) or
    `<project>/<location>/<name>`. `source` names where the value came from in errors."""
    text = value.strip()
    match = _URL.match(text)
    if match is not None:
        if match["resource"] not in ("instanceGroups", "instanceGroupManagers"):
            raise ConfigurationError(
                f"{source}: {value!r} names a {match['resource']!r} resource; expected {MIG_FORM}"
            )
        project, location, name = match["project"], match["location"], match["name"]
        kind = match["kind"]
    else:
        parts = text.split("/")
        if len(parts) != 3 or "://" in text:
            raise ConfigurationError(f"{source}: {value!r} is not a MIG reference; expected {MIG_FORM}")
        project, location, name = parts
        kind = "zones" if is_zone(location) else "regions"
    if not _PROJECT.match(project):
        raise ConfigurationError(f"{source}: {value!r}: project {project!r} is not a GCE project id; expected {MIG_FORM}")
    if kind == "zones" and not is_zone(location):
        raise ConfigurationError(f"{source}: {value!r}: {location!r} is not a zone (e.g. us-central1-b); expected {MIG_FORM}")
    if kind == "regions" and not is_region(location):
        raise ConfigurationError(
            f"{source}: {value!r}: {location!r} is neither a zone (e.g. us-central1-b) nor a region "
            f"(e.g. us-central1); expected {MIG_FORM}"
        )
    if not _NAME.match(name):
        raise ConfigurationError(
            f"{source}: {value!r}: MIG name {name!r} is not a GCE resource name (lowercase letters, "
            f"digits and dashes, starting with a letter); expected {MIG_FORM}"
        )
    return MigRef(project=project, location=location, name=name)


def parse_instance_url(url: str) -> InstanceRef:
    """`.../projects/<p>/zones/<z>/instances/<name>` (any host) -> InstanceRef."""
    match = _URL.match(url.strip())
    if match is None or match["resource"] != "instances" or match["kind"] != "zones":
        raise ValueError(f"instance URL {url!r}: expected .../projects/<project>/zones/<zone>/instances/<name>")
    return InstanceRef(project=match["project"], zone=match["location"], name=match["name"])


def parse_provider_id(provider_id: str) -> InstanceRef | None:
    """`gce://<project>/<zone>/<name>` -> InstanceRef, or None for another cloud's ID."""
    if not provider_id.startswith(PROVIDER_ID_PREFIX):
        return None
    parts = provider_id[len(PROVIDER_ID_PREFIX) :].split("/")
    if len(parts) != 3 or not all(parts):
        return None
    return InstanceRef(project=parts[0], zone=parts[1], name=parts[2])


def last_segment(url: str) -> str:
    """The name at the end of a resource URL (`.../machineTypes/n1-standard-4` -> `n1-standard-4`)."""
    return url.rstrip("/").rsplit("/", 1)[-1]
